"""Snapshots of JobManager state as JSON, with Flink REST API v1 field names: REST serves
them, and the JobManager archives a job's last ones in the job store when it ends.

Times are epoch milliseconds, -1 where a time is not reached yet, as Flink answers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime.executiongraph import (
    TASK_COUNT_KEYS,
    Execution,
    ExecutionJobVertex,
    ExecutionState,
    JobStatus,
    VertexIOMetrics,
    aggregate_vertex_state,
    subtask_io_metrics,
    vertex_io_metrics,
    vertex_task_counts,
)
from flink_runtime.scheduler.restart import restart_strategy
from flink_runtime.security import masked_config

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster
    from flink_runtime.jobmanager.resource_manager import RegisteredTaskManager


class TaskManagerRegistry(Protocol):
    """Where a subtask runs (the JobManager's registered TaskManagers)."""

    @property
    def task_managers(self) -> Mapping[str, RegisteredTaskManager]: ...


def _ms(seconds: float | None) -> int:
    return -1 if seconds is None else int(seconds * 1000)


def _times(start: float | None, end: float | None) -> dict[str, int]:
    now = time.time()
    duration = -1 if start is None else int(((end or now) - start) * 1000)
    return {"start-time": _ms(start), "end-time": _ms(end), "duration": duration}


def _job_end(job: JobMaster) -> float | None:
    return job.status_timestamps.get(job.status) if job.status.is_terminal else None


def job_task_counts(job: JobMaster) -> dict[str, int]:
    counts = dict.fromkeys(TASK_COUNT_KEYS, 0)
    if job.graph is not None:
        for ejv in job.graph.vertices.values():
            for key, value in vertex_task_counts(ejv).items():
                counts[key] += value
    counts["total"] = job.graph.total_subtasks if job.graph is not None else 0
    return counts


def job_type(job: JobMaster) -> str:
    """Flink's JobType: a job whose sources keep watching for input runs as STREAMING."""
    return "STREAMING" if job.is_continuous else "BATCH"


# Flink's names for what plans and runs a job here: one scheduler, which schedules
# lazily from the sources (Flink's default), and no operators waiting to be added.
SCHEDULER_TYPE = "Default"


def job_overview(job: JobMaster) -> dict[str, Any]:
    last_modification = max(job.status_timestamps.values())
    return {
        "jid": job.job_id,
        "name": job.name,
        "jobType": job_type(job),
        "schedulerType": SCHEDULER_TYPE,
        **_times(job.status_timestamps[JobStatus.INITIALIZING], _job_end(job)),
        "state": job.status.value,
        "last-modification": _ms(last_modification),
        "tasks": job_task_counts(job),
        "pending-operators": 0,
    }


def overview_from_details(details: dict[str, Any]) -> dict[str, Any]:
    """A job overview rebuilt from its archived details (a job of an earlier JobManager
    run, served from the job store): task counts are the sums of its vertices'."""
    counts = dict.fromkeys(TASK_COUNT_KEYS, 0)
    for vertex in details.get("vertices", []):
        for key, value in vertex.get("tasks", {}).items():
            if key.lower() in counts:
                counts[key.lower()] += int(value)
    counts["total"] = sum(int(vertex.get("parallelism", 0)) for vertex in details.get("vertices", []))
    return {
        "jid": details.get("jid"),
        "name": details.get("name"),
        "jobType": details.get("job-type", "BATCH"),
        "schedulerType": details.get("schedulerType", SCHEDULER_TYPE),
        "start-time": details.get("start-time", -1),
        "end-time": details.get("end-time", -1),
        "duration": details.get("duration", -1),
        "state": details.get("state"),
        "last-modification": details.get("end-time", -1),
        "tasks": counts,
        "pending-operators": 0,
    }


def _vertex_times(ejv: ExecutionJobVertex) -> tuple[float | None, float | None]:
    starts = [v.current_execution.state_timestamps.get(ExecutionState.DEPLOYING) for v in ejv.task_vertices]
    started = [s for s in starts if s is not None]
    start = min(started) if started else None
    if not all(v.current_execution.is_terminal for v in ejv.task_vertices):
        return start, None
    ends = [v.current_execution.state_timestamps[v.current_execution.state] for v in ejv.task_vertices]
    return start, max(ends) if ends else None


def io_metrics_json(measured: VertexIOMetrics) -> dict[str, Any]:
    """Flink's I/O metrics of a vertex or a subtask (flink_runtime/io/metrics.py says
    what each count means); "*-complete" once every current attempt has reported.
    Tasks here are never back-pressured."""
    metrics, complete = measured
    return {
        "read-bytes": metrics.bytes_in,
        "read-bytes-complete": complete,
        "write-bytes": metrics.bytes_out,
        "write-bytes-complete": complete,
        "read-records": metrics.records_in,
        "read-records-complete": complete,
        "write-records": metrics.records_out,
        "write-records-complete": complete,
        "accumulated-backpressured-time": 0,
        "accumulated-idle-time": metrics.idle_ms,
        "accumulated-busy-time": float(metrics.busy_ms),
    }


def aggregated_statistics(per_subtask: list[dict[str, Any]]) -> dict[str, Any]:
    """Flink's `aggregated` figures of a vertex: each number's min, max, sum, average and
    percentiles over the subtasks that have it."""
    aggregated: dict[str, Any] = {}
    keys = dict.fromkeys(k for m in per_subtask for k, v in m.items() if not isinstance(v, bool))
    for key in keys:
        values = sorted(float(m[key]) for m in per_subtask if key in m)

        def at(quantile: float, values: list[float] = values) -> float:
            return values[min(len(values) - 1, int(quantile * len(values)))]

        aggregated[key] = {
            "min": values[0],
            "max": values[-1],
            "avg": sum(values) / len(values),
            "sum": sum(values),
            "median": at(0.5),
            "p25": at(0.25),
            "p75": at(0.75),
            "p95": at(0.95),
        }
    return aggregated


# Every vertex shares one slot sharing group (one slot runs a whole pipeline of
# subtasks, as in Flink's default group); its id is fixed so answers are stable.
SLOT_SHARING_GROUP_ID = b"default".hex().ljust(32, "0")


def vertex_details(ejv: ExecutionJobVertex) -> dict[str, Any]:
    start, end = _vertex_times(ejv)
    return {
        "id": ejv.id,
        "slotSharingGroupId": SLOT_SHARING_GROUP_ID,
        "name": ejv.name,
        "maxParallelism": ejv.max_parallelism,
        "parallelism": ejv.parallelism,
        "status": aggregate_vertex_state(ejv).value,
        **_times(start, end),
        # Job details key vertex task counts by state name, unlike the lower-case job overview.
        "tasks": {key.upper(): count for key, count in vertex_task_counts(ejv).items()},
        "metrics": io_metrics_json(vertex_io_metrics(ejv)),
    }


def vertex_subtasks(jobmanager: TaskManagerRegistry, job: JobMaster, ejv: ExecutionJobVertex) -> dict[str, Any]:
    """GET /jobs/:id/vertices/:vid: each subtask's current attempt and where it runs."""
    subtasks = []
    for vertex in ejv.task_vertices:
        execution = vertex.current_execution
        registration = jobmanager.task_managers.get(execution.task_manager_id or "")
        start = execution.state_timestamps.get(ExecutionState.DEPLOYING)
        end = execution.state_timestamps[execution.state] if execution.is_terminal else None
        subtasks.append(
            {
                "subtask": vertex.subtask_index,
                "status": execution.state.value,
                "attempt": execution.attempt_number,
                "attempt-id": execution.attempt_id,
                "taskmanager-id": execution.task_manager_id,
                "endpoint": registration.address if registration is not None else None,
                "host": registration.host if registration is not None else None,
                **_times(start, end),
                "start_time": _ms(start),
                "metrics": io_metrics_json(subtask_io_metrics(vertex)),
                "status-duration": _status_durations(execution),
                "failure-cause": execution.failure_cause,
            }
        )
    return {
        "id": ejv.id,
        "name": ejv.name,
        "parallelism": ejv.parallelism,
        "maxParallelism": ejv.max_parallelism,
        "now": _ms(time.time()),
        "subtasks": subtasks,
        "aggregated": {
            "metrics": aggregated_statistics([subtask["metrics"] for subtask in subtasks]),
            "status-duration": aggregated_statistics([subtask["status-duration"] for subtask in subtasks]),
        },
        **_split_progress(job, ejv.id),
    }


def _status_durations(execution: Execution) -> dict[str, int]:
    """Milliseconds the attempt spent in each state it passed (the current one until now)."""
    entered = sorted((at, state.value) for state, at in execution.state_timestamps.items())
    ends = [at for at, _ in entered[1:]] + [time.time()]
    return {state: int((end - at) * 1000) for (at, state), end in zip(entered, ends, strict=True)}


def _split_progress(job: JobMaster, vertex_id: str) -> dict[str, Any]:
    """For source vertices: how many splits exist, are completed, and were handed out
    (more hand-outs than splits means splits were redone after failures)."""
    if vertex_id not in job.prepared_splits:
        return {}
    progress = job.split_progress.get(vertex_id)
    return {
        "input-splits": {
            "total": job.prepared_splits[vertex_id],
            "completed": len(progress.completed) if progress else 0,
            "assignments": progress.assignments if progress else 0,
        }
    }


def job_config(job: JobMaster) -> dict[str, Any]:
    """GET /jobs/:id/config: Flink's JobConfigInfo. The user config is the job's own
    configuration (its JobGraph's keys), secrets masked."""
    parallelism = max((vertex.parallelism for vertex in job.job_graph.vertices), default=1)
    return {
        "jid": job.job_id,
        "name": job.name,
        "execution-config": {
            "execution-mode": "PIPELINED",
            "restart-strategy": restart_strategy(job.config).describe(),
            "job-parallelism": parallelism,
            "object-reuse-mode": False,
            "user-config": masked_config({key: str(value) for key, value in job.job_graph.config.items()}),
        },
    }


def job_plan(job: JobMaster) -> dict[str, Any]:
    graph = job.job_graph
    producer_of = {dataset.id: dataset.producer for dataset in graph.intermediate_datasets}
    nodes = []
    for vertex in graph.vertices:
        inputs = [
            {
                "num": number,
                "id": producer_of.get(edge.source, edge.source),
                "ship_strategy": edge.partitioner.value.upper(),
                "exchange": "blocking",
                "distribution_pattern": edge.distribution_pattern.value,
            }
            for number, edge in enumerate(e for e in graph.edges if e.target == vertex.id)
        ]
        nodes.append(
            {
                "id": vertex.id,
                "parallelism": vertex.parallelism,
                "operator": vertex.invokable,
                "operator_strategy": "",
                "description": vertex.name,
                "optimizer_properties": {},
                "inputs": inputs,
            }
        )
    return {"jid": job.job_id, "name": job.name, "type": job_type(job), "nodes": nodes}


def job_details(job: JobMaster) -> dict[str, Any]:
    vertices = [vertex_details(ejv) for ejv in job.graph.vertices.values()] if job.graph is not None else []
    status_counts = {key.upper(): 0 for key in TASK_COUNT_KEYS if key != "total"}
    for vertex in vertices:
        status_counts[vertex["status"]] += 1
    # Flink lists every JobStatus, 0 for one never reached; RECONCILING is Flink's and
    # never reached here.
    timestamps = {status.value: _ms(job.status_timestamps.get(status)) for status in JobStatus}
    timestamps = {status: max(0, at) for status, at in timestamps.items()} | {"RECONCILING": 0}
    plan = job_plan(job)
    return {
        "jid": job.job_id,
        "application-id": job.job_id,
        "name": job.name,
        "isStoppable": False,
        "state": job.status.value,
        "job-type": job_type(job),
        "schedulerType": SCHEDULER_TYPE,
        **_times(job.status_timestamps[JobStatus.INITIALIZING], _job_end(job)),
        "maxParallelism": -1,
        "now": _ms(time.time()),
        "timestamps": timestamps,
        "vertices": vertices,
        "status-counts": status_counts,
        "plan": plan,
        "stream-graph": _stream_graph(plan),
        "pending-operators": 0,
    }


def _stream_graph(plan: dict[str, Any]) -> dict[str, Any]:
    """Flink 2's stream graph: operators with their job vertex; here each vertex is one operator."""
    return {"nodes": [node | {"job_vertex_id": node["id"]} for node in plan["nodes"]]}


def job_exceptions(job: JobMaster, max_exceptions: int = 20) -> dict[str, Any]:
    """Flink 2's `exceptionHistory` (each failure that restarted or ended the job, newest
    first), plus Flink 1's `root-exception` and `all-exceptions`, which older clients read."""
    entries = [entry.to_json() for entry in job.exceptions]
    root = job.root_exception
    return {
        "root-exception": root.stacktrace if root is not None else None,
        "timestamp": _ms(root.timestamp) if root is not None else None,
        "all-exceptions": [
            {
                "exception": entry["stacktrace"],
                "task": entry["taskName"],
                "location": entry["endpoint"],
                "timestamp": entry["timestamp"],
                "taskManagerId": entry["taskManagerId"],
            }
            for entry in entries[:max_exceptions]
        ],
        "truncated": len(entries) > max_exceptions,
        "exceptionHistory": {"entries": entries[:max_exceptions], "truncated": len(entries) > max_exceptions},
    }


# Which of a vertex's I/O metrics /accumulators lists, by Flink's metric names.
_ACCUMULATED = {
    "numRecordsIn": "read-records",
    "numRecordsOut": "write-records",
    "numBytesIn": "read-bytes",
    "numBytesOut": "write-bytes",
}


def job_accumulators(job: JobMaster) -> dict[str, Any]:
    """GET /jobs/:id/accumulators: per vertex its records and bytes in and out and, for
    a source, its input splits (total, completed, handed out), as Flink's user-task
    accumulators (name, type, value as text)."""
    accumulators = []
    for ejv in job.graph.vertices.values() if job.graph is not None else []:
        metrics = io_metrics_json(vertex_io_metrics(ejv))
        for name, key in _ACCUMULATED.items():
            accumulators.append({"name": f"{ejv.name}.{name}", "type": "LongCounter", "value": str(metrics[key])})
        for name, value in _split_progress(job, ejv.id).get("input-splits", {}).items():
            accumulators.append({"name": f"{ejv.name}.splits.{name}", "type": "IntCounter", "value": str(value)})
    return {"job-accumulators": [], "user-task-accumulators": accumulators, "serialized-user-task-accumulators": {}}


# Flink's JobExecutionResult application status of each terminal job state.
APPLICATION_STATUS = {JobStatus.FINISHED: "SUCCEEDED", JobStatus.FAILED: "FAILED", JobStatus.CANCELED: "CANCELED"}


def execution_result(details: dict[str, Any], root_exception: dict[str, Any] | None) -> dict[str, Any]:
    """GET /jobs/:id/execution-result from a job's details (live or archived): IN_PROGRESS
    until the job is globally terminal, then its JobExecutionResult. A failed job's
    `root_exception` (an exception-history entry) is returned beside it for the REST
    layer to turn into Flink's failure-cause."""
    state = details.get("state", "")
    if state not in {status.value for status in APPLICATION_STATUS}:
        return {"status": {"id": "IN_PROGRESS"}}
    result = {
        "id": details["jid"],
        "name": details.get("name", ""),
        "application-status": APPLICATION_STATUS[JobStatus(state)],
        "accumulator-results": {},
        "net-runtime": max(0, int(details.get("duration", 0))),
        "application-id": details["jid"],
        "start-time": details.get("start-time", -1),
        "end-time": details.get("end-time", -1),
    }
    if state == JobStatus.FAILED.value and root_exception is not None:
        result["failure-cause"] = root_exception
    return {"status": {"id": "COMPLETED"}, "job-execution-result": result}
