"""The planner process's confinement (flink_runtime/planner/guard.py), on a
real planner process without Spark: its memory limit, and its death, with everything it
started, when its parent is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from flink_runtime.planner import PlannerPool, PlanningError
from tests.conftest import PROJECT_ROOT
from tests.helpers import planner_calls
from tests.helpers.leftovers import python_driver


def test_an_allocation_past_the_memory_limit_fails_naming_the_key_and_the_planner_serves_on() -> None:
    pool = PlannerPool({"jobmanager.planner.memory": "256 mb"}, start_spark_ahead=False)
    try:
        planner = pool.run(planner_calls.pid, timeout=60)
        with pytest.raises(PlanningError) as refused:
            pool.run(planner_calls.allocate, 512 << 20, timeout=60)
        assert "jobmanager.planner.memory" in str(refused.value) and "256 mb" in str(refused.value)
        assert pool.run(planner_calls.allocate, 16 << 20, timeout=60) == 16 << 20
        assert pool.run(planner_calls.pid, timeout=60) == planner  # the same process
    finally:
        pool.close()


def test_no_limit_with_0() -> None:
    pool = PlannerPool({"jobmanager.planner.memory": "0"}, start_spark_ahead=False)
    try:
        assert pool.run(planner_calls.allocate, 512 << 20, timeout=60) == 512 << 20
    finally:
        pool.close()


def _running(pid: int) -> bool:
    """Whether the process exists and is not a zombie (it may go between the two checks)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_an_idle_planner_is_replaced_by_a_fresh_process_but_never_under_a_call() -> None:
    """jobmanager.planner.idle-timeout: a used planner idle that long is replaced (its
    SparkSession's JVM goes with it); a call longer than the timeout keeps its process."""
    pool = PlannerPool({}, start_spark_ahead=False, idle_timeout=1.0)
    try:
        first = pool.run(planner_calls.pid, timeout=60)
        assert pool.run(planner_calls.sleep_then_pid, 2.5, timeout=60) == first  # 2.5 s > 1 s: kept
        assert pool.run(planner_calls.pid, timeout=60) == first  # right after the call: kept
        deadline = time.monotonic() + 30
        while _running(first):
            assert time.monotonic() < deadline, "the idle planner process was not replaced"
            time.sleep(0.1)
        second = pool.run(planner_calls.pid, timeout=60)
        assert second != first
    finally:
        pool.close()


DRIVER = """
import time
from flink_runtime.planner import PlannerPool
from tests.helpers import planner_calls

pool = PlannerPool({}, start_spark_ahead=False)
print(pool.run(planner_calls.pid, timeout=60), pool.run(planner_calls.start_sleeper, timeout=60), flush=True)
time.sleep(600)
"""


def test_the_planner_and_what_it_started_die_with_a_parent_killed_with_sigkill() -> None:
    driver = python_driver(DRIVER, PROJECT_ROOT)
    try:
        planner_pid, sleeper_pid = (int(word) for word in driver.stdout.readline().split())
        planner, sleeper = psutil.Process(planner_pid), psutil.Process(sleeper_pid)
        assert os.getpgid(planner_pid) == planner_pid  # it leads a group of its own
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    _, alive = psutil.wait_procs([planner, sleeper], timeout=10)
    for process in alive:
        process.kill()
    assert not alive, f"outlived their parent: {alive}"
