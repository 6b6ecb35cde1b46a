"""When a submission is answered: SubmitJob is answered once every source vertex has a
subtask running (with more subtasks than slots not all can run at once), or as soon as
the job failed first, with why."""

from __future__ import annotations

import asyncio

from flink_runtime.executiongraph import JobStatus
from flink_runtime.rpc.messages import JobSubmissionFailure, Message, Success


class SubmissionWaiters:
    def __init__(self, job_id: str) -> None:
        self._job_id = job_id
        # Source vertices none of whose subtasks has run yet.
        self._sources_not_running: set[str] = set()
        self._waiters: list[asyncio.Future[Message]] = []
        # Set when the job was refused as invalid (a bad graph, plan or user code).
        self.invalid_reason: str | None = None

    def expect_sources(self, vertex_ids: set[str]) -> None:
        self._sources_not_running = set(vertex_ids)

    def wait(self, status: JobStatus, root_cause: str | None) -> asyncio.Future[Message]:
        """A future answered once the sources run, or with the failure."""
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        if status.is_terminal or not self._sources_not_running and status is JobStatus.RUNNING:
            future.set_result(self._answer(status, root_cause))
        else:
            self._waiters.append(future)
        return future

    def vertex_running(self, vertex_id: str, status: JobStatus, root_cause: str | None) -> None:
        """A subtask of this vertex runs (or finished)."""
        self._sources_not_running.discard(vertex_id)
        if not self._sources_not_running and self._waiters:
            self.answer_all(status, root_cause)

    def answer_all(self, status: JobStatus, root_cause: str | None) -> None:
        answer = self._answer(status, root_cause)
        for future in self._waiters:
            if not future.done():
                future.set_result(answer)
        self._waiters.clear()

    def _answer(self, status: JobStatus, root_cause: str | None) -> Message:
        if self.invalid_reason is not None:
            return JobSubmissionFailure(job_id=self._job_id, reason=self.invalid_reason, kind="invalid")
        if status in (JobStatus.FAILED, JobStatus.CANCELED) and self._sources_not_running:
            return JobSubmissionFailure(job_id=self._job_id, reason=root_cause or status.value, kind="failed")
        return Success(job_id=self._job_id)
