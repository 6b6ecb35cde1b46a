"""Checkpoint statistics as Flink's CheckpointStatsTracker keeps them and its REST API
shows them (`GET /jobs/:id/checkpoints`, `.../checkpoints/details/:id`,
`.../checkpoints/config`), field for field.

Counts and the summary cover every checkpoint of the job; the history holds the last
`web.checkpoints.history` (Flink's default, 10); `latest` keeps the newest completed
checkpoint, savepoint and failure even once they left the history. Fields Flink fills
from what this runtime does not have (unaligned checkpoints, channel state, buffered
data) are Flink's values for none: 0, false.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from flink_runtime.configuration import WebOptions

# Flink's StatsSummary computes quantiles over the newest 10,000 values.
_QUANTILE_WINDOW = 10_000
# Flink's CheckpointStatistics class names (the JSON subtype property "className").
_CLASS_NAMES = {"COMPLETED": "completed", "FAILED": "failed", "IN_PROGRESS": "in_progress"}
_NO_DATA = {"alignment_buffered": 0, "processed_data": 0, "persisted_data": 0}


def _ms(seconds: float | None) -> int:
    return -1 if seconds is None else int(seconds * 1000)


@dataclass
class TaskStats:
    """One job vertex's part of a checkpoint (Flink's TaskCheckpointStatistics)."""

    num_subtasks: int = 0
    num_acknowledged: int = 0
    latest_ack_timestamp: float | None = None
    acknowledged_at: dict[int, float] = field(default_factory=dict)  # subtask index -> when


@dataclass
class CheckpointStats:
    checkpoint_id: int
    is_savepoint: bool
    trigger_timestamp: float
    num_subtasks: int
    terminal: bool = False  # a stop-with-savepoint's savepoint (Flink's SYNC_SAVEPOINT)
    status: str = "IN_PROGRESS"  # IN_PROGRESS | COMPLETED | FAILED
    num_acknowledged: int = 0
    latest_ack_timestamp: float | None = None
    external_path: str | None = None
    state_size: int = 0
    failure_message: str | None = None
    end_timestamp: float | None = None  # completed or failed
    discarded: bool = False
    tasks: dict[str, TaskStats] = field(default_factory=dict)

    @property
    def checkpoint_type(self) -> str:
        if not self.is_savepoint:
            return "CHECKPOINT"
        return "SYNC_SAVEPOINT" if self.terminal else "SAVEPOINT"

    def _duration_ms(self, until: float | None) -> int:
        return max(0, _ms((until or time.time()) - self.trigger_timestamp))

    def to_json(self, with_tasks: bool = False) -> dict[str, Any]:
        """Flink's Completed/Failed/PendingCheckpointStatistics; `tasks` is filled only in
        a checkpoint's details, as Flink does."""
        latest_ack = self.latest_ack_timestamp
        if latest_ack is None and self.status == "COMPLETED":
            latest_ack = self.end_timestamp  # no task had to acknowledge (all had finished)
        answer: dict[str, Any] = {
            "className": _CLASS_NAMES[self.status],
            "id": self.checkpoint_id,
            "status": self.status,
            "is_savepoint": self.is_savepoint,
            # One savepoint format here (self-contained, portable): Flink's CANONICAL.
            "savepointFormat": "CANONICAL" if self.is_savepoint else None,
            "trigger_timestamp": _ms(self.trigger_timestamp),
            "latest_ack_timestamp": _ms(latest_ack),
            "checkpointed_size": self.state_size,
            "state_size": self.state_size,
            "end_to_end_duration": self._duration_ms(self.end_timestamp),
            **_NO_DATA,
            "num_subtasks": self.num_subtasks,
            "num_acknowledged_subtasks": self.num_acknowledged,
            "checkpoint_type": self.checkpoint_type,
            "tasks": {vertex: self._task_json(task) for vertex, task in self.tasks.items()} if with_tasks else {},
        }
        if self.status == "COMPLETED":
            answer.update(external_path=self.external_path, discarded=self.discarded)
        elif self.status == "FAILED":
            answer.update(failure_timestamp=_ms(self.end_timestamp), failure_message=self.failure_message)
        return answer

    def _task_json(self, task: TaskStats) -> dict[str, Any]:
        return {
            "id": self.checkpoint_id,
            "status": self.status,
            "latest_ack_timestamp": _ms(task.latest_ack_timestamp),
            # The job's state is written as one snapshot: its size is not split by vertex.
            "checkpointed_size": 0,
            "state_size": 0,
            "end_to_end_duration": self._duration_ms(task.latest_ack_timestamp) if task.latest_ack_timestamp else 0,
            **_NO_DATA,
            "num_subtasks": task.num_subtasks,
            "num_acknowledged_subtasks": task.num_acknowledged,
        }


class StatsSummary:
    """min/max/avg over every value, quantiles over the newest ones (Flink's StatsSummary)."""

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.minimum = 0
        self.maximum = 0
        self.window: deque[int] = deque(maxlen=_QUANTILE_WINDOW)

    def add(self, value: int) -> None:
        self.minimum = value if self.count == 0 else min(self.minimum, value)
        self.maximum = value if self.count == 0 else max(self.maximum, value)
        self.count += 1
        self.total += value
        self.window.append(value)

    def to_json(self) -> dict[str, Any]:
        ordered = sorted(self.window)
        quantiles = {name: percentile(ordered, p) for name, p in (("p50", 50), ("p90", 90), ("p95", 95))}
        return {
            "min": self.minimum,
            "max": self.maximum,
            "avg": self.total // self.count if self.count else 0,
            **quantiles,
            "p99": percentile(ordered, 99),
            "p999": percentile(ordered, 99.9),
        }


def percentile(ordered: list[int], p: float) -> float:
    """Apache Commons Math's Percentile (LEGACY estimation), which Flink's histograms use:
    position p(n+1)/100, linear between neighbours, clamped to the ends. 0.0 for no values."""
    if not ordered:
        return 0.0
    position = p * (len(ordered) + 1) / 100
    if position < 1:
        return float(ordered[0])
    if position >= len(ordered):
        return float(ordered[-1])
    below = math.floor(position)
    lower, upper = ordered[below - 1], ordered[below]
    return lower + (position - below) * (upper - lower)


class CheckpointStatsTracker:
    """The statistics of one job's checkpoints and savepoints, fed by its CheckpointCoordinator."""

    def __init__(self, history_size: int = WebOptions.CHECKPOINTS_HISTORY_SIZE.default) -> None:
        self.history: deque[CheckpointStats] = deque(maxlen=max(1, history_size))
        self._by_id: dict[int, CheckpointStats] = {}
        self.counts = {"total": 0, "in_progress": 0, "completed": 0, "failed": 0}
        self.summary = {name: StatsSummary() for name in ("checkpointed_size", "state_size", "end_to_end_duration")}
        self.latest: dict[str, CheckpointStats | None] = {"completed": None, "savepoint": None, "failed": None}
        # Flink's RestoredCheckpointStatistics of the savepoint the job started from.
        self.restored: dict[str, Any] | None = None

    def triggered(
        self,
        checkpoint_id: int,
        is_savepoint: bool,
        terminal: bool,
        timestamp: float,
        vertices: list[str],
        parallelism: dict[str, int] | None = None,
        subtasks: list[int] | None = None,
    ) -> None:
        """A checkpoint was triggered; `vertices`: the job vertex of each task that must
        acknowledge. `parallelism`: every vertex of the job and its subtask count; the
        subtasks of it that need not acknowledge (not running) count as acknowledged now,
        as Flink reports finished tasks, so every vertex has its entry in the details.
        `subtasks`: the subtask index of each task of `vertices`."""
        stats = CheckpointStats(checkpoint_id, is_savepoint, timestamp, len(vertices), terminal=terminal)
        waiting: dict[str, set[int]] = {}
        for position, vertex in enumerate(vertices):
            stats.tasks.setdefault(vertex, TaskStats()).num_subtasks += 1
            if subtasks is not None:
                waiting.setdefault(vertex, set()).add(subtasks[position])
        for vertex, count in (parallelism or {}).items():
            task = stats.tasks.setdefault(vertex, TaskStats())
            task.acknowledged_at.update(dict.fromkeys(set(range(count)) - waiting.get(vertex, set()), timestamp))
            done = max(0, count - task.num_subtasks)
            if done:
                task.num_subtasks += done
                task.num_acknowledged += done
                task.latest_ack_timestamp = timestamp
                stats.num_subtasks += done
                stats.num_acknowledged += done
                stats.latest_ack_timestamp = timestamp
        if len(self.history) == self.history.maxlen:
            self._by_id.pop(self.history[-1].checkpoint_id, None)
        self.history.appendleft(stats)
        self._by_id[checkpoint_id] = stats
        self.counts["total"] += 1
        self.counts["in_progress"] += 1

    def acknowledged(self, checkpoint_id: int, vertex: str | None, subtask: int | None = None) -> None:
        stats = self._by_id.get(checkpoint_id)
        if stats is None:
            return
        now = time.time()
        stats.num_acknowledged += 1
        stats.latest_ack_timestamp = now
        task = stats.tasks.get(vertex) if vertex is not None else None
        if task is not None:
            task.num_acknowledged += 1
            task.latest_ack_timestamp = now
            if subtask is not None:
                task.acknowledged_at[subtask] = now

    def completed(self, checkpoint_id: int, location: str, size: int) -> None:
        stats = self._end(checkpoint_id, "COMPLETED")
        if stats is None:
            return
        stats.external_path = location
        stats.state_size = size
        self.summary["checkpointed_size"].add(size)
        self.summary["state_size"].add(size)
        self.summary["end_to_end_duration"].add(stats._duration_ms(stats.end_timestamp))
        self.latest["savepoint" if stats.is_savepoint else "completed"] = stats

    def failed(self, checkpoint_id: int, message: str) -> None:
        stats = self._end(checkpoint_id, "FAILED")
        if stats is not None:
            stats.failure_message = message
            self.latest["failed"] = stats

    def discarded(self, locations: list[str]) -> None:
        """Completed checkpoints whose folders retention removes (subsumed)."""
        for stats in [*self.history, self.latest["completed"]]:
            if stats is not None and stats.external_path in locations:
                stats.discarded = True

    def _end(self, checkpoint_id: int, status: str) -> CheckpointStats | None:
        stats = self._by_id.get(checkpoint_id)
        if stats is None or stats.status != "IN_PROGRESS":
            return None
        stats.status = status
        stats.end_timestamp = time.time()
        self.counts["in_progress"] -= 1
        self.counts[status.lower()] += 1
        return stats

    # -- REST views ---------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Flink's CheckpointingStatistics."""
        nothing = StatsSummary().to_json()  # every value 0: no buffered, processed or persisted data

        def latest(kind: str) -> dict[str, Any] | None:
            stats = self.latest[kind]
            return stats.to_json() if stats is not None else None

        return {
            "counts": {"restored": 1 if self.restored else 0, **self.counts},
            "summary": {
                **{name: summary.to_json() for name, summary in self.summary.items()},
                **{name: dict(nothing) for name in _NO_DATA},
            },
            "latest": {
                "completed": latest("completed"),
                "savepoint": latest("savepoint"),
                "failed": latest("failed"),
                "restored": self.restored,
            },
            "history": [stats.to_json() for stats in self.history],
        }

    def details(self, checkpoint_id: int) -> dict[str, Any] | None:
        """One checkpoint of the history (or a latest one) with its tasks; None if unknown."""
        stats = self._by_id.get(checkpoint_id)
        if stats is None:
            stats = next((s for s in self.latest.values() if s is not None and s.checkpoint_id == checkpoint_id), None)
        return stats.to_json(with_tasks=True) if stats is not None else None

    def subtask_details(self, checkpoint_id: int, vertex: str) -> dict[str, Any] | None:
        """Flink's TaskCheckpointStatisticsWithSubtaskDetails of one vertex in one
        checkpoint; None if the checkpoint or the vertex is unknown."""
        stats = self._by_id.get(checkpoint_id) or next(
            (s for s in self.latest.values() if s is not None and s.checkpoint_id == checkpoint_id), None
        )
        task = stats.tasks.get(vertex) if stats is not None else None
        if stats is None or task is None:
            return None
        subtasks: list[dict[str, Any]] = []
        durations = []
        for index in range(task.num_subtasks):
            at = task.acknowledged_at.get(index)
            if at is None:
                subtasks.append({"index": index, "status": "pending_or_failed"})
                continue
            duration = max(0, _ms(at - stats.trigger_timestamp))
            durations.append(duration)
            subtasks.append(
                {
                    "index": index,
                    "status": "completed",
                    "ack_timestamp": _ms(at),
                    "end_to_end_duration": duration,
                    "state_size": 0,
                    "checkpointed_size": 0,
                    "checkpoint": {"sync": 0, "async": 0},
                    "alignment": {"buffered": 0, "processed": 0, "persisted": 0, "duration": 0},
                    "start_delay": 0,
                    "unaligned_checkpoint": False,
                    "aborted": False,
                }
            )
        duration_summary = StatsSummary()
        for duration in durations:
            duration_summary.add(duration)
        nothing = StatsSummary().to_json()
        return {
            **stats._task_json(task),
            "summary": {
                "checkpointed_size": dict(nothing),
                "state_size": dict(nothing),
                "end_to_end_duration": duration_summary.to_json(),
                "checkpoint_duration": {"sync": dict(nothing), "async": dict(nothing)},
                "alignment": {name: dict(nothing) for name in ("buffered", "processed", "persisted", "duration")},
                "start_delay": dict(nothing),
            },
            "subtasks": subtasks,
        }


# Flink's interval of a job whose checkpoints are not periodic (Long.MAX_VALUE).
NOT_PERIODIC = 2**63 - 1
_STATE_BACKENDS = {"hashmap": "HashMapStateBackend", "rocksdb": "EmbeddedRocksDBStateBackend"}


def checkpoint_config(
    interval: float | None,
    timeout: float,
    state_backend: str | None,
    retention: str = "NO_EXTERNALIZED_CHECKPOINTS",
) -> dict[str, Any]:
    """Flink's CheckpointConfigInfo (`GET /jobs/:id/checkpoints/config`), from what the
    coordinator does: periodic checkpoints one at a time, no pause between them, each
    exactly once. `externalization` is Flink's reading of
    execution.checkpointing.externalized-checkpoint-retention (CheckpointConfigHandler):
    enabled unless NO_EXTERNALIZED_CHECKPOINTS, delete_on_cancellation unless
    RETAIN_ON_CANCELLATION."""
    return {
        "mode": "exactly_once",
        "interval": NOT_PERIODIC if interval is None else int(interval * 1000),
        "timeout": int(timeout * 1000),
        "min_pause": 0,
        "max_concurrent": 1,
        "externalization": {
            "enabled": retention != "NO_EXTERNALIZED_CHECKPOINTS",
            "delete_on_cancellation": retention != "RETAIN_ON_CANCELLATION",
        },
        "state_backend": _STATE_BACKENDS.get((state_backend or "hashmap").lower(), str(state_backend)),
        "checkpoint_storage": "FileSystemCheckpointStorage",
        "unaligned_checkpoints": False,
        "tolerable_failed_checkpoints": 0,
        "aligned_checkpoint_timeout": 0,
        "checkpoints_after_tasks_finish": True,
        "state_changelog_enabled": False,
        "changelog_periodic_materialization_interval": 600000,
        "changelog_storage": "memory",
    }
