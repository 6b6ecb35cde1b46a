"""The job store as the JobManager uses it: running jobs survive a JobManager restart,
and finished jobs stay queryable for `jobstore.expiration-time`, at most
`jobstore.max-capacity` of them, in memory and in the store alike (Flink splits this
between its JobGraphStore, JobResultStore and ExecutionGraphInfoStore).

Writes leave the mailbox: one writer thread runs them in call order, so the store
never sees a job's updates out of order and the mailbox never waits on SQLite.

`JobPersistence` is a component the JobManager owns, called from its mailbox. It owns
the job store (and, with standbys, its fenced view: `fence`), the writer thread,
`archived` (finished jobs of earlier runs), the jobs being recovered and the end times
of finished ones; it reaches the JobManager only through a `PersistenceHost`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime import configuration as cfg
from flink_runtime.checkpoint.progress import IGNORE_UNCLAIMED_KEY, SAVEPOINT_PATH_KEY
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.io import filesystem
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobmanager import job_snapshots
from flink_runtime.jobmanager.jobstore import FencingTokenMismatch, JobRecord, JobStore, JobStoreError
from flink_runtime.jobmanager.operation_requests import settled
from flink_runtime.rpc.messages import JobStatusChanged, JobSubmissionFailure, Message

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster
    from flink_runtime.jobmanager.resource_manager import RegisteredTaskManager

log = logging.getLogger(__name__)

Callback = Callable[[Any, BaseException | None], None]


class PersistenceHost(Protocol):
    """What the job persistence uses of the JobManager."""

    def run_async(self, awaitable: Any, on_done: Callback | None = None) -> Any: ...

    def new_job_master(self, job_graph: JobGraph) -> JobMaster:
        """A JobMaster of this JobManager for `job_graph`, neither registered nor started."""

    def add_job(self, job: JobMaster) -> None:
        """Register `job` (tasks' messages and REST find it from now on)."""

    def remove_job(self, job_id: str) -> None:
        """Forget a finished job whose retention is over (or a submitted one not stored)."""

    def owns(self, job: JobMaster) -> bool:
        """`job` is the one registered under its id."""

    @property
    def task_managers(self) -> Mapping[str, RegisteredTaskManager]:
        """The registered TaskManagers (where an archived job's attempts ran)."""


class JobPersistence:
    """Recovery of running jobs, archiving and expiry of finished ones."""

    def __init__(
        self, config: Configuration, store: JobStore | None, host: PersistenceHost, fencing_cluster: str | None = None
    ) -> None:
        """store: None keeps nothing across restarts. fencing_cluster: with standbys, the
        cluster whose lease fences every write; until `fence` gives a token, none is made."""
        self._config = config
        self._host = host
        self._store = store
        self._fencing_cluster = fencing_cluster
        # The view writes go through: the store itself, or its fenced view (a standby's writes nothing).
        self.job_store: JobStore | None = store
        if store is not None and fencing_cluster is not None:
            self.job_store = store.fenced(fencing_cluster, None)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jobstore")
        # Finished jobs of earlier JobManager runs, as the job store archived them.
        self.archived: dict[str, JobRecord] = {}
        # Jobs recovered in this run that have not reached RUNNING yet (job store: recovery_attempts).
        self._recovering: set[str] = set()
        # Finished jobs of this run (job id -> time.monotonic() of their end), oldest first.
        self._finished_at: OrderedDict[str, float] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self._store is not None

    def fence(self, token: int | None) -> None:
        """Write as the holder of leadership `token` from now on (None: write nothing)."""
        if self._store is not None and self._fencing_cluster is not None:
            self.job_store = self._store.fenced(self._fencing_cluster, token)

    def forget(self) -> None:
        """A revoked leader keeps nothing of its jobs: the next leader serves them."""
        self.archived.clear()
        self._finished_at.clear()
        self._recovering.clear()

    def close(self) -> None:
        """After the last write (waits for the writer thread)."""
        self._writer.shutdown(wait=True)
        if self.job_store is not None:
            self.job_store.close()

    # -- writes ----------------------------------------------------------------------------------

    def _write(
        self,
        method: str,
        *args: Any,
        then: Callable[[], None] | None = None,
        refused: Callable[[], None] | None = None,
        on_stored: Callable[[bool], None] | None = None,
    ) -> None:
        """Call a JobStore method off the mailbox, in call order (one writer thread);
        `then` runs on that thread once the call has committed, `refused` there if the
        store refused it because this JobManager is no longer the leader;
        `on_stored(committed)` runs in the mailbox after it, False when the write was
        refused (a deposed leader's, fenced) or failed."""
        if self.job_store is None:
            return
        store_call = getattr(self.job_store, method)  # the view of now, also for a write that runs later

        def write() -> bool:
            try:
                store_call(*args)
            except JobStoreError as exc:
                log.warning("job store: %s", exc)
                if refused is not None and isinstance(exc, FencingTokenMismatch):
                    refused()
                return False
            if then is not None:
                then()
            return True

        def done(committed: bool | None, error: BaseException | None) -> None:
            if on_stored is not None:
                on_stored(bool(committed) and error is None)

        self._host.run_async(asyncio.get_running_loop().run_in_executor(self._writer, write), done)

    def submitted(self, job: JobMaster, start: Callable[[JobMaster], bool]) -> asyncio.Future[Message]:
        """The answer to a job's submission. Without a job store: `start(job)` now, answered
        once its sources run. With one, as Flink's dispatcher persists the JobGraph before
        acknowledging: the job starts, and Success can be answered, only once the store
        committed it; a refused write (a deposed leader's) or a failed one is answered with
        an error and the job forgotten (`start` returns False if it is no longer ours)."""
        if not self.enabled:
            start(job)
            return job.wait_until_running()
        answer: asyncio.Future[Message] = asyncio.get_running_loop().create_future()

        def stored(error: BaseException | None) -> None:
            if error is not None:
                if self._host.owns(job):
                    self._host.remove_job(job.job_id)
                reason = (
                    "the job could not be stored in the job store, so it was not started "
                    f"(submit it again, to the leader): {error}"
                )
                answer.set_result(JobSubmissionFailure(job_id=job.job_id, reason=reason))
                return
            start(job)
            job.wait_until_running().add_done_callback(lambda running: _copy_outcome(running, answer))

        self.job_submitted(job.job_graph, stored)
        return answer

    def job_submitted(self, job_graph: JobGraph, on_stored: Callable[[BaseException | None], None]) -> None:
        """Store a submitted job; `on_stored(error)` runs in the mailbox once the write
        committed (error None) or was refused or failed (a deposed leader's fenced write)."""
        assert job_graph.job_id is not None
        if self.job_store is None:
            on_stored(None)
            return
        add_job = self.job_store.add_job  # the view of now, fenced with the token of now
        args = (job_graph.job_id, job_graph.name, job_graph.to_json(), time.time())

        def done(_result: Any, error: BaseException | None) -> None:
            if error is not None:
                log.warning("job store: job %s not stored: %s", job_graph.job_id, error)
            on_stored(error)

        self._host.run_async(asyncio.get_running_loop().run_in_executor(self._writer, add_job, *args), done)

    def count_checkpoint_ids(self, job: JobMaster) -> None:
        """The job's checkpoint ids from now on come from blocks reserved in the job store
        (written on the writer thread, after the job itself), so no later JobManager reuses one."""
        if self.job_store is None:
            return
        coordinator = job.coordinator
        job_id = job.job_id

        def reserve(at_least: int, count: int) -> None:
            reserve_ids = self.job_store.reserve_checkpoint_ids  # type: ignore[union-attr]  # the view of now

            def done(first: int | None, error: BaseException | None) -> None:
                if error is not None:
                    log.warning("job store: no checkpoint ids reserved for job %s: %s", job_id, error)
                coordinator.ids_reserved(None if error is not None else first, count)

            loop = asyncio.get_running_loop()
            self._host.run_async(loop.run_in_executor(self._writer, reserve_ids, job_id, at_least, count), done)

        coordinator.count_ids_in(reserve)

    def savepoint_request_changed(self, job_id: str, request_id: str, status: dict[str, Any]) -> None:
        self._write("put_savepoint_request", job_id, request_id, status)

    def checkpoint_completed(
        self, job_id: str, checkpoint_id: int, location: str, is_savepoint: bool, size: int, subsumed: list[str]
    ) -> None:
        """Recorded in the job store, where the checkpoints it subsumes are forgotten in the
        same transaction; their folders are deleted after that commit (by the same writer
        thread), never before. A savepoint the store refuses (this JobManager was deposed)
        is deleted: no leader lists it, and its request answers failed from the leader
        (OperationRequests.restore), so its folder must not pass for a good savepoint."""

        def delete_subsumed() -> None:
            for old in subsumed:
                filesystem.filesystem_for(old).delete(old)

        if self.job_store is None:
            if subsumed:
                self._host.run_async(asyncio.to_thread(delete_subsumed))
            return
        self._write(
            "add_checkpoint",
            job_id,
            checkpoint_id,
            location,
            is_savepoint,
            time.time(),
            size,
            None,
            subsumed,
            then=delete_subsumed,
            refused=(lambda: filesystem.filesystem_for(location).delete(location)) if is_savepoint else None,
        )

    def status_changed(
        self, job: JobMaster, event: JobStatusChanged, on_stored: Callable[[bool], None] | None = None
    ) -> None:
        """Store the new status; a recovered job that got RUNNING (or ended) is recovered;
        a finished job is archived and counts towards the retention. `on_stored(committed)`
        runs in the mailbox once the status write committed (at once without a store), or
        with False when it was refused: a deposed leader's end of a job is not the job's
        end, and what the store still points at must stay (Flink cleans a job up only once
        its result is stored)."""
        if self.job_store is None:
            if on_stored is not None:
                on_stored(True)
        else:
            self._write("update_status", job.job_id, event.new_state, event.timestamp, on_stored=on_stored)
        if job.job_id in self._recovering and (job.status is JobStatus.RUNNING or job.status.is_terminal):
            self._recovering.discard(job.job_id)
            self._write("end_recovery", job.job_id)
        if job.status.is_terminal:
            self._finished_at[job.job_id] = time.monotonic()
            if job.status.is_globally_terminal and self.job_store is not None:
                documents = job_snapshots.archive_records(job, self._host.task_managers.get)
                self._write("archive", job.job_id, *documents)
                self._write("prune", *self._retention())

    # -- recovery --------------------------------------------------------------------------------

    def recover_jobs(self) -> None:
        """Start again every job the store says was running, from its latest checkpoint;
        its tasks are deployed as TaskManagers (re-)register. Finished jobs stay queryable.
        Raises JobStoreError when the store cannot be read (or, fenced, written)."""
        assert self.job_store is not None
        pruned = self.job_store.prune(*self._retention())
        if pruned:
            log.info("Pruned %d finished jobs from the job store (jobstore.max-capacity/.expiration-time).", pruned)
        for record in self.job_store.archived_jobs(limit=self._config.get(cfg.JOBSTORE_MAX_CAPACITY)):
            if record.details is not None:
                self.archived[record.job_id] = record
        max_attempts = self._config.get(cfg.RECOVERY_MAX_ATTEMPTS)
        for record in self.job_store.recoverable_jobs():
            job_graph = JobGraph.from_json(record.job_graph_json)
            if record.latest_checkpoint is not None:
                job_graph.config[SAVEPOINT_PATH_KEY] = record.latest_checkpoint.location
                job_graph.config[IGNORE_UNCLAIMED_KEY] = "true"
            job = self._host.new_job_master(job_graph)
            job.data_namespace = f"{record.job_id}/run-{uuid.uuid4().hex[:8]}"
            stored = self.job_store.checkpoints(record.job_id)
            job.coordinator.resume_after(
                [checkpoint.checkpoint_id for checkpoint in stored],
                [checkpoint.location for checkpoint in stored if not checkpoint.is_savepoint],
            )
            job.savepoint_requests.restore(self.job_store.savepoint_requests(record.job_id))
            self.count_checkpoint_ids(job)
            self._host.add_job(job)
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

    # -- finished jobs ---------------------------------------------------------------------------

    def is_archived(self, job_id: str) -> bool:
        """A job that ended in an earlier JobManager run (served from the store)."""
        return job_id in self.archived

    def archived_savepoint_requests(self, job_id: str) -> dict[str, dict[str, Any]] | None:
        """The savepoint requests of a job that ended in an earlier run, as stored; one
        its JobManager never completed answers failed (operation_requests.settled)."""
        record = self.archived.get(job_id)
        if record is None or self.job_store is None:
            return None
        return settled(self.job_store.savepoint_requests(job_id), "savepoint", str(record.status))

    def _retention(self) -> tuple[int, float]:
        """(jobstore.max-capacity, the end time before which a finished job expires)."""
        expiration = self._config.get_seconds(cfg.JOBSTORE_EXPIRATION_TIME)
        return self._config.get(cfg.JOBSTORE_MAX_CAPACITY), time.time() - expiration

    def expire_finished_jobs(self) -> None:
        """Forget finished jobs past jobstore.expiration-time, or beyond jobstore.max-capacity."""
        expiration = self._config.get_seconds(cfg.JOBSTORE_EXPIRATION_TIME)
        capacity = self._config.get(cfg.JOBSTORE_MAX_CAPACITY)
        now = time.monotonic()
        while self._finished_at:
            job_id, finished = next(iter(self._finished_at.items()))
            if now - finished < expiration and len(self._finished_at) <= capacity:
                break
            del self._finished_at[job_id]
            self._host.remove_job(job_id)
        # Finished jobs of earlier JobManager runs (the store prunes its own rows likewise).
        capacity, ended_before = self._retention()
        for job_id in [j for j, r in self.archived.items() if r.ended_at is not None and r.ended_at < ended_before]:
            del self.archived[job_id]
        while len(self.archived) + len(self._finished_at) > capacity and self.archived:
            oldest = min(self.archived.values(), key=lambda record: record.ended_at or 0.0)
            del self.archived[oldest.job_id]


def _copy_outcome(source: asyncio.Future[Message], target: asyncio.Future[Message]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif (error := source.exception()) is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result())
