"""A job's progress as task-log lines, and the last lines of its failing subtask.

While a task waits for its job (on a worker or deferred in the triggerer) it logs one
line whenever the job moved on, at most every PROGRESS_INTERVAL seconds::

    Job 0123... RUNNING: Read text -> Partial aggregate 1/2 finished, splits 12/24,
    records out 900 | Final aggregate -> Write Parquet 0/2 finished

Read from what the JobManager already serves: GET /jobs/:id (each vertex's subtask
counts, records and bytes) and GET /jobs/:id/accumulators (a source's input splits).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

PROGRESS_INTERVAL = 5.0
FAILURE_LOG_LINES = 20

_TASK_NAME = re.compile(r"^(?P<name>.*) \((?P<index>\d+)/(?P<parallelism>\d+)\)(#\d+)?$")


def describe_progress(job_id: str, details: Mapping[str, Any], accumulators: Mapping[str, Any]) -> str:
    """One line: the job's state and, per vertex, subtasks finished of total, input
    splits done of total (sources), records and bytes written."""
    values = {item["name"]: item["value"] for item in accumulators.get("user-task-accumulators", [])}
    parts = []
    for vertex in details.get("vertices", []):
        name = str(vertex.get("name", vertex.get("id", "?")))
        tasks = vertex.get("tasks", {})
        part = f"{name} {tasks.get('FINISHED', 0)}/{vertex.get('parallelism', '?')} finished"
        total = values.get(f"{name}.splits.total")
        if total is not None:
            part += f", splits {values.get(f'{name}.splits.completed', '0')}/{total}"
        metrics = vertex.get("metrics", {})
        if metrics.get("write-records"):
            part += f", records out {metrics['write-records']:,}"
        if metrics.get("write-bytes"):
            part += f" ({_size(int(metrics['write-bytes']))})"
        parts.append(part)
    return f"Job {job_id} {details.get('state', '?')}: " + " | ".join(parts)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


class ProgressLog:
    """Logs a job's progress line when it changed, at most every `interval` seconds
    (time passed in: monotonic seconds)."""

    def __init__(self, log: logging.Logger | logging.LoggerAdapter, interval: float = PROGRESS_INTERVAL) -> None:
        self.log = log
        self.interval = interval
        self._last = ""
        self._next_at = 0.0

    def due(self, now: float) -> bool:
        return now >= self._next_at

    def report(self, line: str, now: float) -> None:
        self._next_at = now + self.interval
        if line != self._last:
            self._last = line
            self.log.info("%s", line)


def failing_subtask(exceptions: Mapping[str, Any], details: Mapping[str, Any]) -> tuple[str, int] | None:
    """(vertex id, subtask index) of the job's root exception, if a subtask raised it:
    its exception-history entry names the task as Flink does, "<vertex name> (i/n)"."""
    entries = exceptions.get("exceptionHistory", {}).get("entries") or []
    task_name = (entries[0].get("taskName") or "") if entries else ""
    match = _TASK_NAME.match(task_name)
    if match is None:
        return None
    for vertex in details.get("vertices", []):
        if vertex.get("name") == match["name"]:
            return str(vertex["id"]), int(match["index"]) - 1
    return None
