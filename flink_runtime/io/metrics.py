"""IOMetrics: what one task attempt read and wrote (Flink's IOMetrics of TaskExecutionState).

A task counts while it runs and reports the totals with its final state
(UpdateTaskExecutionState.io_metrics); the JobManager keeps them on the Execution and
sums them per vertex for Flink's REST "metrics" (read-records, write-bytes, ...).

- records_in / bytes_in: rows and bytes a task read from its upstream tasks' result
  partitions. A source reads no partitions: its records_in is 0, as Flink's sources
  report, and its bytes_in is the size of the input files of its splits. (Counting the
  rows a source reads would put a metrics node between the file scan and the chain,
  which costs Spark its filter pushdown.)
- records_out / bytes_out: rows the task produced (once, however many outputs it
  writes them to) and the bytes of the files it wrote (partitions and sink chunks).
- busy_ms / idle_ms: time the task ran its work, and time it waited for input (for a
  source: for the JobManager's next split). Flink's accumulated-busy-time and
  accumulated-idle-time; tasks here are never back-pressured.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec


class IOMetrics(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """Counts of one attempt, or sums of many (`+`, `IOMetrics.merge`); immutable."""

    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    busy_ms: int = 0
    idle_ms: int = 0

    def __add__(self, other: IOMetrics) -> IOMetrics:
        if not isinstance(other, IOMetrics):
            return NotImplemented
        return IOMetrics(
            records_in=self.records_in + other.records_in,
            records_out=self.records_out + other.records_out,
            bytes_in=self.bytes_in + other.bytes_in,
            bytes_out=self.bytes_out + other.bytes_out,
            busy_ms=self.busy_ms + other.busy_ms,
            idle_ms=self.idle_ms + other.idle_ms,
        )

    @classmethod
    def merge(cls, metrics: Iterable[IOMetrics | None]) -> IOMetrics:
        """The sum of `metrics`, skipping None (a task that reported none)."""
        total = cls()
        for item in metrics:
            if item is not None:
                total = total + item
        return total


# Nothing read or written yet (immutable, so one instance serves every subtask).
NO_IO = IOMetrics()
