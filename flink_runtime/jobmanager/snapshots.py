"""Snapshots of JobManager state as JSON, with Flink REST API v1 field names: REST serves
them, and the JobManager archives a job's last ones in the job store when it ends.

Times are epoch milliseconds, -1 where a time is not reached yet, as Flink answers.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from flink_runtime.executiongraph import (
    TASK_COUNT_KEYS,
    ExecutionJobVertex,
    ExecutionState,
    JobStatus,
    aggregate_vertex_state,
    vertex_task_counts,
)

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmanager import JobManager
    from flink_runtime.jobmanager.jobmaster import JobMaster
    from flink_runtime.jobmanager.resource_manager import RegisteredTaskManager


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


def job_overview(job: JobMaster) -> dict[str, Any]:
    last_modification = max(job.status_timestamps.values())
    return {
        "jid": job.job_id,
        "name": job.name,
        "state": job.status.value,
        **_times(job.status_timestamps[JobStatus.INITIALIZING], _job_end(job)),
        "last-modification": _ms(last_modification),
        "tasks": job_task_counts(job),
    }


def _vertex_times(ejv: ExecutionJobVertex) -> tuple[float | None, float | None]:
    starts = [v.current_execution.state_timestamps.get(ExecutionState.DEPLOYING) for v in ejv.task_vertices]
    started = [s for s in starts if s is not None]
    start = min(started) if started else None
    if not all(v.current_execution.is_terminal for v in ejv.task_vertices):
        return start, None
    ends = [v.current_execution.state_timestamps[v.current_execution.state] for v in ejv.task_vertices]
    return start, max(ends) if ends else None


def vertex_details(ejv: ExecutionJobVertex) -> dict[str, Any]:
    start, end = _vertex_times(ejv)
    return {
        "id": ejv.id,
        "name": ejv.name,
        "maxParallelism": ejv.max_parallelism,
        "parallelism": ejv.parallelism,
        "status": aggregate_vertex_state(ejv).value,
        **_times(start, end),
        # Job details key vertex task counts by state name, unlike the lower-case job overview.
        "tasks": {key.upper(): count for key, count in vertex_task_counts(ejv).items()},
        "metrics": {},
    }


def vertex_subtasks(jobmanager: JobManager, job: JobMaster, ejv: ExecutionJobVertex) -> dict[str, Any]:
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
        **_split_progress(job, ejv.id),
    }


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
                "inputs": inputs,
            }
        )
    return {"jid": job.job_id, "name": job.name, "type": "BATCH", "nodes": nodes}


def job_details(job: JobMaster) -> dict[str, Any]:
    vertices = [vertex_details(ejv) for ejv in job.graph.vertices.values()] if job.graph is not None else []
    status_counts = dict.fromkeys((state.value for state in ExecutionState), 0)
    for vertex in vertices:
        status_counts[vertex["status"]] += 1
    return {
        "jid": job.job_id,
        "name": job.name,
        "isStoppable": False,
        "state": job.status.value,
        "job-type": "BATCH",
        **_times(job.status_timestamps[JobStatus.INITIALIZING], _job_end(job)),
        "maxParallelism": -1,
        "now": _ms(time.time()),
        "timestamps": {status.value: _ms(job.status_timestamps.get(status)) for status in JobStatus},
        "vertices": vertices,
        "status-counts": status_counts,
        "plan": job_plan(job),
    }


def job_exceptions(job: JobMaster, max_exceptions: int = 20) -> dict[str, Any]:
    entries = [entry.to_json() for entry in job.exceptions]
    root = job.root_exception
    return {
        "root-exception": root.stacktrace if root is not None else None,
        "timestamp": _ms(root.timestamp) if root is not None else None,
        "all-exceptions": [
            {
                "exception": entry["stacktrace"],
                "task": entry["taskName"],
                "location": entry["location"],
                "timestamp": entry["timestamp"],
                "taskManagerId": entry["taskManagerId"],
            }
            for entry in entries[:max_exceptions]
        ],
        "truncated": len(entries) > max_exceptions,
        "exceptionHistory": {"entries": entries[:max_exceptions], "truncated": len(entries) > max_exceptions},
    }


def taskmanager_info(jobmanager: JobManager, registration: RegisteredTaskManager) -> dict[str, Any]:
    pool = jobmanager.slot_pool
    free = (
        pool.free_slots_of(registration.task_manager_id) if pool.has_task_manager(registration.task_manager_id) else 0
    )
    cpu = float(registration.resources.get("cpu_cores", registration.slots))
    memory_mb = float(registration.resources.get("memory_mb", 0))
    per_slot_cpu = cpu / registration.slots if registration.slots else 0.0
    return {
        "id": registration.task_manager_id,
        "path": registration.address,
        "host": registration.host,
        "dataPort": -1,
        "jmxPort": -1,
        "timeSinceLastHeartbeat": _ms(time.time() - (time.monotonic() - registration.last_heartbeat)),
        "slotsNumber": registration.slots,
        "freeSlots": free,
        "totalResource": {"cpuCores": cpu, "taskHeapMemory": int(memory_mb)},
        "freeResource": {
            "cpuCores": per_slot_cpu * free,
            "taskHeapMemory": int(memory_mb * free / max(1, registration.slots)),
        },
        "hardware": {
            "cpuCores": int(cpu),
            "physicalMemory": int(memory_mb * 2**20),
            "freeMemory": -1,
            "managedMemory": -1,
        },
    }
