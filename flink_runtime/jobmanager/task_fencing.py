"""Fencing of the tasks' messages: a task carries back the `jobmanager_id` of the
JobManager run that deployed it, and a message carrying another one is refused (the
task was deployed by a JobManager that ran before this one, or by this one's earlier
leadership, and whose job may have been recovered since). Its TaskManager cancels it.
"""

from __future__ import annotations

import logging

from flink_runtime.rpc.messages import FencedMessage

log = logging.getLogger(__name__)


class TaskFencing:
    """Decides whether a task's message is this JobManager run's; logs each stale sender once."""

    def __init__(self) -> None:
        self._stale_jobmanagers: set[str] = set()  # logged once each

    def refusal(self, message: FencedMessage, jobmanager_id: str) -> str | None:
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
