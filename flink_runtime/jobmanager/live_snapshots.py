"""What only a running JobManager tells about its jobs, as records: a vertex's subtasks
and where they run, the job's configuration, its per-vertex I/O and input splits (what
Flink's accumulators show), and its metrics. The job store keeps none of these but the
subtasks and their prior attempts (JobSnapshot.subtasks, as Flink's ArchivedExecutionVertex
keeps its prior executions); the REST API (rest/job_views.py, rest/metric_routes.py)
shapes them into Flink's JSON.

Times here are epoch seconds as the JobMaster keeps them; the REST API renders them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from flink_runtime.executiongraph import (
    Execution,
    ExecutionJobVertex,
    ExecutionState,
    ExecutionVertex,
    subtask_io_metrics,
    vertex_io_metrics,
)
from flink_runtime.io.metrics import NO_IO, IOMetrics
from flink_runtime.jobmanager import metrics
from flink_runtime.scheduler.restart import restart_strategy

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster
    from flink_runtime.jobmanager.resource_manager import RegisteredTaskManager


class SplitCounts(msgspec.Struct, kw_only=True):
    """A source vertex's input splits: how many exist, are completed, were handed out
    (more hand-outs than splits: splits were redone after failures)."""

    total: int
    completed: int
    assignments: int


class SubtaskSnapshot(msgspec.Struct, kw_only=True):
    """One attempt of a subtask (Flink's AccessExecution), and where it ran: the current
    one carries the ended ones before it in `prior_attempts` (oldest first, at most
    jobmanager.execution.attempts-history-size)."""

    subtask: int
    status: str
    attempt: int
    attempt_id: str
    task_manager_id: str | None
    endpoint: str | None  # its TaskManager's RPC address (None: not registered)
    host: str | None
    start: float | None  # deployed at
    end: float | None  # ended at
    state_timestamps: dict[str, float]  # each ExecutionState it entered, when
    io: IOMetrics
    io_complete: bool
    failure_cause: str | None
    prior_attempts: list[SubtaskSnapshot] = []  # none in an archive written before they were kept

    def find_attempt(self, attempt: int) -> SubtaskSnapshot | None:
        """The attempt with this number: this one, or a prior one still kept."""
        if attempt == self.attempt:
            return self
        return next((prior for prior in self.prior_attempts if prior.attempt == attempt), None)


class VertexSubtasks(msgspec.Struct, kw_only=True):
    id: str
    name: str
    parallelism: int
    max_parallelism: int
    subtasks: list[SubtaskSnapshot]
    splits: SplitCounts | None  # for a source vertex


class JobConfiguration(msgspec.Struct, kw_only=True):
    """The job's execution configuration (Flink's JobConfigInfo)."""

    job_id: str
    name: str
    restart_strategy: str  # described
    parallelism: int  # the largest of its vertices'
    user_config: dict[str, str]  # its JobGraph's keys (not masked yet)


class VertexAccumulators(msgspec.Struct, kw_only=True):
    name: str
    io: IOMetrics
    io_complete: bool
    splits: SplitCounts | None


class VertexMetrics(msgspec.Struct, kw_only=True):
    id: str
    name: str
    subtasks: list[dict[str, float]]  # each subtask's metrics, by Flink's names


class JobMetrics(msgspec.Struct, kw_only=True):
    job_id: str
    name: str
    metrics: dict[str, float]
    vertices: list[VertexMetrics]


def split_counts(job: JobMaster, vertex_id: str) -> SplitCounts | None:
    if vertex_id not in job.prepared_splits:
        return None
    progress = job.split_progress.get(vertex_id)
    return SplitCounts(
        total=job.prepared_splits[vertex_id],
        completed=progress.done() if progress else 0,
        assignments=progress.assignments if progress else 0,
    )


TaskManagerLookup = Callable[[str], "RegisteredTaskManager | None"]

# Each state's name: a dict look-up, where `state.value` is an enum descriptor call (a
# job's archive makes six per subtask: a fifth of its time with 10,000 subtasks).
_STATE_NAMES = {state: state.value for state in ExecutionState}


def attempt_snapshot(
    execution: Execution, task_manager: TaskManagerLookup, io: IOMetrics, io_complete: bool
) -> SubtaskSnapshot:
    registration = task_manager(execution.task_manager_id or "")
    # A prior attempt's TaskManager may be gone: its slot still says on which host it ran.
    host = registration.host if registration is not None else getattr(execution.assigned_resource, "host", None)
    return SubtaskSnapshot(
        subtask=execution.vertex.subtask_index,
        status=execution.state.value,
        attempt=execution.attempt_number,
        attempt_id=execution.attempt_id,
        task_manager_id=execution.task_manager_id,
        endpoint=registration.address if registration is not None else None,
        host=host,
        start=execution.state_timestamps.get(ExecutionState.DEPLOYING),
        end=execution.state_timestamps[execution.state] if execution.is_terminal else None,
        state_timestamps={_STATE_NAMES[state]: at for state, at in execution.state_timestamps.items()},
        io=io,
        io_complete=io_complete,
        failure_cause=execution.failure_cause,
    )


def subtask_snapshot(vertex: ExecutionVertex, task_manager: TaskManagerLookup) -> SubtaskSnapshot:
    """The subtask's current attempt, with its prior attempts."""
    io, complete = subtask_io_metrics(vertex)
    current = attempt_snapshot(vertex.current_execution, task_manager, io, complete)
    # A prior attempt's I/O is what it reported when it ended (nothing if it failed first).
    current.prior_attempts = [
        attempt_snapshot(prior, task_manager, prior.io_metrics or NO_IO, prior.io_metrics is not None)
        for prior in vertex.prior_executions
    ]
    return current


def vertex_subtasks(job: JobMaster, ejv: ExecutionJobVertex, task_manager: TaskManagerLookup) -> VertexSubtasks:
    return VertexSubtasks(
        id=ejv.id,
        name=ejv.name,
        parallelism=ejv.parallelism,
        max_parallelism=ejv.max_parallelism,
        subtasks=[subtask_snapshot(vertex, task_manager) for vertex in ejv.task_vertices],
        splits=split_counts(job, ejv.id),
    )


def job_configuration(job: JobMaster) -> JobConfiguration:
    return JobConfiguration(
        job_id=job.job_id,
        name=job.name,
        restart_strategy=restart_strategy(job.config).describe(),
        parallelism=max((vertex.parallelism for vertex in job.job_graph.vertices), default=1),
        user_config={key: str(value) for key, value in job.job_graph.config.items()},
    )


def accumulators(job: JobMaster) -> list[VertexAccumulators]:
    vertices = job.graph.vertices.values() if job.graph is not None else []
    return [
        VertexAccumulators(name=ejv.name, io=io, io_complete=complete, splits=split_counts(job, ejv.id))
        for ejv in vertices
        for io, complete in [vertex_io_metrics(ejv)]
    ]


def vertex_metrics(job: JobMaster, ejv: ExecutionJobVertex) -> VertexMetrics:
    done = metrics.split_counts(job, ejv.id)
    return VertexMetrics(
        id=ejv.id, name=ejv.name, subtasks=[metrics.subtask_metrics(job, vertex, done) for vertex in ejv.task_vertices]
    )


def job_metrics(job: JobMaster, with_vertices: bool = True) -> JobMetrics:
    vertices = job.graph.vertices.values() if job.graph is not None and with_vertices else []
    return JobMetrics(
        job_id=job.job_id,
        name=job.name,
        metrics=metrics.job_metrics(job),
        vertices=[vertex_metrics(job, ejv) for ejv in vertices],
    )
