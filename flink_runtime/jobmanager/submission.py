"""A job's submission: whether this cluster accepts it, and when it is answered.

`validate_submission` refuses a JobGraph this cluster cannot run, naming every problem
found: its structure's, or else those of its config (against the cluster's) and of the
paths it names (against the allowed directories), all at once.
SubmitJob is answered once every source vertex has a subtask running (with more
subtasks than slots not all can run at once), or as soon as the job failed first,
with why (`SubmissionWaiters`)."""

from __future__ import annotations

import asyncio

from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import JobStatus
from flink_runtime.invokable import BUILTIN_INVOKABLES
from flink_runtime.jobgraph.job_config import job_config_problems
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobgraph.validation import InvalidJobGraph, validate_job_graph
from flink_runtime.rpc.messages import JobSubmissionFailure, Message, Success
from flink_runtime.security.paths import allowed_directories, job_path_problems


def validate_submission(job_graph: JobGraph, config: Configuration) -> None:
    """Raises InvalidJobGraph with the problems found, if this cluster (`config`) cannot run it."""
    # A job's own invokable classes are never imported here: the planner process
    # imports them at job start, where a bad one still fails the submission.
    validate_job_graph(job_graph, invokable_exists=_builtin_or_class_path, builtin_invokables=BUILTIN_INVOKABLES)
    problems = job_config_problems(job_graph.config, config)
    problems += job_path_problems(job_graph.config, job_graph.vertices, allowed_directories(config))
    if problems:
        raise InvalidJobGraph(problems)


def _builtin_or_class_path(name: str) -> bool:
    return name in BUILTIN_INVOKABLES or ":" in name


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
