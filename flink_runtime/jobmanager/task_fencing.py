"""Fencing of the tasks' messages: a task carries back the `jobmanager_id` of the
JobManager run that deployed it, and a message carrying another one is refused (the
task was deployed by a JobManager that ran before this one, or by this one's earlier
leadership, and whose job may have been recovered since). Its TaskManager cancels it.
A message of this run about a job the JobManager does not know is refused as well.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol, TypeVar

from flink_runtime.jobmanager.errors import TaskReportRefused

log = logging.getLogger(__name__)

Job = TypeVar("Job")


class TaskMessage(Protocol):
    """A task's message (rpc/messages/base.py's FencedMessage): the JobManager run that deployed it."""

    jobmanager_id: str


class JobTaskMessage(TaskMessage, Protocol):
    """A task's message about its job (UpdateTaskExecutionState, AcknowledgeCheckpoint...)."""

    job_id: str


class TaskFencing:
    """Decides whether a task's message is this JobManager run's; logs each stale sender once."""

    def __init__(self) -> None:
        self._stale_jobmanagers: set[str] = set()  # logged once each

    def check(self, message: TaskMessage, jobmanager_id: str) -> None:
        """TaskReportRefused unless `message` is of the JobManager run `jobmanager_id`."""
        if message.jobmanager_id == jobmanager_id:
            return
        if message.jobmanager_id not in self._stale_jobmanagers:
            self._stale_jobmanagers.add(message.jobmanager_id)
            log.warning(
                "Refusing messages of tasks deployed by JobManager %s (this is %s); their TaskManagers cancel them.",
                message.jobmanager_id or "<none>",
                jobmanager_id,
            )
        raise TaskReportRefused(
            f"FencingTokenException: execution {getattr(message, 'execution_id', '?')} was deployed by "
            f"JobManager {message.jobmanager_id or '<none>'}, not by this JobManager ({jobmanager_id})"
        )

    def addressed_job(self, message: JobTaskMessage, jobmanager_id: str, jobs: Mapping[str, Job]) -> Job:
        """The live job of `jobs` a task's message is about; TaskReportRefused says why
        the JobManager run `jobmanager_id` refuses the message."""
        self.check(message, jobmanager_id)
        job = jobs.get(message.job_id)
        if job is None:
            raise TaskReportRefused(f"unknown job {message.job_id}")
        return job
