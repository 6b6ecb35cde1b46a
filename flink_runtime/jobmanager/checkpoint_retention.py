"""The end of a job: its checkpoints kept or discarded as
`execution.checkpointing.externalized-checkpoint-retention` says (checkpoint/retention.py),
its staged sink output discarded, its keyed state and partitions removed.

Only a globally terminal job (FINISHED, CANCELED, FAILED) loses anything, and only once
the job store took that status: a SUSPENDED job, one whose JobManager died, or one that
a deposed JobManager saw end (its status write fenced off) is recovered from what is
there. The file work runs in a worker thread (large folders take time; the mailbox
never waits on them), in an order that is safe to stop at any point: a kept checkpoint
is made self-contained before anything it points at is removed, and the job's
partitions are released (by the TaskManagers) only after that.

A job submitted from a checkpoint that is being made self-contained starts once that is
done, so it never reads the copy half-made or the originals while they go.

`JobEndCleanup` is a component of the JobManager and runs in its mailbox; it reaches the
JobManager only through a `CleanupHost`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime import configuration as cfg
from flink_runtime.checkpoint.retention import (
    RETENTION_KEY,
    JobEnd,
    JobEndReport,
    checkpoint_folder,
    clean_up,
    retains,
)
from flink_runtime.executiongraph import JobStatus

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster

log = logging.getLogger(__name__)


class CleanupHost(Protocol):
    """What the cleanup uses of the JobManager: work off the mailbox, and the
    TaskManagers, told to release a job's partitions."""

    def run_async(self, awaitable: Any, on_done: Callable[[Any, BaseException | None], None] | None = None) -> Any: ...
    def release_partitions(self, job_id: str, data_namespace: str = "") -> None: ...


class JobEndCleanup:
    def __init__(self, jobmanager: CleanupHost) -> None:
        self._jobmanager = jobmanager
        # Job id -> the kept checkpoints being made self-contained now.
        self._in_progress: dict[str, list[str]] = {}
        # Jobs submitted from one of those checkpoints, started when it is done.
        self._waiting: dict[str, list[Callable[[], None]]] = {}

    def job_ended(self, job: JobMaster) -> Callable[[bool], None] | None:
        """A job's status became terminal: decide (here) what goes and what stays. Returns
        what to call once the job store answered the write of that status: `stored(True)`
        cleans up (off the mailbox); `stored(False)`, the write refused (this JobManager
        was deposed: its write is fenced) or failed, removes nothing, as the store still
        names the job running from its latest checkpoint, which the next leader recovers.
        None: nothing to do."""
        if not job.status.is_globally_terminal:
            return None  # SUSPENDED: the JobManager that recovers the job needs all of it
        coordinator = job.coordinator
        retained = coordinator.retained_checkpoints
        keep = retains(coordinator.retention, job.status)
        restored_from = job.config.get(cfg.SAVEPOINT_PATH)
        claims = bool(restored_from) and job.config.get(cfg.SAVEPOINT_RESTORE_MODE) == "CLAIM"
        end = JobEnd(
            job_id=job.job_id,
            status=job.status,
            retention=coordinator.retention,
            checkpoints_dir=coordinator.checkpoints_dir,
            keep=retained if keep else [],
            discard=[] if keep else retained,
            protected={str(restored_from)} if restored_from and not claims else set(),
            claimed=str(restored_from) if claims else None,
        )
        # A FINISHED job published its output already (a continuous one only forgets its
        # sinks' marker of published rounds, which only its recovery needed); any other
        # end discards what its sinks staged, marker included, after the kept
        # checkpoints copied the part they record.
        discard_staged: Callable[[], None] | None = None
        if job.prepared and job.status is not JobStatus.FINISHED:
            discard_staged = partial(job.run_terminal_hooks, job.status)
        elif job.prepared and job.is_continuous:
            discard_staged = job.forget

        # Marked now: a job submitted from a kept checkpoint waits from now on, not only
        # once the store answered.
        self._in_progress[job.job_id] = end.keep

        def stored(committed: bool) -> None:
            if not committed:
                self._not_stored(job)
                return
            self._jobmanager.run_async(
                asyncio.to_thread(clean_up, end, discard_staged),
                lambda report, error: self._cleaned_up(job, end, report, error),
            )

        return stored

    def _not_stored(self, job: JobMaster) -> None:
        """The job's end was not stored: its checkpoints, keyed state, staged output and
        partitions are what the store's latest checkpoint points at, so all of it stays."""
        self._in_progress.pop(job.job_id, None)
        log.warning(
            "Job %s (%s) is %s here, but the job store did not take that status (this JobManager "
            "no longer leads, or the store failed): its checkpoints and data stay for the JobManager "
            "that recovers it.",
            job.name,
            job.job_id,
            job.status.value,
        )
        for start in self._waiting.pop(job.job_id, []):
            start()

    def _cleaned_up(
        self, job: JobMaster, end: JobEnd, report: JobEndReport | None, error: BaseException | None
    ) -> None:
        report = report or JobEndReport(problems=[f"the cleanup failed: {error!r}"])
        self._in_progress.pop(job.job_id, None)
        job.coordinator.stats.discarded(report.discarded)
        if report.not_externalized:
            # Those checkpoints still point at the job's partitions: they stay.
            log.warning(
                "Job %s: keeping its partitions, which checkpoints %s still refer to.",
                job.job_id,
                report.not_externalized,
            )
        else:
            self._jobmanager.release_partitions(job.job_id)
        _log_report(job, end, report)
        for start in self._waiting.pop(job.job_id, []):
            start()

    def start_when_settled(self, job: JobMaster) -> None:
        """Start `job` now, or, if it starts from a checkpoint being made self-contained,
        once that is done."""
        location = job.config.get(cfg.SAVEPOINT_PATH)
        if location:
            folder = checkpoint_folder(str(location))
            for job_id, keeping in self._in_progress.items():
                if folder in {checkpoint_folder(kept) for kept in keeping}:
                    log.info(
                        "Job %s starts once checkpoint %s of job %s is self-contained.", job.job_id, folder, job_id
                    )
                    self._waiting.setdefault(job_id, []).append(job.start)
                    return
        job.start()


def _log_report(job: JobMaster, end: JobEnd, report: JobEndReport) -> None:
    setting = f"{RETENTION_KEY}: {end.retention}"
    if report.kept:
        log.info(
            "Job %s (%s) is %s: kept checkpoint%s %s (%s; %d bytes copied into them, so each stands alone). "
            "Resume with execution.savepoint.path (CLI run -s) set to %s; delete it when no longer needed.",
            job.name,
            job.job_id,
            end.status.value,
            "s" if len(report.kept) > 1 else "",
            ", ".join(report.kept),
            setting,
            report.copied_bytes,
            report.kept[-1],
        )
    if report.discarded or report.removed:
        log.info(
            "Job %s (%s) is %s: removed checkpoints %s and working folders %s (%s).",
            job.name,
            job.job_id,
            end.status.value,
            report.discarded or "none",
            report.removed or "none",
            setting,
        )
    for problem in report.problems:
        log.warning("Job %s (%s) cleanup: %s", job.name, job.job_id, problem)
