"""A job being prepared declares its slots to the active resource manager, which starts
their TaskManagers at once (resourcemanager/active.py planning_demand); with none
registered, a job's Spark plans wait for the first of them (jobmanager/job_planning.py)
instead of the planner starting a JVM of its own."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.jobmanager.job_planning import JobPlanning
from flink_runtime.resourcemanager import ActiveResourceManager
from flink_runtime.resourcemanager.active import PlanningDemand
from flink_runtime.resourcemanager.policy import UNKNOWN_PROFILE


class Endpoint:
    """The JobManager as the shell sees it: its mailbox is the loop's thread."""

    address = "tcp://127.0.0.1:6123"
    cluster_secret = "secret"

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def run_in_mailbox(self, function: Callable[..., Any], *args: Any) -> None:
        self.loop.call_soon(function, *args)

    def run_async(self, awaitable: Any, on_done: Any = None) -> Any:
        async def run() -> None:
            try:
                result = await awaitable
            except BaseException as exc:  # noqa: BLE001 - handed to on_done, as the endpoint does
                if on_done is not None:
                    on_done(None, exc)
                return
            if on_done is not None:
                on_done(result, None)

        return self.loop.create_task(run())

    async def call_in_mailbox(self, function: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        return function(*args)


class Resources:
    def __init__(self) -> None:
        self.task_managers: dict[str, Any] = {}
        self.free_slots = 0

    def free_slot_count(self) -> int:
        return self.free_slots

    def slots_of_task_manager(self, task_manager_id: str) -> int:
        return 1

    def busy_task_managers(self) -> set[str]:
        return set()

    def slot_demand_by_job(self) -> dict[str, int]:
        return {}

    def fail_slot_requests_of(self, job_id: str, reason: str) -> None:
        raise AssertionError(f"no job fails here: {reason}")

    def remove_task_manager(self, task_manager_id: str, reason: str, expected: bool = False) -> None:
        self.task_managers.pop(task_manager_id, None)


class Driver:
    def __init__(self) -> None:
        self.started: list[str] = []

    def start_worker(self, launch: Any) -> None:
        self.started.append(launch.worker_id)

    def stop_worker(self, worker_id: str) -> None: ...

    def terminated_workers(self) -> list[tuple[str, str]]:
        return []

    def stop_all(self) -> None: ...


class NoPendingRequests:
    def pending_profiles(self) -> list[Any]:
        return []


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def shell(loop: asyncio.AbstractEventLoop, **properties: Any) -> tuple[ActiveResourceManager, Resources, Driver]:
    resources, driver = Resources(), Driver()
    config = Configuration({"resourcemanager.driver": "process", "taskmanager.numberOfTaskSlots": 2, **properties})

    async def make() -> ActiveResourceManager:
        return ActiveResourceManager(config, resources, NoPendingRequests(), Endpoint(loop), driver)

    return asyncio.run_coroutine_threadsafe(make(), loop).result(5), resources, driver


def demand_of(loop: asyncio.AbstractEventLoop, active: ActiveResourceManager) -> PlanningDemand:
    async def make() -> PlanningDemand:  # in the mailbox, as JobPlanning is made
        return active.planning_demand()

    return asyncio.run_coroutine_threadsafe(make(), loop).result(5)


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def decide(loop: asyncio.AbstractEventLoop, active: ActiveResourceManager) -> None:
    """One more decision (a timer tick), and time for the driver thread to act on it."""
    loop.call_soon_threadsafe(active.tick)
    time.sleep(0.2)


TWO_SLOTS = (UNKNOWN_PROFILE, UNKNOWN_PROFILE)


def test_declared_slots_start_their_taskmanagers_while_the_job_is_prepared(loop: asyncio.AbstractEventLoop) -> None:
    active, _, driver = shell(loop)  # 2 slots a TaskManager
    demand = demand_of(loop, active)
    assert demand.declare("job-1", TWO_SLOTS + TWO_SLOTS) is True  # called from this (worker) thread
    eventually(lambda: len(driver.started) == 2)
    assert demand.declare("job-2", ()) is True  # none registered, and some start: wait for them
    decide(loop, active)
    assert len(driver.started) == 2
    demand.withdraw("job-1")
    demand.withdraw("job-2")


def test_free_slots_of_registered_taskmanagers_serve_declared_slots(loop: asyncio.AbstractEventLoop) -> None:
    active, resources, driver = shell(loop)
    resources.task_managers["tm-1"] = SimpleNamespace()
    resources.free_slots = 2
    demand = demand_of(loop, active)
    assert demand.declare("job-1", TWO_SLOTS) is False  # one is registered: the plans ask it
    decide(loop, active)
    assert driver.started == []


def test_bounds_that_allow_no_taskmanager_start_none_and_say_so(loop: asyncio.AbstractEventLoop) -> None:
    active, _, driver = shell(loop, **{"resourcemanager.max-taskmanagers": 0})
    assert demand_of(loop, active).declare("job-1", TWO_SLOTS) is False
    decide(loop, active)
    assert driver.started == []


def test_withdrawn_slots_start_nothing_more(loop: asyncio.AbstractEventLoop) -> None:
    """The started worker never registers and is given up (it ended): with the slots
    withdrawn, no replacement starts (a refused job must not keep starting workers)."""
    active, _, driver = shell(loop)
    demand = demand_of(loop, active)
    assert demand.declare("job-1", TWO_SLOTS) is True
    eventually(lambda: len(driver.started) == 1)
    demand.withdraw("job-1")
    loop.call_soon_threadsafe(active._terminated, driver.started[0], "exit code 1")
    decide(loop, active)
    assert len(driver.started) == 1


# -- the preparation's side ------------------------------------------------------------------------


class Gateway:
    planner_timeout = 120.0
    cluster_secret = "secret"
    blob_dir = "/nonexistent"

    def __init__(self, demand: PlanningDemand | None) -> None:
        self.task_managers: dict[str, Any] = {}
        self.active_resources = SimpleNamespace(planning_demand=lambda: demand) if demand is not None else None


def demand(
    declare: Callable[[str, Any], bool],
    withdraw: Callable[[str], Any] = lambda job_id: None,
    closed: threading.Event | None = None,
) -> PlanningDemand:
    return PlanningDemand(declare=declare, withdraw=withdraw, closed=closed or threading.Event())


def registered(task_manager_id: str) -> Any:
    return SimpleNamespace(
        task_manager_id=task_manager_id, address="tcp://127.0.0.1:1", metrics={}, registered_at=time.monotonic()
    )


def spark_job(invokable: str = "spark", parallelism: int = 1) -> JobGraph:
    vertex = JobVertex(id="v", name="V", invokable=invokable, parallelism=parallelism)
    return JobGraph(name="plans", job_id="job-1", vertices=[vertex])


def planning(
    gateway: Gateway, job: JobGraph | None = None, alive: Callable[[], bool] = lambda: True, **properties: Any
) -> JobPlanning:
    return JobPlanning(job or spark_job(), Configuration(properties), gateway, alive)  # type: ignore[arg-type]


def declared_target(preparation: JobPlanning) -> Any:
    with preparation._declared_slots() as target:
        return target


def test_the_preparation_declares_its_slots_and_waits_for_the_first_taskmanager() -> None:
    calls: list[Any] = []
    gateway: Gateway

    def declare(job_id: str, profiles: Any) -> bool:
        calls.append(("declare", job_id, len(profiles)))
        threading.Timer(0.3, lambda: gateway.task_managers.update(tm=registered("tm-started"))).start()
        return True

    gateway = Gateway(demand(declare=declare, withdraw=lambda job_id: calls.append(("withdraw", job_id))))
    preparation = planning(gateway, spark_job(parallelism=3))
    with preparation._declared_slots() as target:
        assert target is not None and target.task_manager_id == "tm-started"
        assert calls == [("declare", "job-1", 3)]  # withdrawn only once the preparation is over
    assert calls == [("declare", "job-1", 3), ("withdraw", "job-1")]


def test_the_wait_ends_at_the_registration_timeout_and_the_planner_plans_alone() -> None:
    calls: list[str] = []
    gateway = Gateway(demand(declare=lambda job_id, profiles: True, withdraw=calls.append))
    started = time.monotonic()
    preparation = planning(gateway, **{"resourcemanager.taskmanager-registration.timeout": "300 ms"})
    assert declared_target(preparation) is None
    assert 0.25 <= time.monotonic() - started < 3
    assert calls == ["job-1"]


def test_no_wait_for_jobs_without_spark_plans_or_with_a_warm_planner() -> None:
    """Their slots are declared all the same: their TaskManagers start during the preparation."""
    declared: list[str] = []
    gateway = Gateway(demand(declare=lambda job_id, profiles: declared.append(job_id) or True))
    started = time.monotonic()
    assert declared_target(planning(gateway, spark_job("number-source"))) is None
    assert declared_target(planning(gateway, **{"jobmanager.planner.warm-up": "true"})) is None
    assert time.monotonic() - started < 1 and declared == ["job-1", "job-1"]
    assert declared_target(planning(Gateway(None))) is None


def test_a_registered_taskmanager_is_named_at_once() -> None:
    gateway = Gateway(demand(declare=lambda job_id, profiles: False))
    gateway.task_managers["tm-1"] = registered("tm-1")
    target = declared_target(planning(gateway))
    assert target is not None and target.task_manager_id == "tm-1"


def test_a_jobmanager_stopping_leaves_the_planner_to_plan_alone() -> None:
    def stopped(*args: Any) -> bool:
        raise RuntimeError("JobManager is not running")

    assert declared_target(planning(Gateway(demand(declare=stopped, withdraw=stopped)))) is None


def test_a_jobmaster_made_outside_the_event_loop_declares_nothing() -> None:
    """planning_demand captures the JobManager's loop; without one the job prepares as on
    a standalone cluster rather than failing."""
    loop = asyncio.new_event_loop()  # not running
    try:
        config = Configuration({"resourcemanager.driver": "process"})
        active = ActiveResourceManager(config, Resources(), NoPendingRequests(), Endpoint(loop), Driver())
        gateway = Gateway(None)
        gateway.active_resources = active
        assert declared_target(planning(gateway)) is None
    finally:
        loop.close()


def test_the_wait_ends_when_the_resource_manager_closes() -> None:
    """The JobManager stopping must not wait out a preparation's wait for a TaskManager."""
    closed = threading.Event()
    gateway = Gateway(demand(declare=lambda job_id, profiles: True, closed=closed))
    threading.Timer(0.2, closed.set).start()
    started = time.monotonic()
    assert declared_target(planning(gateway)) is None  # the limit is 60 s
    assert time.monotonic() - started < 2


def test_closing_the_resource_manager_sets_what_waits_watch(loop: asyncio.AbstractEventLoop) -> None:
    active, _, _ = shell(loop)
    demand = demand_of(loop, active)
    assert not demand.closed.is_set()
    active.close()
    assert demand.closed.is_set()


def test_the_wait_ends_when_the_job_ends() -> None:
    """A job cancelled while its plans wait stops waiting (and withdraws its slots)."""
    withdrawn: list[str] = []
    ended = threading.Event()
    gateway = Gateway(demand(declare=lambda job_id, profiles: True, withdraw=withdrawn.append))
    threading.Timer(0.2, ended.set).start()
    started = time.monotonic()
    assert declared_target(planning(gateway, alive=lambda: not ended.is_set())) is None
    assert time.monotonic() - started < 2 and withdrawn == ["job-1"]
