"""Continuous sources: a JobMaster that runs in rounds.

A job with a continuous source (monitor_interval) runs in rounds. A round is one
batch run of the whole graph over the input files not processed yet; when it is
done its output is published and the job stays RUNNING, looking for new files
every monitor_interval. Keyed aggregations carry their state from round to round,
so their output is always the total over every file so far (and replaces the
previous round's); any other round's output adds to what earlier rounds published.
A batch job whose stop failed goes on the same way, for one more round.

`ContinuousRounds` is part of the JobMaster (a mixin: it shares the job's state and
runs in the JobManager's mailbox like the rest of it); it owns `_idle`, `_round` and
`_processed_files`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from flink_runtime.executiongraph import JobStatus
from flink_runtime.invokable import Prepared
from flink_runtime.planner import tasks as planner_tasks
from flink_runtime.scheduler.strategy import sources_to_restart

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster

log = logging.getLogger(__name__)


class ContinuousRounds:
    """The rounds of a job with a continuous source (and of a batch job whose stop failed)."""

    def _on_round_done(self: JobMaster, result: None, error: BaseException | None) -> None:
        self._finalizing = False
        if self.status is not JobStatus.RUNNING:
            # Cancelled (or failing) while the round's output was published: that request
            # found nothing running and waited for the publish; end the job now, or it
            # stays CANCELLING for ever.
            self._complete_if_all_stopped()
            return
        if error is not None:
            self._end(error)
            return
        self._idle = True
        for vertex_id, progress in self.split_progress.items():
            files = self.prepared_split_files(vertex_id)
            self._processed_files.setdefault(vertex_id, set()).update(
                f for n in progress.completed for f in files.get(n, [])
            )
        self.tracker.start_new_round()
        self._poll_for_input()

    def _poll_for_input(self: JobMaster) -> None:
        if self.status is not JobStatus.RUNNING or not self._idle or self._stop_request is not None:
            return
        # A batch job gets here once, after a failed stop: it looks at once for what is left.
        intervals = [p.monitor_interval for p in self._prepared.values() if p.monitor_interval]
        self.gateway.schedule_once(
            min(intervals, default=0),
            lambda: self.gateway.run_async(asyncio.to_thread(self._scan_sources), self._on_scanned),
        )

    def _scan_sources(self: JobMaster) -> dict[str, Prepared]:
        """Worker thread: prepare the sources again (in the planner process), without the
        files already processed."""
        assert self.graph is not None
        return self.gateway.planner.run(
            planner_tasks.prepare_sources,
            self.job_graph.to_json(),
            self.config,
            {ejv.id: sorted(self.completed_files(ejv.id)) for ejv in self.graph.source_vertices()},
            self.data_namespace,
            timeout=self.gateway.planner_timeout,
        )

    def _on_scanned(self: JobMaster, prepared: dict[str, Prepared] | None, error: BaseException | None) -> None:
        if self.status is not JobStatus.RUNNING or not self._idle or self._stop_request is not None:
            return
        if error is None and prepared is not None and any(p.splits for p in prepared.values()):
            self._start_round(prepared)
            return
        if self.is_continuous:
            if error is not None:
                log.warning("Scanning the input of job %s failed: %s", self.job_id, error)
            self._poll_for_input()
            return
        # A batch job going on after a failed stop: all its input is read and published.
        self._idle = False
        self._end(error)

    def _start_round(self: JobMaster, prepared: dict[str, Prepared]) -> None:
        assert self.graph is not None
        self._idle = False
        self._round += 1
        previous, self.data_namespace = self.data_namespace, f"{self.job_id}/round-{self._round}"
        released = namespace_released_by_new_round(previous, self.job_id)
        if released is not None:
            self.gateway.release_partitions(self.job_id, released)
        # A vertex's I/O metrics are the sum over its rounds: the finished round's attempts
        # are about to be replaced, so each subtask keeps what its attempt reported.
        for vertex in self.graph.all_execution_vertices():
            vertex.end_round()
        self._reset_all_executions()
        self._prepared.update(prepared)
        self.splits.new_round({vertex_id: p.splits for vertex_id, p in prepared.items()})
        splits = sum(len(p.splits) for p in prepared.values())
        log.info("Job %s: round %d over %d new input splits.", self.job_id, self._round, splits)
        self._schedule_all(sources_to_restart(self.graph))


def namespace_released_by_new_round(previous: str, job_id: str) -> str | None:
    """The partitions a new round releases: the previous round's, unless they are the
    job's own directory (the first round of a job runs in `<job id>`, and every later
    round in `<job id>/round-N` inside it: releasing that directory would delete the new
    round's partitions while its tasks write them). The first round's partitions then
    go when the job ends, with the job's directory."""
    return None if previous == job_id else previous
