"""The active resource manager's shell: feeds the policy what the JobManager's
ResourceManager knows and does what the policy decides (Flink's ActiveResourceManager).

The JobManager owns one when `resourcemanager.driver` is process or docker and calls
`tick()` from its timer (every second or heartbeat.interval) and `request_waiting()`
when a slot request found no slot, so a start is decided at once, not a tick later.
A job being prepared declares the slots it will ask for (`planning_demand`), so their
TaskManagers start while it is prepared, not after: its Spark plans can then be
resolved on the first of them instead of in a JVM the planner would start (issue 26).
Driver calls block (a fork, an HTTP call to the Docker Engine), so they run on one thread
of the shell's own, which also keeps the parent-death signal of started processes armed
(driver.py); their results come back into the JobManager's mailbox.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.resourcemanager.docker_driver import DockerDriver, docker_engine
from flink_runtime.resourcemanager.driver import ProcessDriver, ResourceManagerDriver, WorkerLaunch
from flink_runtime.resourcemanager.policy import (
    UNKNOWN_PROFILE,
    Bounds,
    ClusterView,
    FailJob,
    ResourceAllocationPolicy,
    SlotProfile,
    StartWorker,
    StopWorker,
)

log = logging.getLogger(__name__)

Callback = Callable[[Any, BaseException | None], None]

# Seconds a worker thread waits for the JobManager's mailbox to take a planning demand.
MAILBOX_CALL_TIMEOUT = 30.0


class PendingSlotRequests(Protocol):
    """The slot pool's waiting requests, with the resource profile each asks for (the
    SlotPool is this; UNKNOWN asks for a default slot)."""

    def pending_profiles(self) -> list[SlotProfile]: ...


class CountedPendingRequests:
    """Waiting requests from the pool's count alone: every one has the unknown profile."""

    def __init__(self, slot_pool: Any) -> None:
        self._slot_pool = slot_pool

    def pending_profiles(self) -> list[SlotProfile]:
        return [UNKNOWN_PROFILE] * self._slot_pool.pending_requests


class ManagedResources(Protocol):
    """What the shell uses of the JobManager's ResourceManager (jobmanager/resource_manager.py)."""

    task_managers: Mapping[str, Any]

    def free_slot_count(self) -> int: ...

    def slots_of_task_manager(self, task_manager_id: str) -> int: ...

    def busy_task_managers(self) -> set[str]: ...

    def slot_demand_by_job(self) -> dict[str, int]: ...

    def fail_slot_requests_of(self, job_id: str, reason: str) -> None: ...

    def remove_task_manager(self, task_manager_id: str, reason: str, expected: bool = False) -> None: ...


class JobManagerEndpoint(Protocol):
    """What the shell uses of the JobManager actor: its address and its run_async."""

    @property
    def address(self) -> str: ...

    cluster_secret: str

    def run_async(self, awaitable: Any, on_done: Callback | None = None) -> Any: ...

    def run_in_mailbox(self, function: Callable[..., Any], *args: Any) -> None: ...

    async def call_in_mailbox(self, function: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any: ...


@dataclass(frozen=True)
class PlanningDemand:
    """Called from a job's preparation (a worker thread). `declare(job_id, profiles)`: the
    slots the job will ask for once prepared count as wanted until `withdraw(job_id)`;
    returns whether a TaskManager is starting while none is registered (one to wait for).
    `closed` is set once the resource manager stops: a wait for a TaskManager ends then
    (it must not hold up the JobManager's exit)."""

    declare: Callable[[str, Sequence[SlotProfile]], bool]
    withdraw: Callable[[str], None]
    closed: threading.Event


def create_driver(config: Configuration) -> ResourceManagerDriver:
    """The configured driver (resourcemanager.driver must not be standalone)."""
    kind = config.get(cfg.ResourceManagerOptions.DRIVER)
    if kind == "process":
        return ProcessDriver(config)
    try:
        engine = docker_engine()
    except ImportError as exc:
        raise ConfigurationError(
            f"resourcemanager.driver: docker needs the docker Python package ({exc}); "
            "install it with pip install 'flink-runtime[docker]'"
        ) from None
    return DockerDriver(config, engine)


def bounds_of(config: Configuration) -> Bounds:
    options = cfg.ResourceManagerOptions
    memory = config.get(options.MAX_TOTAL_MEMORY)
    return Bounds(
        max_workers=config.get(options.MAX_TASKMANAGERS),
        max_slots=config.get(options.MAX_SLOTS),
        max_cpu_cores=config.get(options.MAX_TOTAL_CPU),
        max_memory_mb=memory // (1024 * 1024) if memory is not None else None,
    )


class ActiveResourceManager:
    def __init__(
        self,
        config: Configuration,
        resources: ManagedResources,
        pending: PendingSlotRequests,
        endpoint: JobManagerEndpoint,
        driver: ResourceManagerDriver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        options = cfg.ResourceManagerOptions
        slots = config.get(cfg.TASKMANAGER_SLOTS)
        if slots < 1:
            # 0 means "the CPU count" for a TaskManager started by hand; a started worker's
            # size must be known before it exists.
            slots = 1
        self.config = config
        self.policy = ResourceAllocationPolicy(
            slots_per_worker=slots,
            bounds=bounds_of(config),
            idle_timeout=config.get_seconds(options.TASKMANAGER_TIMEOUT),
            registration_timeout=config.get_seconds(options.TASKMANAGER_REGISTRATION_TIMEOUT),
            max_failure_rate=config.get(options.START_WORKER_MAX_FAILURE_RATE),
            retry_interval=config.get_seconds(options.START_WORKER_RETRY_INTERVAL),
        )
        self.resources = resources
        self.pending = pending
        self.endpoint = endpoint
        self.driver = driver if driver is not None else create_driver(config)
        self.clock = clock
        # One thread for every driver call: see the module docstring.
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="resource-manager-driver")
        self._polling = False
        self._decision_queued = False
        # When each started worker registered (monotonic), for the start-on-demand figures.
        self.registered_after: dict[str, float] = {}
        self._started_at: dict[str, float] = {}
        # The slots each job being prepared declared (planning_demand).
        self._declared: dict[str, tuple[SlotProfile, ...]] = {}
        self._closed = threading.Event()

    # -- stimuli: the JobManager's timer and slot requests ----------------------------------------

    def tick(self) -> None:
        self._poll_terminations()
        self._decide()

    def request_waiting(self) -> None:
        """A slot request found no free slot: decide once its batch of requests is in (a
        job asks for all its slots in one handler; one decision covers them all)."""
        if not self._decision_queued:
            self._decision_queued = True
            self.endpoint.run_in_mailbox(self._decide)

    def planning_demand(self) -> PlanningDemand:
        """For a job's preparation, which runs in a worker thread; made in the mailbox (it
        captures the loop the calls go through)."""
        loop = asyncio.get_running_loop()

        def in_mailbox(function: Callable[..., Any], *args: Any) -> Any:
            call = self.endpoint.call_in_mailbox(function, *args)
            return asyncio.run_coroutine_threadsafe(call, loop).result(MAILBOX_CALL_TIMEOUT)

        return PlanningDemand(
            declare=lambda job_id, profiles: in_mailbox(self._declare, job_id, tuple(profiles)),
            withdraw=lambda job_id: in_mailbox(self._declared.pop, job_id, None),
            closed=self._closed,
        )

    def _declare(self, job_id: str, profiles: tuple[SlotProfile, ...]) -> bool:
        self._declared[job_id] = profiles
        self._decide()
        return not self.resources.task_managers and self.policy.starting_slots > 0

    # -- the decisions, executed --------------------------------------------------------------------

    def _view(self) -> ClusterView:
        registered = frozenset(self.resources.task_managers)
        external = sum(self.resources.slots_of_task_manager(tm) for tm in registered if not self.policy.is_worker(tm))
        return ClusterView(
            pending=tuple(self.pending.pending_profiles()),
            free_slots=self.resources.free_slot_count(),
            registered=registered,
            busy=frozenset(self.resources.busy_task_managers()),
            external_slots=external,
            job_slots=self.resources.slot_demand_by_job(),
            declared=dict(self._declared),
        )

    def _decide(self) -> None:
        self._decision_queued = False
        now = self.clock()
        view = self._view()
        for worker_id in view.registered:
            started = self._started_at.pop(worker_id, None)
            if started is not None:
                self.registered_after[worker_id] = now - started
                log.info("TaskManager %s registered %.2f s after its start", worker_id, now - started)
        for action in self.policy.decide(now, view):
            if isinstance(action, StartWorker):
                self._start(action, now)
            elif isinstance(action, StopWorker):
                log.info("Stopping TaskManager %s: %s", action.worker_id, action.reason)
                if action.registered:
                    self.resources.remove_task_manager(action.worker_id, action.reason, expected=True)
                self._in_driver_thread(self.driver.stop_worker, action.worker_id)
            elif isinstance(action, FailJob):
                log.warning("%s", action.reason)
                self.resources.fail_slot_requests_of(action.job_id, action.reason)

    def _start(self, action: StartWorker, now: float) -> None:
        host, _, port = self.endpoint.address.removeprefix("tcp://").rpartition(":")
        properties = {**self.config.to_dict(), cfg.CLUSTER_SECRET.key: self.endpoint.cluster_secret}
        launch = WorkerLaunch(action.worker_id, action.spec, host, int(port), properties)
        log.info(
            "Starting TaskManager %s (%d slots, %g cores) for waiting slot requests",
            action.worker_id,
            action.spec.slots,
            action.spec.cpu_cores,
        )
        self._started_at[action.worker_id] = now

        def started(_: Any, error: BaseException | None) -> None:
            if error is not None:
                log.warning("Could not start TaskManager %s: %s", action.worker_id, error)
                self._terminated(action.worker_id, f"its start failed: {error}")

        self._in_driver_thread(self.driver.start_worker, launch, on_done=started)

    def _poll_terminations(self) -> None:
        if self._polling:
            return
        self._polling = True

        def polled(ended: list[tuple[str, str]] | None, error: BaseException | None) -> None:
            self._polling = False
            if error is not None:
                log.warning("Could not ask the driver which TaskManagers ended: %s", error)
            for worker_id, reason in ended or []:
                self._terminated(worker_id, reason)

        self._in_driver_thread(self.driver.terminated_workers, on_done=polled)

    def _terminated(self, worker_id: str, reason: str) -> None:
        self._started_at.pop(worker_id, None)
        if self.policy.worker_terminated(worker_id, self.clock()):
            log.warning("TaskManager %s ended unexpectedly: %s", worker_id, reason)
            # Its tasks fail now rather than after the heartbeat timeout; the job restarts
            # them, their slot requests wait, and the next decision starts a replacement.
            self.resources.remove_task_manager(worker_id, f"its {reason}")
            self._decide()

    def _in_driver_thread(self, function: Callable[..., Any], *args: Any, on_done: Callback | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.endpoint.run_async(loop.run_in_executor(self._executor, function, *args), on_done)

    # -- views and lifetime -----------------------------------------------------------------------

    def view(self) -> dict[str, Any]:
        """For logs and the REST API: what this resource manager started."""
        return {
            "driver": self.config.get(cfg.ResourceManagerOptions.DRIVER),
            "workers": {worker_id: vars(spec) for worker_id, spec in self.policy.workers.items()},
            "started": self.policy.started_total,
            "stopped": self.policy.stopped_total,
            "failed": self.policy.failed_total,
        }

    def close(self) -> None:
        """Stop every started TaskManager and wait for them (the JobManager is stopping)."""
        self._closed.set()
        log.info("Resource manager stopping: %s", self.view())
        self._executor.submit(self.driver.stop_all).result()
        self._executor.shutdown(wait=True)
