"""``minicluster.idle-timeout``: a MiniCluster that stops itself when nobody uses it.

Flink has no such option (a session cluster runs until told to stop); the embedded
cluster Airflow starts on demand needs one, or it outlives Airflow by days.

What counts as use: a job that is not globally terminal (CREATED, RUNNING,
RESTARTING, SUSPENDED, ...), and any REST request, received or still being answered,
whatever its path. So a browser on the dashboard (it polls) keeps the cluster up, and
so does a caller's probe of ``/overview`` before it submits a job: the probe promises
a submission, and counting it leaves that caller a full timeout to make it. The watch
itself reads the cluster's state in process, never through REST.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: (REST requests received so far, whether anything is going on now: a job, a request).
Activity = Callable[[], tuple[int, bool]]


class IdleTracker:
    """How long nothing has happened, from samples of the request count and busyness."""

    def __init__(self, now: float) -> None:
        self._last_activity = now
        self._requests: int | None = None

    def observe(self, now: float, requests: int, busy: bool) -> float:
        """Seconds idle as of ``now``; a new request or being busy resets it to 0."""
        if busy or requests != self._requests:
            self._last_activity = now
        self._requests = requests
        return max(0.0, now - self._last_activity)


def poll_interval(timeout: float) -> float:
    # A few looks per timeout (a short one in tests stops close to on time), at most
    # one a second (reading the state is cheap, but a 1 h timeout needs no precision).
    return min(1.0, max(0.05, timeout / 4))


async def stop_when_idle(
    timeout: float,
    activity: Activity,
    stop: Callable[[], None],
    may_stop: Callable[[Callable[[], bool]], bool] | None = None,
) -> None:
    """Call ``stop`` once nothing has happened for ``timeout`` seconds.

    ``may_stop(still_idle)`` is asked first and can refuse (the embedded cluster takes
    its state directory's lock there); ``still_idle()`` looks again at that moment.
    """
    tracker = IdleTracker(time.monotonic())

    def idle_for() -> float:
        return tracker.observe(time.monotonic(), *activity())

    while True:
        await asyncio.sleep(poll_interval(timeout))
        idle = idle_for()
        if idle < timeout:
            continue
        if may_stop is not None and not may_stop(lambda: idle_for() >= timeout):
            continue
        log.info(
            "MiniCluster stopping itself: idle for %.1f s, no job running and no REST request "
            "(minicluster.idle-timeout: %g s)",
            idle,
            timeout,
        )
        stop()
        return
