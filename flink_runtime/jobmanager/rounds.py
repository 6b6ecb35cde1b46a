"""Continuous sources: a job that runs in rounds.

A job with a continuous source (monitor_interval) runs in rounds. A round is one
batch run of the whole graph over the input files not processed yet; when it is
done its output is published and the job stays RUNNING, looking for new files
every monitor_interval. Keyed aggregations carry their state from round to round,
so their output is always the total over every file so far (and replaces the
previous round's); any other round's output adds to what earlier rounds published.
A batch job whose stop failed goes on the same way, for one more round.

`ContinuousRounds` owns whether the job is between rounds (idle), the round number
and the files earlier rounds processed. It scans for input through the `scan`
callable (the planner, in a worker) and hands a new round or the job's end back to
its `RoundsHost`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime.executiongraph import JobStatus

if TYPE_CHECKING:
    from flink_runtime.invokable import Prepared
    from flink_runtime.scheduler.source_splits import SplitProgress

log = logging.getLogger(__name__)


class RoundsHost(Protocol):
    """The job, as its rounds need it."""

    job_id: str

    @property
    def status(self) -> JobStatus: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def is_continuous(self) -> bool: ...
    @property
    def prepared(self) -> dict[str, Prepared]: ...
    @property
    def split_progress(self) -> dict[str, SplitProgress]: ...

    def prepared_split_files(self, vertex_id: str) -> dict[int, list[str]]: ...
    def start_round(self, prepared: dict[str, Prepared], data_namespace: str) -> None:
        """Run the graph again over `prepared`, in `data_namespace`."""
        ...

    def end(self, error: BaseException | None) -> None:
        """The job ends: FINISHED, or FAILED with `error`."""
        ...


class Timers(Protocol):
    """The job's mailbox: timers and work in a worker, whose callbacks run supervised."""

    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> Any: ...
    def run_async(self, awaitable: Any, on_done: Callable[[Any, BaseException | None], None] | None = None) -> Any: ...


class ContinuousRounds:
    """The rounds of a job with a continuous source (and of a batch job whose stop failed)."""

    def __init__(self, host: RoundsHost, timers: Timers, scan: Callable[[], Awaitable[dict[str, Prepared]]]) -> None:
        """scan() prepares the sources again (in a worker), without the files processed."""
        self._host = host
        self._timers = timers
        self._scan = scan
        self.idle = False  # between rounds: nothing runs
        self.round = 0
        self._processed_files: dict[str, set[str]] = {}

    def processed_files(self, vertex_id: str) -> set[str]:
        return self._processed_files.get(vertex_id, set())

    def take_idle(self) -> bool:
        """True (and no longer idle) if the job was between rounds: a stop can end it now."""
        idle, self.idle = self.idle, False
        return idle

    def round_done(self) -> None:
        """The round's output is published: remember what it read, then look for more."""
        self.idle = True
        for vertex_id, progress in self._host.split_progress.items():
            files = self._host.prepared_split_files(vertex_id)
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
        intervals = [p.monitor_interval for p in self._host.prepared.values() if p.monitor_interval]
        self._timers.schedule_once(min(intervals, default=0), self._scan_now)

    def _scan_now(self) -> None:
        self._timers.run_async(self._scan(), self._on_scanned)

    def _on_scanned(self, prepared: dict[str, Prepared] | None, error: BaseException | None) -> None:
        if not self._waiting():
            return
        if error is None and prepared is not None and any(p.splits for p in prepared.values()):
            self.idle = False
            self.round += 1
            namespace = f"{self._host.job_id}/round-{self.round}"
            self._host.start_round(prepared, namespace)
            return
        if self._host.is_continuous:
            if error is not None:
                log.warning("Scanning the input of job %s failed: %s", self._host.job_id, error)
            self._poll_for_input()
            return
        # A batch job going on after a failed stop: all its input is read and published.
        self.idle = False
        self._host.end(error)


def namespace_released_by_new_round(previous: str, job_id: str) -> str | None:
    """The partitions a new round releases: the previous round's, unless they are the
    job's own directory (the first round of a job runs in `<job id>`, and every later
    round in `<job id>/round-N` inside it: releasing that directory would delete the new
    round's partitions while its tasks write them). The first round's partitions then
    go when the job ends, with the job's directory."""
    return None if previous == job_id else previous
