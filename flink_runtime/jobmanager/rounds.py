"""Continuous sources: a job that runs in rounds.

A job with a continuous source (monitor_interval) runs in rounds. A round is one
batch run of the whole graph over the input files not processed yet; when it is
done its output is published and the job stays RUNNING, looking for new files
every monitor_interval. Keyed aggregations carry their state from round to round,
so their output is always the total over every file so far (and replaces the
previous round's); any other round's output adds to what earlier rounds published.
A batch job whose stop failed goes on the same way, for one more round.

`ContinuousRounds` owns whether the job is between rounds (idle), the round number,
how many rounds of this run published output, and the files earlier rounds processed.
It scans the sources for new input (the planner, in a worker), and starts a round
itself: the round's data namespace, the previous round's partitions released, the new
splits; then its `RoundsHost` runs every subtask again from the sources. A batch job's
last round hands the job's end back. Between rounds the job keeps its slots, as a Flink
streaming job holds them (scheduler/execution_slots.py, slot.idle.timeout), and the next
round is deployed into them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime.executiongraph import JobStatus

if TYPE_CHECKING:
    from flink_runtime.executiongraph import ExecutionGraph
    from flink_runtime.invokable import Prepared
    from flink_runtime.scheduler.source_splits import SourceSplits

log = logging.getLogger(__name__)


class SlotUse(Protocol):
    """The job's slots (scheduler/execution_slots.py's ExecutionSlotAllocator)."""

    requests_made: int  # slot requests to the pool so far
    kept_slots_taken: int  # so far: subtasks deployed into a slot the job kept, no request

    @property
    def held_slots(self) -> int: ...


class SlotOwner(Protocol):
    @property
    def slots(self) -> SlotUse: ...


class RoundsHost(Protocol):
    """The job, as its rounds need it."""

    job_id: str
    data_namespace: str  # where the job's partitions and staged output are: each round has its own

    @property
    def status(self) -> JobStatus: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def is_continuous(self) -> bool: ...
    @property
    def deployer(self) -> SlotOwner: ...

    def run_from_sources(self) -> None:
        """A new attempt of every subtask, the sources deployed first."""
        ...

    def end(self, error: BaseException | None) -> None:
        """The job ends: FINISHED, or FAILED with `error`."""
        ...


class RoundsGateway(Protocol):
    """The job's mailbox (timers and work in a worker, whose callbacks run supervised),
    and the TaskManagers' partitions."""

    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> Any: ...
    def run_async(self, awaitable: Any, on_done: Callable[[Any, BaseException | None], None] | None = None) -> Any: ...
    def release_partitions(self, job_id: str, data_namespace: str) -> None: ...


class SourcePlanning(Protocol):
    """The job's preparation (job_planning.py's JobPlanning)."""

    prepared: dict[str, Prepared]

    def prepare_sources(self, processed: dict[str, list[str]], data_namespace: str) -> dict[str, Prepared]: ...


class SourceFiles(Protocol):
    """The files the sources' splits read (job_checkpoints.py's JobCheckpointing)."""

    def prepared_split_files(self, vertex_id: str) -> dict[int, list[str]]: ...
    def completed_files(self, vertex_id: str) -> set[str]: ...


class ContinuousRounds:
    """The rounds of a job with a continuous source (and of a batch job whose stop failed)."""

    def __init__(
        self,
        host: RoundsHost,
        gateway: RoundsGateway,
        planning: SourcePlanning,
        splits: SourceSplits,
        files: SourceFiles,
        graph: Callable[[], ExecutionGraph | None],
    ) -> None:
        """splits: the job's input splits, which a new round replaces; graph(): the job's
        ExecutionGraph (None before it is built)."""
        self._host = host
        self._gateway = gateway
        self._planning = planning
        self._splits = splits
        self._files = files
        self._graph = graph
        self.idle = False  # between rounds: nothing runs
        self.round = 0
        self.round_ended_at: float | None = None  # when the last round's output was published (epoch s)
        # Rounds of this run whose output was published: the later ones add to it.
        self.published = 0
        # The first round's namespace (the job's, or a recovered run's): later rounds of
        # this run go inside it, so no two runs of the job share a round's directory.
        self._base_namespace: str | None = None
        self._processed_files: dict[str, set[str]] = {}
        # The job's slot counters when the running round began (requests, kept slots taken).
        self._slots_at_round_start = (0, 0)

    def processed_files(self, vertex_id: str) -> set[str]:
        return self._processed_files.get(vertex_id, set())

    def output_published(self) -> None:
        self.published += 1

    def take_idle(self) -> bool:
        """True (and no longer idle) if the job was between rounds: a stop can end it now."""
        idle, self.idle = self.idle, False
        return idle

    def round_done(self) -> None:
        """The round's output is published: remember what it read, then look for more."""
        self.idle = True
        self.round_ended_at = time.time()
        slots = self._host.deployer.slots
        requests, kept = self._slots_at_round_start
        # As Flink's streaming job, it holds its slots while it waits: the next round is
        # deployed into them (until slot.idle.timeout gives them back).
        log.info(
            "Job %s: round %d published: %d new slot request(s), %d subtask(s) deployed into slots the job "
            "kept; waiting for new input with %d slot(s) held.",
            self._host.job_id,
            self.round,
            slots.requests_made - requests,
            slots.kept_slots_taken - kept,
            slots.held_slots,
        )
        for vertex_id, progress in self._splits.progress.items():
            files = self._files.prepared_split_files(vertex_id)
            self._processed_files.setdefault(vertex_id, set()).update(
                f for n in progress.completed for f in files.get(n, [])
            )
        self._poll_for_input()

    def _waiting(self) -> bool:
        return self._host.status is JobStatus.RUNNING and self.idle and not self._host.stopping

    def _poll_for_input(self) -> None:
        if not self._waiting():
            return
        # A batch job gets here once, after a failed stop: it looks at once for what is left.
        intervals = [p.monitor_interval for p in self._planning.prepared.values() if p.monitor_interval]
        self._gateway.schedule_once(min(intervals, default=0), self._scan_now)

    def _scan_now(self) -> None:
        self._gateway.run_async(asyncio.to_thread(self._scan_sources), self._on_scanned)

    def _scan_sources(self) -> dict[str, Prepared]:
        """Worker thread: the sources again, without the files already processed."""
        graph = self._graph()
        assert graph is not None
        processed = {ejv.id: sorted(self._files.completed_files(ejv.id)) for ejv in graph.source_vertices()}
        return self._planning.prepare_sources(processed, self._host.data_namespace)

    def _on_scanned(self, prepared: dict[str, Prepared] | None, error: BaseException | None) -> None:
        if not self._waiting():
            return
        if error is None and prepared is not None and any(p.splits for p in prepared.values()):
            self._start_round(prepared)
            return
        if self._host.is_continuous:
            if error is not None:
                log.warning("Scanning the input of job %s failed: %s", self._host.job_id, error)
            self._poll_for_input()
            return
        # A batch job going on after a failed stop: all its input is read and published.
        self.idle = False
        self._host.end(error)

    def _start_round(self, prepared: dict[str, Prepared]) -> None:
        """The next round, over the new input splits in `prepared`, in a namespace of its own."""
        graph = self._graph()
        assert graph is not None
        self.idle = False
        self.round += 1
        job_id, previous = self._host.job_id, self._host.data_namespace
        if self._base_namespace is None:
            self._base_namespace = previous
        self._host.data_namespace = f"{self._base_namespace}/round-{self.round}"
        released = namespace_released_by_new_round(previous, self._base_namespace)
        if released is not None:
            self._gateway.release_partitions(job_id, released)
        # A vertex's I/O metrics are the sum over its rounds: the finished round's attempts
        # are about to be replaced, so each subtask keeps what its attempt reported.
        for vertex in graph.all_execution_vertices():
            vertex.end_round()
        self._planning.prepared.update(prepared)
        self._splits.new_round({vertex_id: p.splits for vertex_id, p in prepared.items()})
        splits = sum(len(p.splits) for p in prepared.values())
        log.info("Job %s: round %d over %d new input splits.", job_id, self.round, splits)
        slots = self._host.deployer.slots
        self._slots_at_round_start = (slots.requests_made, slots.kept_slots_taken)
        self._host.run_from_sources()


def namespace_released_by_new_round(previous: str, base: str) -> str | None:
    """The partitions a new round releases: the previous round's, unless they are the
    run's first round's directory `base` (`<job id>`, or `<job id>/run-<hex>` for a run
    recovered after a JobManager restart), which holds every later round of the run
    (`<base>/round-N`): releasing it would delete the new round's partitions while its
    tasks write them. The first round's partitions then go when the job ends, with the
    job's directory."""
    return None if previous == base else previous
