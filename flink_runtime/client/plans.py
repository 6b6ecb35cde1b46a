"""Operations of several requests, written once for JobClient and AsyncJobClient.

A plan is a generator that yields what it needs done and returns its result:

* a `Call` (client/calls.py): the client sends it and resumes the plan with the parsed
  answer, or with the client's error (JobClientError) raised at the `yield`;
* a `Pause`: the client sleeps (time.sleep or asyncio.sleep) and resumes it.

So ``details = yield calls.job_details(job_id)`` reads like blocking code, and every
decision (when a wait is over, what a 409 after a retry means, how
long to pause) lives here, while the I/O lives in the two drivers (`drive`, `a_drive`).
This is the sans-I/O style of h11 and hyper-h2, with generators for sequencing: loops written
twice, once with ``await``, would drift apart (a path or an error rule changed on one side only).

Callers compose plans with ``yield from``; the Airflow hook builds its own
(flink_runtime.airflow.hooks.plans) from these calls.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Collection, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec

from flink_runtime.client import calls
from flink_runtime.client.calls import Call, EventPage, JobStatusEvent
from flink_runtime.client.errors import JobClientError, JobNotFound
from flink_runtime.client.job_graph_source import (
    JobGraphSource,
    library_file_problem,
    library_files,
    load_job_graph_document,
    set_savepoint_config,
)
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph.jobgraph import new_job_id

__all__ = [
    "Pause",
    "Plan",
    "a_drive",
    "decisive_state",
    "drive",
    "is_globally_terminal",
    "savepoint",
    "stop",
    "submit",
    "upload_library",
    "wait_for_savepoint",
    "wait_for_state",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Pause:
    """Sleep this many seconds before resuming the plan."""

    seconds: float


Plan = Generator[Call[Any] | Pause, Any, T]


class _Done(Generic[T]):
    """The plan's result (its StopIteration's value)."""

    def __init__(self, value: T) -> None:
        self.value = value


def _advance(plan: Plan[T], answer: Any, error: JobClientError | None) -> Call[Any] | Pause | _Done[T]:
    """The plan's next step, given the last one's answer or error."""
    try:
        return plan.send(answer) if error is None else plan.throw(error)
    except StopIteration as done:
        return _Done(done.value)


def drive(plan: Plan[T], send: Callable[[Call[Any]], Any], sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `plan` to its result, sending its calls with `send` (JobClient's)."""
    answer: Any = None
    error: JobClientError | None = None
    try:
        while not isinstance(step := _advance(plan, answer, error), _Done):
            answer, error = None, None
            try:
                if isinstance(step, Pause):
                    sleep(step.seconds)
                else:
                    answer = send(step)
            except JobClientError as exc:
                error = exc
        return step.value
    finally:
        plan.close()


async def a_drive(
    plan: Plan[T], send: Callable[[Call[Any]], Awaitable[Any]], sleep: Callable[[float], Awaitable[None]]
) -> T:
    """`drive` on an event loop (AsyncJobClient's)."""
    answer: Any = None
    error: JobClientError | None = None
    try:
        while not isinstance(step := _advance(plan, answer, error), _Done):
            answer, error = None, None
            try:
                if isinstance(step, Pause):
                    await sleep(step.seconds)
                else:
                    answer = await send(step)
            except JobClientError as exc:
                error = exc
        return step.value
    finally:
        plan.close()


# -- submitting ------------------------------------------------------------------------------------------


def upload_library(path: str | os.PathLike[str]) -> Plan[str]:
    """Store a .py/.zip/.whl/.egg file in the JobManager's blob store; returns its key
    (`blob:<sha256>/<name>`), for a JobGraph's libraries. ValueError before any request
    for a file that is no library."""
    file = Path(path)
    problem = library_file_problem(str(path), file)
    if problem:
        raise ValueError(problem)
    return (yield calls.upload_library(file.name, file.read_bytes()))


def submit(
    job_graph: JobGraphSource,
    job_id: str | None = None,
    savepoint_path: str | os.PathLike[str] | None = None,
    allow_non_restored_state: bool = False,
) -> Plan[str]:
    """Upload the graph's local libraries, submit it, return its job id once accepted.

    Unreadable or non-JSON input raises ValueError before any request. The job id is
    assigned here when the graph has none, which makes retrying the POST safe: a retry
    whose first attempt got through answers 409, meaning "accepted".
    """
    document = load_job_graph_document(job_graph)
    set_savepoint_config(document, savepoint_path, allow_non_restored_state)
    # Local library files go to the JobManager's blob store first; the graph we send
    # names them by key (the document is a copy: the caller's graph is left alone).
    local_libraries = library_files(document)
    if local_libraries:
        keys = {}
        for library in dict.fromkeys(local_libraries.values()):
            keys[library] = yield from upload_library(library)
        document["libraries"] = [
            keys[local_libraries[entry]] if entry in local_libraries else entry for entry in document["libraries"]
        ]
    if job_id is not None:
        document["job_id"] = job_id
    if not document.get("job_id"):
        document["job_id"] = new_job_id()
    attempts = _Counter()
    answer = yield calls.submit_job(msgspec.json.encode(document), before_attempt=attempts)
    return calls.submitted_job_id(answer, str(document["job_id"]), attempts.count)


class _Counter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


# -- savepoints ------------------------------------------------------------------------------------------


def wait_for_savepoint(
    job_id: str, request_id: str, timeout: float | None = None, poll_interval: float = 0.2
) -> Plan[str]:
    """Poll the savepoint request until it completes; returns the savepoint's location.

    Raises SavepointFailed with the JobManager's failure cause, and TimeoutError (naming
    the job and the request) when `timeout` seconds pass first; the savepoint may still
    complete on the JobManager after that.
    """
    if poll_interval < 0:
        raise ValueError(f"poll_interval must be >= 0, got {poll_interval}")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        answer = yield calls.savepoint_status(job_id, request_id)
        location = calls.savepoint_outcome(job_id, request_id, answer)
        if location is not None:
            return location
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(
                f"savepoint request {request_id} of job {job_id} did not complete within {timeout:g} s; "
                "it may still complete on the JobManager"
            )
        yield Pause(poll_interval if remaining is None else min(poll_interval, remaining))


def savepoint(
    job_id: str,
    target_directory: str | None = None,
    cancel_job: bool = False,
    timeout: float | None = None,
    poll_interval: float = 0.2,
) -> Plan[str]:
    """Trigger a savepoint and wait for it; returns its location (see `wait_for_savepoint`)."""
    request_id = yield calls.trigger_savepoint(job_id, target_directory, cancel_job)
    return (yield from wait_for_savepoint(job_id, request_id, timeout, poll_interval))


def stop(
    job_id: str,
    target_directory: str | None = None,
    drain: bool = False,
    timeout: float | None = None,
    poll_interval: float = 0.2,
) -> Plan[str]:
    """Stop the job with a savepoint and wait for it; returns the savepoint's location."""
    request_id = yield calls.stop_with_savepoint(job_id, target_directory, drain)
    return (yield from wait_for_savepoint(job_id, request_id, timeout, poll_interval))


# -- waiting for a job -------------------------------------------------------------------------------------


def is_globally_terminal(state: str) -> bool:
    try:
        return JobStatus(state).is_globally_terminal
    except ValueError:
        return False  # a state this version does not know ends nothing


def decisive_state(new_states: Sequence[str], current: str, watched: Collection[str]) -> str | None:
    """The state that ends a wait for any of ``watched``, or None to keep waiting.

    ``new_states`` are one event page's transitions in order and ``current`` the job's
    state when the page was answered. A transition counts even if the job has moved on
    since (a short RUNNING is not missed); a globally terminal state always ends the
    wait, since nothing follows it. ``current`` decides only a page without events: the
    job's first page (its early events may have left the bounded log), or a terminal
    state whose event left it.
    """
    for state in new_states:
        if state in watched or is_globally_terminal(state):
            return state
    if not new_states and (current in watched or is_globally_terminal(current)):
        return current
    return None


def wait_for_state(
    job_id: str,
    targets: Collection[str] = (),
    timeout: float | None = None,
    poll_timeout: float = 30.0,
    on_event: Callable[[JobStatusEvent], None] | None = None,
    between_polls: Callable[[], Plan[None]] | None = None,
) -> Plan[JobStatus]:
    """Follow the job until it reaches one of `targets` or ends; returns that state.

    One long poll of the job's events per state change, or per `poll_timeout` seconds of
    quiet, replayed from the job's first event so that a state passed before the wait
    began still counts. A globally terminal state ends the wait even if it is no target:
    the caller tells success from failure. A job that left the live jobs (archived, so
    without events) is judged by its state. Raises TimeoutError naming the job and its
    last state after `timeout` seconds, JobNotFound for a job the JobManager never knew.

    on_event: called with each transition, before it is judged.
    between_polls: a plan run after each page that decided nothing (e.g. a progress report).
    """
    watched = set(targets)
    deadline = None if timeout is None else time.monotonic() + timeout
    since = 0
    last_state = "unknown"
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            goal = f"reach {' or '.join(sorted(watched))}" if watched else "end"
            raise TimeoutError(f"job {job_id} did not {goal} within {timeout:g} s; its last state was {last_state}")
        try:
            page: EventPage = yield calls.job_events(
                job_id, since, poll_timeout if remaining is None else min(poll_timeout, remaining)
            )
        except JobNotFound:
            # Only live jobs have events; an archived one (it ended) still answers GET /jobs/:id.
            details = yield calls.job_details(job_id)
            return JobStatus(details["state"])
        since = page.next
        last_state = page.state.value
        if on_event is not None:
            for event in page.events:
                on_event(event)
        decided = decisive_state([event.new_state.value for event in page.events], last_state, watched)
        if decided is not None:
            return JobStatus(decided)
        if between_polls is not None:
            yield from between_polls()
