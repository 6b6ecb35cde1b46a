"""minicluster.idle-timeout: the idle tracker, the watch loop, and a MiniCluster that stops itself."""

from __future__ import annotations

import asyncio
import time

import pytest

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.minicluster import MiniCluster
from flink_runtime.minicluster_idle import IdleTracker, poll_interval, stop_when_idle


def test_the_tracker_counts_idle_time_from_the_last_activity() -> None:
    tracker = IdleTracker(now=100.0)
    assert tracker.observe(101.0, requests=5, busy=False) == 0.0  # the first look sees a new count
    assert tracker.observe(104.0, requests=5, busy=False) == 3.0
    assert tracker.observe(105.0, requests=6, busy=False) == 0.0  # a request came in
    assert tracker.observe(107.0, requests=6, busy=True) == 0.0  # a job runs (or a request is answered)
    assert tracker.observe(110.5, requests=6, busy=False) == 3.5
    assert tracker.observe(109.0, requests=6, busy=False) == 2.0  # a clock step back is no negative idle time


@pytest.mark.parametrize(("timeout", "interval"), [(0.1, 0.05), (2.0, 0.5), (3600.0, 1.0)])
def test_it_looks_a_few_times_per_timeout_and_at_most_once_a_second(timeout: float, interval: float) -> None:
    assert poll_interval(timeout) == interval


def run_watch(timeout: float, activity: list[tuple[int, bool]], may_stop=None, limit: float = 5.0) -> float:  # noqa: ANN001
    """Run stop_when_idle against a scripted activity (the last entry repeats); the seconds until stop."""
    stopped = asyncio.Event()

    def sample() -> tuple[int, bool]:
        return activity.pop(0) if len(activity) > 1 else activity[0]

    async def main() -> float:
        started = time.monotonic()
        task = asyncio.create_task(stop_when_idle(timeout, sample, stopped.set, may_stop))
        await asyncio.wait_for(stopped.wait(), limit)
        await task
        return time.monotonic() - started

    return asyncio.run(main())


def test_the_watch_stops_after_the_timeout_without_activity() -> None:
    assert 0.2 <= run_watch(0.2, [(0, False)]) < 1.0


def test_activity_postpones_the_stop() -> None:
    # Busy for the first 8 looks (0.05 s apart), then idle: the stop comes 0.2 s after.
    elapsed = run_watch(0.2, [(0, True)] * 8 + [(0, False)])
    assert elapsed >= 0.4 + 0.2 - 0.05


def test_a_refusal_keeps_it_running_and_the_refuser_sees_still_idle() -> None:
    answers = [False, False, True]
    seen: list[bool] = []

    def may_stop(still_idle) -> bool:  # noqa: ANN001
        seen.append(still_idle())
        return answers.pop(0)

    assert run_watch(0.1, [(3, False)], may_stop) >= 0.1 + 2 * 0.05
    assert seen == [True, True, True] and answers == []


def test_a_request_that_comes_in_while_it_asks_is_seen_by_still_idle() -> None:
    activity = [(0, False)]
    seen: list[bool] = []

    def may_stop(still_idle) -> bool:  # noqa: ANN001
        if not seen:
            activity[0] = (1, False)  # a caller's probe lands just now
        seen.append(still_idle())
        return seen[-1]

    elapsed = run_watch(0.2, activity, may_stop)
    assert seen == [False, True]  # refused once, then a full timeout later it stops
    assert elapsed >= 0.4


@pytest.mark.integration
def test_a_minicluster_with_an_idle_timeout_stops_itself_and_0_is_off() -> None:
    cold = {cfg.SPARK_WARM_UP.key: "false"}  # no Spark job here: no JVM to start
    config = Configuration({cfg.MINICLUSTER_IDLE_TIMEOUT.key: "1 s", **cold})
    with MiniCluster(config, num_taskmanagers=1) as idle, MiniCluster(Configuration(cold), num_taskmanagers=1) as kept:
        assert idle._thread is not None and kept._thread is not None
        idle._thread.join(10)
        assert not idle._thread.is_alive()  # it stopped itself: its loop ended
        assert kept._idle_watch is None and kept._thread.is_alive()
