"""`flink-runtime logs JOB [--vertex V] [--subtask N] [-f]`: a job's task log lines.

The lines come from `GET /jobs/:id/log`: every line a task of the job logged, on every
TaskManager, oldest first (the REST API bounds one answer to the newest 1 MiB). They
are printed as they are, for grep and less.

Following polls about every second for the lines stamped since the last answer's
`next` and prints those not printed yet (`next` lies a few seconds before the newest
line, so a line written late is not missed; the repeated ones are dropped here). It
stops by itself once the job has ended and a poll brought nothing new, or on Ctrl-C
(exit 0: stopping to follow is not a failure).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from flink_runtime.client.job_client import JobClient
from flink_runtime.executiongraph.states import JobStatus

POLL_SECONDS = 1.0
_STAMP_LENGTH = len("2026-11-23 10:31:04,977")


def print_job_log(
    client: JobClient,
    job_id: str,
    vertex: str | None = None,
    subtask: int | None = None,
    follow: bool = False,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print the job's task lines (and, following, new ones until the job ended); the exit code."""
    printer = _Printer(out or sys.stdout)
    answer = client.job_log(job_id, vertex, subtask)
    printer.show(answer, first=True)
    if not follow:
        return 0
    try:
        while True:
            ended = _has_ended(answer)
            sleep(POLL_SECONDS)
            answer = client.job_log(job_id, vertex, subtask, since=str(answer.get("next") or ""))
            if not printer.show(answer) and ended:
                return 0
    except KeyboardInterrupt:
        return 0


def _has_ended(answer: dict[str, Any]) -> bool:
    try:
        return JobStatus(answer.get("state")).is_globally_terminal
    except ValueError:
        return False


class _Printer:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        # Lines printed whose stamp an answer may repeat (those at or after its `since`).
        self._printed: set[str] = set()
        self._warned: set[str] = set()

    def show(self, answer: dict[str, Any], first: bool = False) -> int:
        """Print the answer's lines not printed before; how many were new."""
        lines = [str(line) for line in answer.get("lines", [])]
        new = [line for line in lines if line not in self._printed]
        for line in new:
            print(line, file=self.out)
        self.out.flush()
        since = str(answer.get("next") or "")
        self._printed = {line for line in self._printed | set(lines) if line[:_STAMP_LENGTH] >= since}
        if answer.get("truncated"):
            self._warn("older lines left out: the answer holds the newest 1 MiB" if first else "some lines skipped")
        for item in answer.get("unreachable", []):
            self._warn(f"TaskManager {item.get('taskmanager')}: {item.get('reason')} (its lines are missing)")
        return len(new)

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            print(f"warning: {message}", file=sys.stderr, flush=True)
