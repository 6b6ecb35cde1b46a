"""Why a TaskManager refuses a JobManager's command (a task to deploy, a cancel, a
checkpoint trigger, a partition release): the message says which, and goes back to the
JobManager in the TaskOperationResult (or is logged when nothing answers)."""

from __future__ import annotations


class CommandRefused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
