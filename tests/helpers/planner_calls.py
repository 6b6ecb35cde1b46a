"""Functions the planner-process unit tests run there (importable in the spawned process)."""

from __future__ import annotations

import os
import subprocess


def pid() -> int:
    return os.getpid()


def allocate(size: int) -> int:
    """Allocate and touch `size` bytes."""
    return len(bytearray(size))


def start_sleeper() -> int:
    """A child the planner's code starts and forgets (as a job's code might)."""
    return subprocess.Popen(["sleep", "600"]).pid


def sleep_then_pid(seconds: float) -> int:
    """A call that runs longer than a short idle timeout."""
    import time

    time.sleep(seconds)
    return os.getpid()
