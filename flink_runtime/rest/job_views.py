"""Flink's REST API v1 JSON of a job, from the records the JobManager's RestfulGateway
answers: jobmanager/job_snapshots.py's (live jobs and jobs archived in the job store
alike) and, for the views only a running JobManager has (subtasks, configuration,
accumulators), jobmanager/live_snapshots.py's.

Times are epoch milliseconds, -1 where a time is not reached yet, as Flink answers.
"""

from __future__ import annotations

import time
from typing import Any

from flink_runtime.executiongraph import TASK_COUNT_KEYS, JobStatus, VertexIOMetrics
from flink_runtime.jobmanager.job_snapshots import (
    ExceptionHistory,
    JobSnapshot,
    JobSummary,
    PlanNode,
    RoundsSnapshot,
    VertexSnapshot,
    ms,
)
from flink_runtime.jobmanager.live_snapshots import (
    JobConfiguration,
    SplitCounts,
    SubtaskSnapshot,
    VertexAccumulators,
    VertexSubtasks,
)
from flink_runtime.security import masked_config

# Flink's names for what plans and runs a job here: one scheduler, which schedules
# lazily from the sources (Flink's default), and no operators waiting to be added.
SCHEDULER_TYPE = "Default"


def _times(start: float | None, end: float | None) -> dict[str, int]:
    now = time.time()
    duration = -1 if start is None else int(((end or now) - start) * 1000)
    return {"start-time": ms(start), "end-time": ms(end), "duration": duration}


def job_overview(job: JobSummary) -> dict[str, Any]:
    """One job of GET /jobs/overview (Flink's JobDetails)."""
    return {
        "jid": job.job_id,
        "name": job.name,
        "jobType": job.job_type,
        "schedulerType": SCHEDULER_TYPE,
        "start-time": job.start_time,
        "end-time": job.end_time,
        "duration": job.duration,
        "state": job.state,
        "last-modification": job.last_modification,
        "tasks": job.task_counts,
        "pending-operators": 0,
    }


def _rounds(rounds: RoundsSnapshot) -> dict[str, Any]:
    return {
        "count": rounds.count,
        "waiting": rounds.waiting,
        "last-round-end": rounds.last_round_end,
        "slots": rounds.slots,
    }


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


def vertex_details(vertex: VertexSnapshot) -> dict[str, Any]:
    return {
        "id": vertex.id,
        "slotSharingGroupId": SLOT_SHARING_GROUP_ID,
        "name": vertex.name,
        "maxParallelism": vertex.max_parallelism,
        "parallelism": vertex.parallelism,
        "status": vertex.status,
        "start-time": vertex.start_time,
        "end-time": vertex.end_time,
        "duration": vertex.duration,
        # Job details key vertex task counts by state name, unlike the lower-case job overview.
        "tasks": {key.upper(): count for key, count in vertex.task_counts.items()},
        "metrics": io_metrics_json(VertexIOMetrics(vertex.io, vertex.io_complete)),
    }


def subtask_attempt(attempt: SubtaskSnapshot) -> dict[str, Any]:
    """One attempt of a subtask (Flink's SubtaskExecutionAttemptDetailsInfo):
    GET /jobs/:id/vertices/:vid/subtasks/:n/attempts/:attempt."""
    return {
        "subtask": attempt.subtask,
        "status": attempt.status,
        "attempt": attempt.attempt,
        "attempt-id": attempt.attempt_id,
        "taskmanager-id": attempt.task_manager_id,
        "endpoint": attempt.endpoint,
        "host": attempt.host,
        **_times(attempt.start, attempt.end),
        "start_time": ms(attempt.start),
        "metrics": io_metrics_json(VertexIOMetrics(attempt.io, attempt.io_complete)),
        "status-duration": _status_durations(attempt.state_timestamps),
        "failure-cause": attempt.failure_cause,
    }


def subtask_details(subtask: SubtaskSnapshot) -> dict[str, Any]:
    """A subtask's current attempt and, under "prior-attempts" (oldest first), the ended
    attempts it keeps: GET /jobs/:id/vertices/:vid/subtasks/:n, and each subtask of
    GET /jobs/:id/vertices/:vid."""
    return {**subtask_attempt(subtask), "prior-attempts": [subtask_attempt(prior) for prior in subtask.prior_attempts]}


def vertex_subtasks(vertex: VertexSubtasks) -> dict[str, Any]:
    """GET /jobs/:id/vertices/:vid: each subtask's current attempt (and prior ones) and where it runs."""
    subtasks = [subtask_details(subtask) for subtask in vertex.subtasks]
    return {
        "id": vertex.id,
        "name": vertex.name,
        "parallelism": vertex.parallelism,
        "maxParallelism": vertex.max_parallelism,
        "now": ms(time.time()),
        "subtasks": subtasks,
        "aggregated": {
            "metrics": aggregated_statistics([subtask["metrics"] for subtask in subtasks]),
            "status-duration": aggregated_statistics([subtask["status-duration"] for subtask in subtasks]),
        },
        **_split_progress(vertex.splits),
    }


def _status_durations(state_timestamps: dict[str, float]) -> dict[str, int]:
    """Milliseconds the attempt spent in each state it passed (the current one until now)."""
    entered = sorted((at, state) for state, at in state_timestamps.items())
    ends = [at for at, _ in entered[1:]] + [time.time()]
    return {state: int((end - at) * 1000) for (at, state), end in zip(entered, ends, strict=True)}


def _split_progress(splits: SplitCounts | None) -> dict[str, Any]:
    """For source vertices: how many splits exist, are completed, and were handed out
    (more hand-outs than splits means splits were redone after failures)."""
    if splits is None:
        return {}
    return {"input-splits": {"total": splits.total, "completed": splits.completed, "assignments": splits.assignments}}


def job_config(job: JobConfiguration) -> dict[str, Any]:
    """GET /jobs/:id/config: Flink's JobConfigInfo. The user config is the job's own
    configuration (its JobGraph's keys), secrets masked."""
    return {
        "jid": job.job_id,
        "name": job.name,
        "execution-config": {
            "execution-mode": "PIPELINED",
            "restart-strategy": job.restart_strategy,
            "job-parallelism": job.parallelism,
            "object-reuse-mode": False,
            "user-config": masked_config(job.user_config),
        },
    }


def job_plan(job_id: str, name: str, job_type: str, nodes: list[PlanNode]) -> dict[str, Any]:
    return {
        "jid": job_id,
        "name": name,
        "type": job_type,
        "nodes": [
            {
                "id": node.id,
                "parallelism": node.parallelism,
                "operator": node.operator,
                "operator_strategy": "",
                "description": node.description,
                "optimizer_properties": {},
                "inputs": [
                    {
                        "num": edge.num,
                        "id": edge.id,
                        "ship_strategy": edge.ship_strategy,
                        "exchange": "blocking",
                        "distribution_pattern": edge.distribution_pattern,
                    }
                    for edge in node.inputs
                ],
            }
            for node in nodes
        ],
    }


def job_details(job: JobSnapshot) -> dict[str, Any]:
    """GET /jobs/:id (Flink's JobDetailsInfo)."""
    vertices = [vertex_details(vertex) for vertex in job.vertices]
    status_counts = {key.upper(): 0 for key in TASK_COUNT_KEYS if key != "total"}
    for vertex in vertices:
        status_counts[vertex["status"]] += 1
    # Flink lists every JobStatus, 0 for one never reached; RECONCILING is Flink's and
    # never reached here.
    timestamps = {status.value: max(0, job.status_timestamps.get(status.value, 0)) for status in JobStatus}
    timestamps |= {"RECONCILING": 0}
    plan = job_plan(job.job_id, job.name, job.job_type, job.plan)
    return {
        "jid": job.job_id,
        "application-id": job.job_id,
        "name": job.name,
        "isStoppable": False,
        "state": job.state,
        "job-type": job.job_type,
        "schedulerType": SCHEDULER_TYPE,
        "start-time": job.start_time,
        "end-time": job.end_time,
        "duration": job.duration,
        "maxParallelism": -1,
        "now": job.taken_at,
        "timestamps": timestamps,
        "vertices": vertices,
        "status-counts": status_counts,
        "plan": plan,
        "stream-graph": _stream_graph(plan),
        "pending-operators": 0,
        # Ours (not Flink's): a continuous job's rounds.
        **({"rounds": _rounds(job.rounds)} if job.rounds is not None else {}),
    }


def _stream_graph(plan: dict[str, Any]) -> dict[str, Any]:
    """Flink 2's stream graph: operators with their job vertex; here each vertex is one operator."""
    return {"nodes": [node | {"job_vertex_id": node["id"]} for node in plan["nodes"]]}


def job_exceptions(history: ExceptionHistory, max_exceptions: int = 20) -> dict[str, Any]:
    """Flink 2's `exceptionHistory` (each failure that restarted or ended the job, newest
    first), plus Flink 1's `root-exception` and `all-exceptions`, which older clients read."""
    entries = [entry.to_json() for entry in history.entries]
    truncated = len(entries) > max_exceptions or history.truncated
    root = history.root
    return {
        "root-exception": root.stacktrace if root is not None else None,
        "timestamp": ms(root.timestamp) if root is not None else None,
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
        "truncated": truncated,
        "exceptionHistory": {"entries": entries[:max_exceptions], "truncated": truncated},
    }


# Which of a vertex's I/O metrics /accumulators lists, by Flink's metric names.
_ACCUMULATED = {
    "numRecordsIn": "read-records",
    "numRecordsOut": "write-records",
    "numBytesIn": "read-bytes",
    "numBytesOut": "write-bytes",
}


def job_accumulators(vertices: list[VertexAccumulators]) -> dict[str, Any]:
    """GET /jobs/:id/accumulators: per vertex its records and bytes in and out and, for
    a source, its input splits (total, completed, handed out), as Flink's user-task
    accumulators (name, type, value as text)."""
    accumulators = []
    for vertex in vertices:
        metrics = io_metrics_json(VertexIOMetrics(vertex.io, vertex.io_complete))
        for name, key in _ACCUMULATED.items():
            accumulators.append({"name": f"{vertex.name}.{name}", "type": "LongCounter", "value": str(metrics[key])})
        for name, value in _split_progress(vertex.splits).get("input-splits", {}).items():
            accumulators.append({"name": f"{vertex.name}.splits.{name}", "type": "IntCounter", "value": str(value)})
    return {"job-accumulators": [], "user-task-accumulators": accumulators, "serialized-user-task-accumulators": {}}


# Flink's JobExecutionResult application status of each terminal job state.
APPLICATION_STATUS = {JobStatus.FINISHED: "SUCCEEDED", JobStatus.FAILED: "FAILED", JobStatus.CANCELED: "CANCELED"}


def execution_result(job: JobSnapshot, failure_cause: dict[str, Any] | None) -> dict[str, Any]:
    """GET /jobs/:id/execution-result (live or archived): IN_PROGRESS until the job is
    globally terminal, then its JobExecutionResult; a failed job's `failure_cause`
    (Flink's SerializedThrowable JSON) beside it."""
    if job.state not in {status.value for status in APPLICATION_STATUS}:
        return {"status": {"id": "IN_PROGRESS"}}
    result = {
        "id": job.job_id,
        "name": job.name,
        "application-status": APPLICATION_STATUS[JobStatus(job.state)],
        "accumulator-results": {},
        "net-runtime": max(0, job.duration),
        "application-id": job.job_id,
        "start-time": job.start_time,
        "end-time": job.end_time,
    }
    if job.state == JobStatus.FAILED.value and failure_cause is not None:
        result["failure-cause"] = failure_cause
    return {"status": {"id": "COMPLETED"}, "job-execution-result": result}
