"""What a task failure leads to: Flink's ExecutionFailureHandler. No I/O and no clock (time
is passed in), but not stateless: its restart strategy counts the failures it is told of.

Two strategies decide together. The restart strategy (`restart-strategy.type`) says
whether the job may restart at all, and after how long. The failover strategy
(`jobmanager.execution.failover-strategy`) says what restarts: with `region` the failed
subtask's pipelined region, with `full` every subtask of the job.

Exchanges here are blocking (a consumer is deployed once the partitions it reads are
finished, whatever the result type), so every subtask is a pipelined region of its own:
its inputs are committed partitions, and nothing consumes its output before it
finishes. Region failover therefore restarts the failed subtask, plus, as Flink's
RestartPipelinedRegionFailoverStrategy answers a PartitionNotFoundException, the
regions of the producers whose finished partitions the failed attempt could not fetch
(their TaskManager is gone): their output must be produced again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from flink_runtime.configuration import Configuration
from flink_runtime.scheduler.restart import RestartStrategy, failover_strategy, restart_strategy

V = TypeVar("V")


@dataclass(frozen=True)
class FailureHandlingResult(Generic[V]):
    """Flink's FailureHandlingResult: restart these vertices after this delay, or fail."""

    can_restart: bool
    restart_delay: float
    vertices_to_restart: frozenset[V]
    # True: every subtask of the job restarts (RESTARTING); False: only those listed,
    # while the job stays RUNNING.
    global_failover: bool

    @classmethod
    def unrecoverable(cls) -> FailureHandlingResult[V]:
        return cls(can_restart=False, restart_delay=0.0, vertices_to_restart=frozenset(), global_failover=True)


class ExecutionFailureHandler(Generic[V]):
    def __init__(self, restart: RestartStrategy, failover: str) -> None:
        if failover not in ("region", "full"):
            raise ValueError(f"failover strategy must be region or full, not {failover!r}")
        self.restart = restart
        self.failover = failover

    @classmethod
    def from_config(cls, config: Configuration) -> ExecutionFailureHandler[V]:
        return cls(restart_strategy(config), failover_strategy(config))

    def task_failed(
        self, failed: V, all_vertices: Collection[V], now: float, lost_producers: Iterable[V] = ()
    ) -> FailureHandlingResult[V]:
        """One subtask failed at `now` (monotonic seconds); `lost_producers` made the
        partitions it could not read."""
        delay = self.restart.on_failure(now)
        if delay is None:
            return FailureHandlingResult.unrecoverable()
        if self.failover == "region":
            return FailureHandlingResult(True, delay, frozenset([failed, *lost_producers]), global_failover=False)
        return FailureHandlingResult(True, delay, frozenset(all_vertices), global_failover=True)

    def global_failure(self, all_vertices: Collection[V], now: float) -> FailureHandlingResult[V]:
        """Something outside one subtask failed (e.g. the JobMaster itself): all restart or none."""
        delay = self.restart.on_failure(now)
        if delay is None:
            return FailureHandlingResult.unrecoverable()
        return FailureHandlingResult(True, delay, frozenset(all_vertices), global_failover=True)
