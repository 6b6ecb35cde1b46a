"""The job store as the JobManager uses it: running jobs survive a JobManager restart,
and finished jobs stay queryable for `jobstore.expiration-time`, at most
`jobstore.max-capacity` of them, in memory and in the store alike (Flink splits this
between its JobGraphStore, JobResultStore and ExecutionGraphInfoStore).

Writes leave the mailbox: one writer thread runs them in call order, so the store
never sees a job's updates out of order and the mailbox never waits on SQLite.

`JobPersistence` is part of the JobManager (a mixin: it shares the JobManager's state
and runs in its mailbox like the rest of it); it keeps `job_store`, `archived` (finished
jobs of earlier runs), `_recovering` and `_finished_at`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flink_runtime import configuration as cfg
from flink_runtime.checkpoint.progress import IGNORE_UNCLAIMED_KEY, SAVEPOINT_PATH_KEY
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobmanager import snapshots
from flink_runtime.jobmanager.jobmaster import JobMaster
from flink_runtime.jobmanager.jobstore import JobStoreError
from flink_runtime.rpc.messages import JobStatusChanged

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmanager import JobManager

log = logging.getLogger(__name__)


class JobPersistence:
    """Recovery of running jobs, archiving and expiry of finished ones."""

    def _store(self: JobManager, method: str, *args: Any, then: Callable[[], None] | None = None) -> None:
        """Call a JobStore method off the mailbox, in call order (one writer thread);
        `then` runs on that thread once the call has committed."""
        if self.job_store is None:
            return
        store_call = getattr(self.job_store, method)

        def write() -> None:
            try:
                store_call(*args)
            except JobStoreError as exc:
                log.warning("job store: %s", exc)
                return
            if then is not None:
                then()

        self.run_async(asyncio.get_running_loop().run_in_executor(self._store_writer, write))

    def _recover_jobs(self: JobManager) -> None:
        """Start again every job the store says was running, from its latest checkpoint;
        its tasks are deployed as TaskManagers (re-)register. Finished jobs stay queryable."""
        assert self.job_store is not None
        pruned = self.job_store.prune(*self._retention())
        if pruned:
            log.info("Pruned %d finished jobs from the job store (jobstore.max-capacity/.expiration-time).", pruned)
        for record in self.job_store.archived_jobs(limit=self.config.get(cfg.JOBSTORE_MAX_CAPACITY)):
            if record.details is not None:
                self.archived[record.job_id] = record
        max_attempts = self.config.get(cfg.RECOVERY_MAX_ATTEMPTS)
        for record in self.job_store.recoverable_jobs():
            job_graph = JobGraph.from_json(record.job_graph_json)
            if record.latest_checkpoint is not None:
                job_graph.config[SAVEPOINT_PATH_KEY] = record.latest_checkpoint.location
                job_graph.config[IGNORE_UNCLAIMED_KEY] = "true"
            job = JobMaster(job_graph, self, self.config)
            job.data_namespace = f"{record.job_id}/run-{uuid.uuid4().hex[:8]}"
            stored = self.job_store.checkpoints(record.job_id)
            job.coordinator.resume_after(
                [checkpoint.checkpoint_id for checkpoint in stored],
                [checkpoint.location for checkpoint in stored if not checkpoint.is_savepoint],
            )
            job.savepoint_requests.restore(self.job_store.savepoint_requests(record.job_id))
            self.jobs[record.job_id] = job
            attempts = self.job_store.begin_recovery(record.job_id)
            if attempts > max_attempts:
                reason = (
                    f"The job was recovered {attempts - 1} times and never reached RUNNING (the JobManager "
                    f"stopped while recovering it each time); it is not recovered again "
                    f"(jobmanager.recovery.max-attempts: {max_attempts}). Resubmit it once the cause is "
                    "fixed: from its latest checkpoint (execution.savepoint.path) if its "
                    "execution.checkpointing.externalized-checkpoint-retention kept one (the JobManager "
                    "logs what it kept; the default, NO_EXTERNALIZED_CHECKPOINTS, keeps none)."
                )
                log.error("Giving up job %s (%s): %s", record.name, record.job_id, reason)
                job.give_up_recovery(reason)
                continue
            self._recovering.add(record.job_id)
            log.info(
                "Recovering job %s (%s) from %s.",
                record.name,
                record.job_id,
                record.latest_checkpoint.location if record.latest_checkpoint else "its start (no checkpoint)",
            )
            job.start()

    def _record_status_change(self: JobManager, job: JobMaster, event: JobStatusChanged) -> None:
        """Store the new status; a recovered job that got RUNNING (or ended) is recovered;
        a finished job is archived and counts towards the retention."""
        self._store("update_status", job.job_id, event.new_state, event.timestamp)
        if job.job_id in self._recovering and (job.status is JobStatus.RUNNING or job.status.is_terminal):
            self._recovering.discard(job.job_id)
            self._store("end_recovery", job.job_id)
        if job.status.is_terminal:
            self._finished_at[job.job_id] = time.monotonic()
            if job.status.is_globally_terminal and self.job_store is not None:
                self._store("archive", job.job_id, snapshots.job_details(job), snapshots.job_exceptions(job))
                self._store("prune", *self._retention())

    def _retention(self: JobManager) -> tuple[int, float]:
        """(jobstore.max-capacity, the end time before which a finished job expires)."""
        expiration = self.config.get_seconds(cfg.JOBSTORE_EXPIRATION_TIME)
        return self.config.get(cfg.JOBSTORE_MAX_CAPACITY), time.time() - expiration

    def _expire_finished_jobs(self: JobManager) -> None:
        expiration = self.config.get_seconds(cfg.JOBSTORE_EXPIRATION_TIME)
        capacity = self.config.get(cfg.JOBSTORE_MAX_CAPACITY)
        now = time.monotonic()
        while self._finished_at:
            job_id, finished = next(iter(self._finished_at.items()))
            if now - finished < expiration and len(self._finished_at) <= capacity:
                break
            del self._finished_at[job_id]
            self.jobs.pop(job_id, None)
        # Finished jobs of earlier JobManager runs (the store prunes its own rows likewise).
        capacity, ended_before = self._retention()
        for job_id in [j for j, r in self.archived.items() if r.ended_at is not None and r.ended_at < ended_before]:
            del self.archived[job_id]
        while len(self.archived) + len(self._finished_at) > capacity and self.archived:
            oldest = min(self.archived.values(), key=lambda record: record.ended_at or 0.0)
            del self.archived[oldest.job_id]
