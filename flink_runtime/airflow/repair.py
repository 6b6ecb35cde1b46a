"""Repair, not rerun: a retried SubmitJobOperator resumes its FAILED job from a checkpoint.

Flink calls this batch job recovery, Databricks users a repair run. A job submitted with
``resume_failed=True`` keeps its checkpoints when it fails
(``execution.checkpointing.externalized-checkpoint-retention: DELETE_ON_CANCELLATION``)
and takes them periodically; the next try of the task finds the newest earlier try's
job, and if that job FAILED with a checkpoint left, submits the graph again from it
(``execution.savepoint.path``): input files the checkpoint recorded as read are not
read again, committed chunks and staged sink output are reused. The resumed job claims
that checkpoint (``execution.savepoint-restore-mode: CLAIM``): the cluster deletes it
once the job FINISHED, or failed again keeping a newer one, so a repair leaves no stale
checkpoint behind. A job the user
cancelled is not resumed (its checkpoints are gone by the retention, as Flink's
DELETE_ON_CANCELLATION says), nor is a FINISHED one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from flink_runtime import configuration as cfg
from flink_runtime.airflow.exceptions import FlinkRuntimeException
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.executiongraph.states import JobStatus

__all__ = ["RESUMABLE_JOB_CONFIG", "RESUMED_JOB_CONFIG", "Resumption", "failed_job_to_resume"]

# Job configuration a resumable job is submitted with, unless its graph sets the keys
# itself: checkpoints kept when the job FAILS, and taken often enough to be worth it.
RESUMABLE_JOB_CONFIG: dict[str, str] = {
    cfg.CHECKPOINT_RETENTION.key: "DELETE_ON_CANCELLATION",
    "execution.checkpointing.interval": "10 s",
}
# And a job resumed from a failed try's checkpoint: that checkpoint is the job's to delete.
RESUMED_JOB_CONFIG: dict[str, str] = {**RESUMABLE_JOB_CONFIG, cfg.SAVEPOINT_RESTORE_MODE.key: "CLAIM"}


@dataclass(frozen=True)
class Resumption:
    """The FAILED job of an earlier try and the checkpoint to resume it from."""

    job_id: str
    try_number: int
    checkpoint_path: str
    progress: str  # how far the failed job got (one progress line)


def failed_job_to_resume(
    hook: FlinkRuntimeHook, job_id_of_try: Callable[[int], str], try_number: int, log: logging.Logger
) -> Resumption | None:
    """The newest earlier try's job, if it FAILED and left a checkpoint; else None (said in the log)."""
    for earlier in range(try_number - 1, 0, -1):
        job_id = job_id_of_try(earlier)
        job = hook.get_job(job_id)
        if job is None:
            continue  # that try never submitted (or the job expired from the job store)
        state = str(job.get("state"))
        if state != JobStatus.FAILED.value:
            log.info("Not resuming: job %s of try %d ended %s, not FAILED; submitting afresh", job_id, earlier, state)
            return None
        path = hook.latest_checkpoint_path(job_id)
        if path is None:
            log.info("Not resuming job %s of try %d: it FAILED before its first checkpoint", job_id, earlier)
            return None
        try:
            progress = hook.job_progress(job_id)
        except FlinkRuntimeException as exc:
            progress = f"(its progress is unknown: {exc})"
        return Resumption(job_id, earlier, path, progress)
    return None
