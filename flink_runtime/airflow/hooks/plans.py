"""What FlinkRuntimeHook asks a cluster in more than one request, each written once.

These are plans (flink_runtime.client.plans): generators of the client's calls that
JobClient runs for the hook's blocking methods (operators and sensors on a worker) and
AsyncJobClient for its ``a_`` methods (the trigger on the triggerer's event loop). So
``job_failure`` and ``a_job_failure``, or an operator's ``wait_for_job`` and the
trigger's wait, cannot come to different answers. Errors inside are the client's
(JobClientError); the hook turns what escapes into the provider's exceptions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from typing import Any

from flink_runtime.airflow.exceptions import FlinkRuntimeJobFailed
from flink_runtime.airflow.hooks.errors import job_failed
from flink_runtime.airflow.progress import FAILURE_LOG_LINES, ProgressLog, describe_progress, failing_subtask
from flink_runtime.client import calls
from flink_runtime.client.calls import JobStatusEvent
from flink_runtime.client.errors import JobClientError, JobNotFound
from flink_runtime.client.plans import Plan, wait_for_state

__all__ = ["job_failure", "job_or_none", "job_progress", "job_state", "wait_for_job"]


def job_or_none(job_id: str) -> Plan[dict[str, Any] | None]:
    """GET /jobs/:id, or None if the JobManager does not know the job."""
    try:
        return (yield calls.job_details(job_id))
    except JobNotFound:
        return None


def job_state(job_id: str) -> Plan[str]:
    """The job's state as the REST API names it (a state this version does not know too)."""
    details = yield calls.job_details(job_id)
    return str(details["state"])


def job_failure(
    job_id: str, state: str, reason: str | None, log: logging.Logger | logging.LoggerAdapter
) -> Plan[FlinkRuntimeJobFailed]:
    """The exception for a job that ended ``state``, with its root exception if it has one
    and the last log lines of the subtask that raised it.

    Both are fetched on a best-effort basis: failing to get them must not hide the
    failure they would explain (a warning says what was missing).
    """
    root: str | None = None
    log_lines: list[str] = []
    try:
        exceptions = yield calls.job_exceptions(job_id)
        root = exceptions.get("root-exception") or None
        if root:
            failing = failing_subtask(exceptions, (yield calls.job_details(job_id)))
            if failing is not None:
                answer = yield calls.job_log(job_id, vertex=failing[0], subtask=failing[1])
                log_lines = list(answer["lines"])[-FAILURE_LOG_LINES:]
    except JobClientError as exc:
        log.warning("Could not fetch the root exception or task log of job %s: %s", job_id, exc)
    return job_failed(job_id, state, reason, root, log_lines)


def job_progress(job_id: str) -> Plan[str]:
    """One line: the job's state and each vertex's subtasks, splits and records (airflow/progress.py)."""
    details = yield calls.job_details(job_id)
    accumulators = yield calls.job_accumulators(job_id)
    return describe_progress(job_id, details, accumulators)


def wait_for_job(
    job_id: str,
    target_states: Collection[str],
    timeout: float | None = None,
    poll_timeout: float = 30.0,
    progress: ProgressLog | None = None,
) -> Plan[str]:
    """Until the job reaches one of ``target_states`` or ends; that state (client/plans.py
    ``wait_for_state``: long polls, a terminal non-target ends the wait too, TimeoutError
    naming the last state after ``timeout`` seconds).

    With ``progress``, each state change and, every ``progress.interval`` seconds, the
    job's progress are logged; a long poll then waits at most that interval.
    """
    if progress is None:
        state = yield from wait_for_state(job_id, target_states, timeout, poll_timeout)
        return state.value

    def log_event(event: JobStatusEvent) -> None:
        progress.log.info("Job %s: %s -> %s", job_id, event.old_state.value, event.new_state.value)

    state = yield from wait_for_state(
        job_id,
        target_states,
        timeout,
        min(poll_timeout, progress.interval),
        on_event=log_event,
        between_polls=lambda: _report_progress(job_id, progress),
    )
    return state.value


def _report_progress(job_id: str, progress: ProgressLog) -> Plan[None]:
    if not progress.due(time.monotonic()):
        return
    try:
        line = yield from job_progress(job_id)
    except JobClientError as exc:  # progress is news, never a reason to stop waiting
        progress.log.debug("No progress of job %s: %s", job_id, exc)
        return
    progress.report(line, time.monotonic())
