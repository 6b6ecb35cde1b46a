"""REST: the per-vertex views of Flink's web UI (a job's vertex page and its tabs).

Flink 2.3's dashboard asks, for each vertex of a job it shows: `/watermarks`,
`/backpressure`, `/flamegraph`, `/subtasktimes`, `/taskmanagers`, `/accumulators`,
`/subtasks/accumulators` and `/jm-operator-metrics`, besides the vertex details and
metrics (job_routes.py, metric_routes.py). Each answers in Flink's shape, from the
vertex's subtasks as the RestfulGateway keeps them (live jobs, and jobs archived in
the job store with their attempts):

- watermarks, jm-operator-metrics: no event time and no operator coordinators here, so
  Flink's answer for none: an empty metric list.
- flamegraph: the tasks' work runs in Spark's JVM, which the JobManager does not
  sample: Flink's "disabled" answer (endTimestamp -2), which the UI explains.
- backpressure: busy and idle ratios measured from the tasks' own time (Flink's
  accumulated busy/idle time: flink_runtime/io/metrics.py), a running attempt that has
  not reported yet counted busy since it started; never back-pressured (a task writes
  its result partition to files, it never waits on its consumer), so level "ok".
- subtasktimes, taskmanagers: when each subtask entered each state, where it ran.
- accumulators: each subtask's records and bytes, as Flink's user accumulators.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query

from flink_runtime.executiongraph import TASK_COUNT_KEYS, VertexIOMetrics
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.jobmanager.job_snapshots import ms
from flink_runtime.rest.job_views import aggregated_statistics, io_metrics_json
from flink_runtime.rest.metric_routes import metric_list

if TYPE_CHECKING:
    from flink_runtime.jobmanager.live_snapshots import SubtaskSnapshot, VertexSubtasks
    from flink_runtime.jobmanager.restful_gateway import RestfulGateway

# Flink's VertexFlameGraph.disabled(): the UI says sampling is off.
FLAME_GRAPH_DISABLED = -2
# Flink's BackPressureLevel thresholds on the back-pressured ratio (ok <= 0.1 < low <= 0.5 < high).
_LOW, _HIGH = 0.10, 0.50
_ACCUMULATED = {
    "numRecordsIn": "records_in",
    "numRecordsOut": "records_out",
    "numBytesIn": "bytes_in",
    "numBytesOut": "bytes_out",
}


def busy_idle_ms(subtask: SubtaskSnapshot, now: float) -> tuple[float, float]:
    """(busy, idle) milliseconds the subtask measured; a RUNNING attempt that has not
    reported yet (attempts report with their final state) is busy since it started."""
    busy, idle = float(subtask.io.busy_ms), float(subtask.io.idle_ms)
    running_since = subtask.state_timestamps.get("RUNNING")
    if subtask.status == "RUNNING" and not subtask.io_complete and running_since is not None:
        busy += max(0.0, now - running_since) * 1000
    return busy, idle


def backpressure_level(ratio: float) -> str:
    return "ok" if ratio <= _LOW else "low" if ratio <= _HIGH else "high"


def backpressure(vertex: VertexSubtasks, now: float) -> dict[str, Any]:
    """Flink's JobVertexBackPressureInfo."""
    subtasks = []
    for subtask in vertex.subtasks:
        busy, idle = busy_idle_ms(subtask, now)
        total = busy + idle
        subtasks.append(
            {
                "subtask": subtask.subtask,
                "attempt-number": subtask.attempt,
                "backpressure-level": backpressure_level(0.0),
                "ratio": 0.0,
                "idleRatio": round(idle / total, 3) if total else 0.0,
                "busyRatio": round(busy / total, 3) if total else 0.0,
            }
        )
    return {
        "status": "ok",
        "backpressure-level": backpressure_level(max((s["ratio"] for s in subtasks), default=0.0)),
        "end-timestamp": ms(now),
        "subtasks": subtasks,
    }


def subtask_times(vertex: VertexSubtasks, now: float) -> dict[str, Any]:
    """Flink's SubtasksTimesInfo: when each subtask's current attempt entered each state."""
    subtasks = []
    for subtask in vertex.subtasks:
        timestamps = {state: ms(at) for state, at in subtask.state_timestamps.items()}
        started = subtask.state_timestamps.get("DEPLOYING") or min(subtask.state_timestamps.values(), default=None)
        duration = -1 if started is None else int(((subtask.end or now) - started) * 1000)
        subtasks.append(
            {
                "subtask": subtask.subtask,
                "host": subtask.host or "(unassigned)",
                "endpoint": subtask.endpoint or "(unassigned)",
                "duration": duration,
                "timestamps": timestamps,
            }
        )
    return {"id": vertex.id, "name": vertex.name, "now": ms(now), "subtasks": subtasks}


def vertex_taskmanagers(vertex: VertexSubtasks, now: float) -> dict[str, Any]:
    """Flink's JobVertexTaskManagersInfo: the vertex's subtasks grouped by TaskManager."""
    groups: dict[str, list[SubtaskSnapshot]] = {}
    for subtask in vertex.subtasks:
        groups.setdefault(subtask.task_manager_id or "(unassigned)", []).append(subtask)
    taskmanagers = []
    for tm_id, subtasks in groups.items():
        counts = {key.upper(): 0 for key in TASK_COUNT_KEYS if key != "total"}
        for subtask in subtasks:
            counts[subtask.status] = counts.get(subtask.status, 0) + 1
        starts = [s.start for s in subtasks if s.start is not None]
        ends = [s.end for s in subtasks]
        start = min(starts) if starts else None
        end = max(e for e in ends if e is not None) if ends and all(e is not None for e in ends) else None
        io = VertexIOMetrics(IOMetrics.merge(s.io for s in subtasks), all(s.io_complete for s in subtasks))
        per_subtask = [io_metrics_json(VertexIOMetrics(s.io, s.io_complete)) for s in subtasks]
        taskmanagers.append(
            {
                "host": subtasks[0].host or "(unassigned)",
                "endpoint": subtasks[0].endpoint or "(unassigned)",
                "taskmanager-id": tm_id,
                "status": _aggregate_status(counts),
                "start-time": ms(start),
                "end-time": ms(end),
                "duration": -1 if start is None else int(((end or now) - start) * 1000),
                "metrics": io_metrics_json(io),
                "status-counts": counts,
                "aggregated": {"metrics": aggregated_statistics(per_subtask)},
            }
        )
    return {"id": vertex.id, "name": vertex.name, "now": ms(now), "taskmanagers": taskmanagers}


def _aggregate_status(counts: dict[str, int]) -> str:
    """A group's state as Flink's ExecutionJobVertex.getAggregateJobVertexState reads it."""
    for state in ("FAILED", "CANCELING", "CANCELED", "RUNNING", "INITIALIZING", "DEPLOYING", "SCHEDULED"):
        if counts.get(state):
            return state
    return "FINISHED" if counts.get("FINISHED") else "CREATED"


def _user_accumulators(io: IOMetrics) -> list[dict[str, str]]:
    return [
        {"name": name, "type": "LongCounter", "value": str(getattr(io, field))} for name, field in _ACCUMULATED.items()
    ]


def accumulators(vertex: VertexSubtasks) -> dict[str, Any]:
    """Flink's JobVertexAccumulatorsInfo: the vertex's records and bytes in and out."""
    return {"id": vertex.id, "user-accumulators": _user_accumulators(IOMetrics.merge(s.io for s in vertex.subtasks))}


def subtask_accumulators(vertex: VertexSubtasks) -> dict[str, Any]:
    """Flink's SubtasksAllAccumulatorsInfo: each subtask's records and bytes."""
    return {
        "id": vertex.id,
        "parallelism": vertex.parallelism,
        "subtasks": [
            {
                "subtask": s.subtask,
                "attempt": s.attempt,
                "host": s.host or "(unassigned)",
                "endpoint": s.endpoint or "(unassigned)",
                "user-accumulators": _user_accumulators(s.io),
            }
            for s in vertex.subtasks
        ],
    }


def vertex_routes(gateway: RestfulGateway) -> APIRouter:
    router = APIRouter()
    prefix = "/jobs/{job_id}/vertices/{vertex_id}"

    @router.get(prefix + "/watermarks", summary="Watermarks per subtask: none (no event time here)")
    async def watermarks(job_id: str, vertex_id: str) -> list[dict[str, str]]:
        gateway.vertex_subtasks(job_id, vertex_id)  # 404 for an unknown job or vertex
        return []

    @router.get(prefix + "/jm-operator-metrics", summary="Metrics of the vertex's operator coordinators: none")
    async def jm_operator_metrics(
        job_id: str, vertex_id: str, get: str | None = Query(None, description="Comma-separated metric names.")
    ) -> list[dict[str, str]]:
        gateway.vertex_subtasks(job_id, vertex_id)
        return metric_list({}, get)

    @router.get(prefix + "/flamegraph", summary="Flame graph: disabled (the tasks' work runs in Spark's JVM)")
    async def flamegraph(
        job_id: str,
        vertex_id: str,
        type: str = Query("on_cpu", description="on_cpu, off_cpu or full (Flink's)."),  # noqa: A002
        subtaskindex: int | None = Query(None, ge=0),
    ) -> dict[str, Any]:
        gateway.vertex_subtasks(job_id, vertex_id)
        return {"endTimestamp": FLAME_GRAPH_DISABLED, "data": None}

    @router.get(prefix + "/backpressure", summary="Busy and idle ratios per subtask, from measured task time")
    async def vertex_backpressure(job_id: str, vertex_id: str) -> dict[str, Any]:
        return backpressure(gateway.vertex_subtasks(job_id, vertex_id), time.time())

    @router.get(prefix + "/subtasktimes", summary="When each subtask entered each state")
    async def vertex_subtask_times(job_id: str, vertex_id: str) -> dict[str, Any]:
        return subtask_times(gateway.vertex_subtasks(job_id, vertex_id), time.time())

    @router.get(prefix + "/taskmanagers", summary="The vertex's subtasks grouped by TaskManager")
    async def taskmanagers(job_id: str, vertex_id: str) -> dict[str, Any]:
        return vertex_taskmanagers(gateway.vertex_subtasks(job_id, vertex_id), time.time())

    @router.get(prefix + "/accumulators", summary="The vertex's records and bytes, as accumulators")
    async def vertex_accumulators(job_id: str, vertex_id: str) -> dict[str, Any]:
        return accumulators(gateway.vertex_subtasks(job_id, vertex_id))

    @router.get(prefix + "/subtasks/accumulators", summary="Each subtask's records and bytes, as accumulators")
    async def vertex_subtask_accumulators(job_id: str, vertex_id: str) -> dict[str, Any]:
        return subtask_accumulators(gateway.vertex_subtasks(job_id, vertex_id))

    return router
