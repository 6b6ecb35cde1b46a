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

log = logging.getLogger(__name__)

Job = TypeVar("Job")


class TaskMessage(Protocol):
    """A task's message (rpc/messages.py's FencedMessage): the JobManager run that deployed it."""

    jobmanager_id: str


class JobTaskMessage(TaskMessage, Protocol):
    """A task's message about its job (UpdateTaskExecutionState, AcknowledgeCheckpoint...)."""

    job_id: str


class TaskFencing:
    """Decides whether a task's message is this JobManager run's; logs each stale sender once."""

    def __init__(self) -> None:
        self._stale_jobmanagers: set[str] = set()  # logged once each

    def refusal(self, message: TaskMessage, jobmanager_id: str) -> str | None:
        """Why `message` is refused by the JobManager run `jobmanager_id` (None: accepted)."""
        if message.jobmanager_id == jobmanager_id:
            return None
        if message.jobmanager_id not in self._stale_jobmanagers:
            self._stale_jobmanagers.add(message.jobmanager_id)
            log.warning(
                "Refusing messages of tasks deployed by JobManager %s (this is %s); their TaskManagers cancel them.",
                message.jobmanager_id or "<none>",
                jobmanager_id,
            )
        return (
            f"FencingTokenException: execution {getattr(message, 'execution_id', '?')} was deployed by "
            f"JobManager {message.jobmanager_id or '<none>'}, not by this JobManager ({jobmanager_id})"
        )

    def addressed_job(self, message: JobTaskMessage, jobmanager_id: str, jobs: Mapping[str, Job]) -> Job | str:
        """The live job of `jobs` a task's message is about, or why the JobManager run
        `jobmanager_id` refuses the message (a str)."""
        refused = self.refusal(message, jobmanager_id)
        if refused is not None:
            return refused
        job = jobs.get(message.job_id)
        return job if job is not None else f"unknown job {message.job_id}"
