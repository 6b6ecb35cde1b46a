"""One job's asynchronous operation requests (savepoints and stops in one set, as Flink
keeps them; checkpoints in another), answered as Flink's asynchronous operation results:
`{"status": {"id": "IN_PROGRESS"}}`, then `COMPLETED` with the operation's result
(`{"location": ...}`, `{"checkpointId": ...}`) or a `failure-cause`.

A request id is the client's triggerId when it sent one, so a retry finds its request.
Every change is handed to `on_change`: the savepoint requests are kept in the job store,
so a request id answers after a JobManager failover too."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from flink_runtime.checkpoint.coordinator import describe_failure

Status = dict[str, Any]

FAILED_OVER = (
    "The JobManager failed before this {kind} completed; the job was recovered from "
    "its latest checkpoint and is running again. Trigger the {retry} again."
)
ENDED_UNFINISHED = (
    "The JobManager that took this {kind} request stopped before it completed, and the job "
    "ended {status} without it: the request failed."
)


class OperationRequests(dict[str, Status]):
    """request id -> its status, for one kind of operation ("savepoint", "checkpoint")."""

    def __init__(self, kind: str, on_change: Callable[[str, Status], None] | None = None) -> None:
        super().__init__()
        self.kind = kind
        self._on_change = on_change

    def start(self, request_id: str | None) -> str:
        """A new request, under the client's triggerId when it sent one."""
        request_id = request_id or uuid.uuid4().hex
        self._set(request_id, {"status": {"id": "IN_PROGRESS"}})
        return request_id

    def complete(self, request_id: str, result: dict[str, Any] | None, failure: BaseException | None) -> None:
        """Completed with `result` (the operation's answer), or failed with `failure`."""
        operation = result or {} if failure is None else {"failure-cause": describe_failure(failure)}
        self._set(request_id, {"status": {"id": "COMPLETED"}, "operation": operation})

    def in_progress(self) -> list[str]:
        return [request_id for request_id, status in self.items() if _state(status) == "IN_PROGRESS"]

    def restore(self, stored: dict[str, Status]) -> None:
        """Requests of the run a JobManager failover ended: their outcome where it was
        recorded; one still in progress then can never complete, and says so."""
        for request_id, status in stored.items():
            if _state(status) == "COMPLETED":
                self[request_id] = status
            else:
                self._set(request_id, _failed_status(self._failed_over()))

    def _failed_over(self) -> str:
        retry = "savepoint or stop" if self.kind == "savepoint" else self.kind
        return FAILED_OVER.format(kind=self.kind, retry=retry)

    def _set(self, request_id: str, status: Status) -> None:
        self[request_id] = status
        if self._on_change is not None:
            self._on_change(request_id, status)


def settled(stored: Mapping[str, Status], kind: str, job_status: str) -> dict[str, Status]:
    """The requests of a job that ended in an earlier run, as stored, except that one
    still IN_PROGRESS (its JobManager died before recording the outcome) answers failed:
    no JobManager runs the job any more, so nothing could ever complete it."""
    why = ENDED_UNFINISHED.format(kind=kind, status=job_status)
    return {
        request_id: status if _state(status) == "COMPLETED" else _failed_status(why)
        for request_id, status in stored.items()
    }


def _failed_status(why: str) -> Status:
    failure = {"class": "JobManagerFailover", "stack-trace": why}
    return {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": failure}}


def _state(status: Status) -> str | None:
    return status.get("status", {}).get("id")
