"""Reading back what the job store archived of an ended job (job_snapshots.py's records).

Stores written before the records were archived hold Flink's REST answers of the time
instead (GET /jobs/:id and /jobs/:id/exceptions, "jid" gives them away): a user who
upgrades keeps those jobs, so they are read into the same records, losslessly (the
REST API answers them as it did).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from flink_runtime.io.metrics import IOMetrics
from flink_runtime.jobmanager.job_snapshots import (
    ExceptionHistory,
    JobSnapshot,
    PlanInput,
    PlanNode,
    VertexSnapshot,
)
from flink_runtime.scheduler.exception_history import ExceptionEntry


def from_archive(details: dict[str, Any], exceptions: dict[str, Any] | None) -> tuple[JobSnapshot, ExceptionHistory]:
    """The records of a job the store archived, in either format."""
    snapshot = _legacy_snapshot(details) if "jid" in details else msgspec.convert(details, JobSnapshot)
    if exceptions is None:
        return snapshot, ExceptionHistory(entries=[])
    if "exceptionHistory" in exceptions or "root-exception" in exceptions:
        return snapshot, _legacy_exception_history(exceptions)
    return snapshot, msgspec.convert(exceptions, ExceptionHistory)


def _seconds(milliseconds: int) -> float:
    """Epoch seconds whose `int(s * 1000)` is `milliseconds` again (half a millisecond
    on top absorbs the float's rounding)."""
    return (int(milliseconds) + 0.5) / 1000


def _count(value: Any) -> int:
    """A count as the old answer wrote it (an int, a float, or Flink's "NaN"); 0 if none."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0
    return int(number) if math.isfinite(number) else 0


def _legacy_snapshot(details: dict[str, Any]) -> JobSnapshot:
    plan = details.get("plan") or {}
    return JobSnapshot(
        job_id=details["jid"],
        name=details.get("name", ""),
        state=details.get("state", ""),
        job_type=details.get("job-type", "BATCH"),
        start_time=details.get("start-time", -1),
        end_time=details.get("end-time", -1),
        duration=details.get("duration", -1),
        last_modification=details.get("end-time", -1),
        taken_at=details.get("now", details.get("end-time", -1)),
        status_timestamps={
            status: reached for status, at in (details.get("timestamps") or {}).items() if (reached := _count(at))
        },
        vertices=[_legacy_vertex(vertex) for vertex in details.get("vertices", [])],
        plan=[_legacy_plan_node(node) for node in plan.get("nodes", [])],
    )


def _legacy_vertex(vertex: dict[str, Any]) -> VertexSnapshot:
    metrics = vertex.get("metrics") or {}
    return VertexSnapshot(
        id=str(vertex.get("id")),
        name=vertex.get("name", ""),
        parallelism=_count(vertex.get("parallelism")),
        max_parallelism=_count(vertex.get("maxParallelism", vertex.get("parallelism"))),
        status=vertex.get("status", ""),
        start_time=vertex.get("start-time", -1),
        end_time=vertex.get("end-time", -1),
        duration=vertex.get("duration", -1),
        task_counts={key.lower(): _count(count) for key, count in (vertex.get("tasks") or {}).items()},
        io=IOMetrics(
            records_in=_count(metrics.get("read-records")),
            records_out=_count(metrics.get("write-records")),
            bytes_in=_count(metrics.get("read-bytes")),
            bytes_out=_count(metrics.get("write-bytes")),
            busy_ms=_count(metrics.get("accumulated-busy-time")),
            idle_ms=_count(metrics.get("accumulated-idle-time")),
        ),
        io_complete=bool(metrics.get("read-records-complete", True)),
    )


def _legacy_plan_node(node: dict[str, Any]) -> PlanNode:
    return PlanNode(
        id=str(node.get("id")),
        parallelism=_count(node.get("parallelism")),
        operator=node.get("operator", ""),
        description=node.get("description", ""),
        inputs=[
            PlanInput(
                num=int(edge.get("num", number)),
                id=str(edge.get("id")),
                ship_strategy=edge.get("ship_strategy", ""),
                distribution_pattern=edge.get("distribution_pattern", ""),
            )
            for number, edge in enumerate(node.get("inputs", []))
        ],
    )


def _legacy_exception_history(exceptions: dict[str, Any]) -> ExceptionHistory:
    history = exceptions.get("exceptionHistory") or {}
    return ExceptionHistory(
        entries=[
            ExceptionEntry(
                exception_name=entry.get("exceptionName", ""),
                stacktrace=entry.get("stacktrace", ""),
                timestamp=_seconds(entry.get("timestamp", 0)),
                task_name=entry.get("taskName"),
                location=entry.get("endpoint"),
                task_manager_id=entry.get("taskManagerId"),
            )
            for entry in history.get("entries", [])
        ],
        truncated=bool(history.get("truncated", exceptions.get("truncated", False))),
    )
