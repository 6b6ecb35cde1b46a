"""Waiting in tests for what real processes do in their own time."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(condition: Callable[[], object], timeout: float = 20.0, what: str = "the condition") -> None:
    """Poll ``condition`` until it is true; fail the test saying ``what`` did not happen in time."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.05)
