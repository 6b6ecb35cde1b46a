"""Jobs that end when the test says so (a marker file appears), not after a fixed time.

A test that needs a job still running at some point (a sensor must defer first, a
retry must re-attach first) could give it a fixed duration, but one long enough for a
loaded machine is waited out in full every time. These jobs run until the test has seen
what it waits for and releases them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from flink_runtime.invokable import AbstractInvokable

# The longest a job waits for its release: a test that failed before releasing must
# not leave its job holding a slot of the session's MiniCluster for long.
MAX_WAIT = 180.0


def release(marker: Path) -> None:
    """Let the job (or transform) waiting for ``marker`` go on."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def _wait_for(marker: Path, check: Any = None) -> bool:
    deadline = time.monotonic() + MAX_WAIT
    while not marker.exists():
        if check is not None:
            check()
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class UntilReleased(AbstractInvokable):
    """Runs until the file ``config["release"]`` exists (cancellable meanwhile); then
    finishes, or fails with ``RuntimeError(config["fail"])`` when that is set. Unreleased
    after MAX_WAIT seconds, it fails saying so."""

    def invoke(self) -> None:
        config = self.environment.config
        marker = Path(config["release"])
        if not _wait_for(marker, self.environment.check_cancelled):
            raise TimeoutError(f"{marker} did not appear within {MAX_WAIT:g} s: the test never released the job")
        if config.get("fail"):
            raise RuntimeError(config["fail"])


def held_until_released(df: Any) -> Any:
    """A transform holding its task until a file ``released`` appears in the folder of the
    data it reads (at most MAX_WAIT seconds). The JobManager's plan check (empty input)
    passes at once."""
    if df.isEmpty():
        return df
    folder = Path(urlparse(df.inputFiles()[0]).path).parent
    _wait_for(folder / "released")
    return df
