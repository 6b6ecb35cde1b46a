"""What the JobManager tells about a job, as domain records (Flink's ArchivedExecutionGraph
and JobDetails): built from a live JobMaster, or read back from the job store for a job
that ended in an earlier run. The REST API (rest/job_views.py) turns them into Flink's
JSON; the job store archives them as they are (`archive_records`).

Times are epoch milliseconds, -1 where a time is not reached yet (as Flink keeps them),
and durations are taken when the snapshot is: a running job's keeps growing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec

from flink_runtime.executiongraph import (
    TASK_COUNT_KEYS,
    ExecutionJobVertex,
    ExecutionState,
    JobStatus,
    aggregate_vertex_state,
    vertex_io_metrics,
    vertex_task_counts,
)
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.jobmanager.live_snapshots import SubtaskSnapshot, TaskManagerLookup, subtask_snapshot
from flink_runtime.scheduler.exception_history import ExceptionEntry

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster

# How many exception-history entries a finished job keeps in the job store (the most
# GET /jobs/:id/exceptions?maxExceptions= can ask for).
ARCHIVED_EXCEPTIONS = 1000


class VertexSnapshot(msgspec.Struct, kw_only=True):
    """One job vertex: its subtasks' aggregate state, times, counts and I/O."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int
    status: str  # the ExecutionState its subtasks aggregate to
    start_time: int
    end_time: int
    duration: int
    task_counts: dict[str, int]  # subtasks per ExecutionState (TASK_COUNT_KEYS, lower case)
    io: IOMetrics
    io_complete: bool  # every current attempt has reported its I/O


class PlanInput(msgspec.Struct, kw_only=True):
    num: int
    id: str  # the producing vertex
    ship_strategy: str
    distribution_pattern: str


class PlanNode(msgspec.Struct, kw_only=True):
    """One vertex of the job's dataflow plan."""

    id: str
    parallelism: int
    operator: str
    description: str
    inputs: list[PlanInput]


class JobPlan(msgspec.Struct, kw_only=True):
    """The job's dataflow plan."""

    job_id: str
    name: str
    job_type: str
    nodes: list[PlanNode]


class RoundsSnapshot(msgspec.Struct, kw_only=True):
    """A continuous job's rounds (rounds.py): how many ran, whether it waits for new input."""

    count: int  # rounds started in this run, the running one included
    waiting: bool  # between rounds: every subtask finished the last one; the job keeps its slots
    last_round_end: int  # when the last round's output was published (epoch ms), -1 before
    # Slots the job holds now: its subtasks', and between rounds the idle ones it keeps
    # for the next round (until slot.idle.timeout). 0 in documents archived before it.
    slots: int = 0


class JobSummary(msgspec.Struct, kw_only=True):
    """A job as the job list shows it (Flink's JobDetails)."""

    job_id: str
    name: str
    state: str
    job_type: str  # "BATCH" or "STREAMING"
    start_time: int
    end_time: int
    duration: int
    last_modification: int
    task_counts: dict[str, int]  # TASK_COUNT_KEYS, "total" last


class JobSnapshot(msgspec.Struct, kw_only=True):
    """A job as its details show it (Flink's ArchivedExecutionGraph). Only an archived
    one carries its subtasks' attempts (`subtasks`, by vertex id): a running job's are
    read from its ExecutionGraph when asked for."""

    job_id: str
    name: str
    state: str
    job_type: str
    start_time: int
    end_time: int
    duration: int
    last_modification: int
    taken_at: int  # when this snapshot was taken (Flink's "now")
    status_timestamps: dict[str, int]  # each JobStatus reached, when
    vertices: list[VertexSnapshot]
    plan: list[PlanNode]
    # Archived jobs only; empty in archives written before attempts were kept.
    subtasks: dict[str, list[SubtaskSnapshot]] = {}
    rounds: RoundsSnapshot | None = None  # a continuous job's

    def summary(self) -> JobSummary:
        counts = dict.fromkeys(TASK_COUNT_KEYS, 0)
        for vertex in self.vertices:
            for key, value in vertex.task_counts.items():
                if key in counts:
                    counts[key] += value
        counts["total"] = sum(vertex.parallelism for vertex in self.vertices)
        return JobSummary(
            job_id=self.job_id,
            name=self.name,
            state=self.state,
            job_type=self.job_type,
            start_time=self.start_time,
            end_time=self.end_time,
            duration=self.duration,
            last_modification=self.last_modification,
            task_counts=counts,
        )


class ExceptionHistory(msgspec.Struct, kw_only=True):
    """The failures that restarted or ended the job, in the JobMaster's order (the
    first is the root exception); `truncated` when more happened than are kept."""

    entries: list[ExceptionEntry]
    truncated: bool = False

    @property
    def root(self) -> ExceptionEntry | None:
        return self.entries[0] if self.entries else None


def ms(seconds: float | None) -> int:
    return -1 if seconds is None else int(seconds * 1000)


def _times(start: float | None, end: float | None, now: float) -> tuple[int, int, int]:
    duration = -1 if start is None else int(((end or now) - start) * 1000)
    return ms(start), ms(end), duration


def job_type(job: JobMaster) -> str:
    """Flink's JobType: a job whose sources keep watching for input runs as STREAMING."""
    return "STREAMING" if job.is_continuous else "BATCH"


def _job_times(job: JobMaster, now: float) -> tuple[int, int, int]:
    end = job.status_timestamps.get(job.status) if job.status.is_terminal else None
    return _times(job.status_timestamps[JobStatus.INITIALIZING], end, now)


def job_summary(job: JobMaster) -> JobSummary:
    counts = dict.fromkeys(TASK_COUNT_KEYS, 0)
    if job.graph is not None:
        for ejv in job.graph.vertices.values():
            for key, value in vertex_task_counts(ejv).items():
                counts[key] += value
    counts["total"] = job.graph.total_subtasks if job.graph is not None else 0
    start, end, duration = _job_times(job, time.time())
    return JobSummary(
        job_id=job.job_id,
        name=job.name,
        state=job.status.value,
        job_type=job_type(job),
        start_time=start,
        end_time=end,
        duration=duration,
        last_modification=ms(max(job.status_timestamps.values())),
        task_counts=counts,
    )


def vertex_snapshot(ejv: ExecutionJobVertex, now: float, streaming: bool = False) -> VertexSnapshot:
    """`streaming`: the vertex of a RUNNING continuous job, which runs again each round:
    between rounds its subtasks have FINISHED the last one, but the vertex is RUNNING (as a
    Flink streaming job's vertex is until the job ends), and has no end time."""
    starts = [v.current_execution.state_timestamps.get(ExecutionState.DEPLOYING) for v in ejv.task_vertices]
    started = [s for s in starts if s is not None]
    start = min(started) if started else None
    end = None
    if all(v.current_execution.is_terminal for v in ejv.task_vertices):
        ends = [v.current_execution.state_timestamps[v.current_execution.state] for v in ejv.task_vertices]
        end = max(ends) if ends else None
    status = aggregate_vertex_state(ejv)
    if streaming and status is ExecutionState.FINISHED:
        status, end = ExecutionState.RUNNING, None
    start_ms, end_ms, duration = _times(start, end, now)
    io, complete = vertex_io_metrics(ejv)
    return VertexSnapshot(
        id=ejv.id,
        name=ejv.name,
        parallelism=ejv.parallelism,
        max_parallelism=ejv.max_parallelism,
        status=status.value,
        start_time=start_ms,
        end_time=end_ms,
        duration=duration,
        task_counts=vertex_task_counts(ejv),
        io=io,
        io_complete=complete,
    )


def plan_nodes(job: JobMaster) -> list[PlanNode]:
    graph = job.job_graph
    producer_of = {dataset.id: dataset.producer for dataset in graph.intermediate_datasets}
    # The ExecutionGraph's parallelism once built: the one decided from the data, as the
    # vertices' (scheduler/adaptive_parallelism.py); the job graph's (its upper bound) before.
    running = job.graph.vertices if job.graph is not None else {}
    return [
        PlanNode(
            id=vertex.id,
            parallelism=running[vertex.id].parallelism if vertex.id in running else vertex.parallelism,
            operator=vertex.invokable,
            description=vertex.name,
            inputs=[
                PlanInput(
                    num=number,
                    id=producer_of.get(edge.source, edge.source),
                    ship_strategy=edge.partitioner.value.upper(),
                    distribution_pattern=edge.distribution_pattern.value,
                )
                for number, edge in enumerate(e for e in graph.edges if e.target == vertex.id)
            ],
        )
        for vertex in graph.vertices
    ]


def rounds_snapshot(job: JobMaster) -> RoundsSnapshot | None:
    if not job.is_continuous:
        return None
    rounds = job.rounds
    return RoundsSnapshot(
        count=rounds.round + 1,
        waiting=rounds.idle,
        last_round_end=ms(rounds.round_ended_at),
        slots=job.deployer.slots.held_slots,
    )


def job_snapshot(job: JobMaster) -> JobSnapshot:
    now = time.time()
    start, end, duration = _job_times(job, now)
    streaming = job.is_continuous and job.status is JobStatus.RUNNING
    return JobSnapshot(
        job_id=job.job_id,
        name=job.name,
        state=job.status.value,
        job_type=job_type(job),
        start_time=start,
        end_time=end,
        duration=duration,
        last_modification=ms(max(job.status_timestamps.values())),
        taken_at=ms(now),
        status_timestamps={status.value: ms(at) for status, at in job.status_timestamps.items()},
        vertices=[vertex_snapshot(ejv, now, streaming) for ejv in job.graph.vertices.values()]
        if job.graph is not None
        else [],
        plan=plan_nodes(job),
        rounds=rounds_snapshot(job),
    )


def exception_history(job: JobMaster, limit: int = ARCHIVED_EXCEPTIONS) -> ExceptionHistory:
    return ExceptionHistory(entries=list(job.exceptions[:limit]), truncated=len(job.exceptions) > limit)


# -- the job store's documents ------------------------------------------------------------------


def _no_task_manager(task_manager_id: str) -> None:
    return None


def archive_records(
    job: JobMaster, task_manager: TaskManagerLookup = _no_task_manager
) -> tuple[JobSnapshot, dict[str, Any]]:
    """What the job store keeps of an ended job: its snapshot with every subtask's
    attempts (current and prior), and its exception history (as builtins: its entries
    are the job's own). The snapshot is made of new containers and immutable values
    only, so another thread (the store's) may encode it while the job goes on: without
    msgspec.to_builtins here, ~30 ms of the JobManager's loop for 10,000 subtasks."""
    snapshot = job_snapshot(job)
    if job.graph is not None:
        snapshot.subtasks = {
            ejv.id: [subtask_snapshot(vertex, task_manager) for vertex in ejv.task_vertices]
            for ejv in job.graph.vertices.values()
        }
    return snapshot, msgspec.to_builtins(exception_history(job))
