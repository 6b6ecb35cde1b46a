"""An in-memory JobManager for one JobMaster, as Flink's SchedulerTestingUtils builds a
scheduler around fakes: a slot pool with a fixed number of slots, TaskManagers that
record the SubmitTask/CancelTask they are asked, a planner that returns `Prepared`
vertices with splits, and a manual clock whose timers fire only when a test advances
it. Work the JobMaster hands to a worker thread runs when the test calls `settle()`.

Nothing here starts a thread, a process or a socket, so a test drives a real
JobMaster through a whole job in milliseconds. Reusable: tests/simulation may drive
several of these.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import Execution, ExecutionState, JobStatus
from flink_runtime.invokable import Prepared
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import DistributionPattern, JobGraph, JobVertex, new_job_id
from flink_runtime.jobmanager.jobmaster import JobMaster
from flink_runtime.planner import tasks as planner_tasks
from flink_runtime.rpc.messages import CancelTask, JobStatusChanged, Message, SubmitTask, TaskOperationResult
from flink_runtime.rpc.supervision import Directive, Supervised
from flink_runtime.scheduler.slotpool import PhysicalSlot

TASK_MANAGER = "tm-1"
ADDRESS = "tcp://tm-1"


class Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakePlanner:
    """Prepares every vertex with no splits, and sources with `splits` each; records
    the terminal hooks it ran, raising `publish_error` if set."""

    splits: int = 2
    publish_error: BaseException | None = None
    monitor_interval: float | None = None  # set: the sources are continuous (the job runs in rounds)
    # The splits each scan for new input finds per source, one entry a scan (none left: nothing new).
    new_input: list[int] = field(default_factory=list)
    published: list[JobStatus] = field(default_factory=list)

    def run(self, function: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        if function is planner_tasks.prepare_job:
            graph = JobGraph.from_json(args[0]) if isinstance(args[0], (str, bytes)) else args[0]
            sources = {v.id for v in graph.vertices} - {edge.target for edge in graph.edges}
            return {
                v.id: Prepared(
                    splits=[InputSplit(n) for n in range(self.splits)], monitor_interval=self.monitor_interval
                )
                if v.id in sources
                else Prepared()
                for v in graph.vertices
            }
        if function is planner_tasks.run_terminal_hooks:
            self.published.append(args[4])
            if self.publish_error is not None:
                raise self.publish_error
            return None
        if function is planner_tasks.prepare_sources:
            found = self.new_input.pop(0) if self.new_input else 0
            return {
                vertex_id: Prepared(
                    splits=[InputSplit(n) for n in range(found)], monitor_interval=self.monitor_interval
                )
                for vertex_id in args[2]
            }
        raise AssertionError(f"unexpected planner call {function}")


class FakeGateway:
    """The JobManager as a JobMaster sees it (jobmanager/gateway.py's JobMasterGateway)."""

    ask_timeout = 1.0
    blob_dir = "/nonexistent-blobs"
    planner_timeout = 5.0
    jobmanager_id = "jm-1"
    cluster_secret = ""
    active_resources = None  # a standalone cluster: no TaskManager started on demand

    def __init__(self, slots: int = 4, planner: FakePlanner | None = None) -> None:
        self.planner = planner or FakePlanner()
        self.task_managers: dict[str, Any] = {}  # none registered: the planner resolves plans itself
        self.job: JobMaster | None = None
        self.now = 0.0
        self._timers: list[tuple[float, int, Timer, Callable[..., None], tuple[Any, ...]]] = []
        self._order = itertools.count()
        self._work: list[tuple[Any, Callable[[Any, BaseException | None], None] | None]] = []
        self.free_slots = [PhysicalSlot(TASK_MANAGER, index, "localhost") for index in range(slots)]
        self.allocated: dict[str, PhysicalSlot] = {}
        self.pending_requests: list[str] = []
        self.requested: list[str] = []  # every slot request, in order
        self.submitted: list[SubmitTask] = []
        self.cancelled: list[str] = []  # attempt ids CancelTask was asked for
        self.told: list[Message] = []
        self.events: list[JobStatusChanged] = []
        self.released_namespaces: list[str] = []
        self.savepoint_status: dict[str, dict[str, Any]] = {}
        self.child_failures: list[BaseException] = []

    # -- supervision ------------------------------------------------------------------------

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        self.child_failures.append(error)
        return Directive.RESTART  # as the JobManager: the job fails globally

    def escalate_failure(self, child: Supervised, error: BaseException) -> None:
        """The job's restart itself raised: the JobManager would fail; the test does."""
        raise AssertionError(f"{child.name} escalated {error!r}") from error

    # -- mailbox, timers and workers -----------------------------------------------------------

    def run_async(self, awaitable: Any, on_done: Callable[[Any, BaseException | None], None] | None = None) -> Any:
        self._work.append((awaitable, on_done))

    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> Timer:
        timer = Timer()
        heapq.heappush(self._timers, (self.now + delay, next(self._order), timer, function, args))
        return timer

    def settle(self) -> None:
        """Run the work handed to worker threads (and what it leads to) until none is left."""
        while self._work:
            awaitable, on_done = self._work.pop(0)
            try:
                result, error = asyncio.run(_awaited(awaitable)), None
            except Exception as exc:  # noqa: BLE001 - handed to the callback, as run_async does
                result, error = None, exc
            if on_done is not None:
                on_done(result, error)

    def advance(self, seconds: float) -> None:
        """Move the clock on, firing the timers due (and settling what they start)."""
        until = self.now + seconds
        self.settle()
        while self._timers and self._timers[0][0] <= until:
            at, _, timer, function, args = heapq.heappop(self._timers)
            self.now = at
            if not timer.cancelled:
                function(*args)
            self.settle()
        self.now = until

    # -- slots ------------------------------------------------------------------------------

    def request_slot(
        self, job: JobMaster, request_id: str, preferred_hosts: list[str], profile: object = None
    ) -> PhysicalSlot | None:
        self.requested.append(request_id)
        if not self.free_slots:
            self.pending_requests.append(request_id)
            return None
        free = self.free_slots.pop(0)
        slot = PhysicalSlot(free.task_manager_id, free.slot_index, free.host, request_id)
        self.allocated[request_id] = slot
        return slot

    def release_slot(self, allocation_id: str) -> None:
        slot = self.allocated.pop(allocation_id, None)
        if slot is None:
            return
        free = PhysicalSlot(slot.task_manager_id, slot.slot_index, slot.host)
        if self.pending_requests and self.job is not None:
            request_id = self.pending_requests.pop(0)
            self.allocated[request_id] = given = PhysicalSlot(
                free.task_manager_id, free.slot_index, free.host, request_id
            )
            self.job.on_slot_allocated(request_id, given)
        else:
            self.free_slots.append(free)

    def cancel_slot_request(self, request_id: str) -> None:
        if request_id in self.pending_requests:
            self.pending_requests.remove(request_id)

    def slot_of(self, allocation_id: str) -> PhysicalSlot | None:
        return self.allocated.get(allocation_id)

    def slot_requests_waiting(self) -> bool:
        return bool(self.pending_requests)

    # -- TaskManagers -------------------------------------------------------------------------

    def task_manager_address(self, task_manager_id: str) -> str | None:
        return ADDRESS if task_manager_id == TASK_MANAGER else None

    def ask_task_manager(
        self, address: str, message: Message, on_done: Callable[[Any, BaseException | None], None]
    ) -> None:
        if isinstance(message, SubmitTask):
            self.submitted.append(message)
            on_done(TaskOperationResult(execution_id=message.descriptor.execution_id, success=True), None)
        elif isinstance(message, CancelTask):
            self.cancelled.append(message.execution_id)
            # The task is gone from the TaskManager: the JobMaster concludes CANCELED.
            on_done(TaskOperationResult(execution_id=message.execution_id, success=False, reason="unknown task"), None)
        else:
            raise AssertionError(f"unexpected ask {message!r}")

    def tell_task_manager(self, address: str, message: Message) -> None:
        self.told.append(message)

    def blocking_ask(self) -> Callable[[str, Message], Message]:
        def ask(address: str, message: Message) -> Message:
            raise AssertionError(f"unexpected blocking ask {message!r}")

        return ask

    # -- what the JobManager is told -----------------------------------------------------------

    def job_status_changed(self, job: JobMaster, event: JobStatusChanged) -> None:
        self.events.append(event)

    def release_partitions(self, job_id: str, data_namespace: str) -> None:
        self.released_namespaces.append(data_namespace)

    def savepoint_request_changed(self, job: JobMaster, request_id: str, status: dict[str, Any]) -> None:
        self.savepoint_status[request_id] = status

    def checkpoint_completed(
        self, job: JobMaster, checkpoint_id: int, location: str, is_savepoint: bool, size: int, subsumed: list[str]
    ) -> None:
        pass

    @property
    def statuses(self) -> list[str]:
        return [event.new_state for event in self.events]


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


# -- jobs and how tasks answer ---------------------------------------------------------------


def job_graph(*vertices: tuple[str, int], edges: tuple[tuple[str, str], ...] = ()) -> JobGraph:
    """A graph of no-op vertices (id, parallelism) with ALL_TO_ALL blocking edges."""
    graph = JobGraph(
        name="fake",
        job_id=new_job_id(),
        vertices=[JobVertex(id=v, name=v.title(), invokable="noop", parallelism=p) for v, p in vertices],
    )
    for source, target in edges:
        graph.connect(source, target, distribution_pattern=DistributionPattern.ALL_TO_ALL)
    return graph


def start_job(
    graph: JobGraph, config: dict[str, str] | None = None, slots: int = 4, planner: FakePlanner | None = None
) -> tuple[JobMaster, FakeGateway]:
    gateway = FakeGateway(slots, planner)
    job = JobMaster(graph, gateway, Configuration(config or {}))
    gateway.job = job
    job.start()
    gateway.settle()
    return job, gateway


def current(job: JobMaster, vertex_id: str, subtask: int = 0) -> Execution:
    assert job.graph is not None
    return job.graph.vertices[vertex_id].task_vertices[subtask].current_execution


def run_to(job: JobMaster, execution: Execution, state: ExecutionState, error: str | None = None, **extra: Any) -> None:
    """The TaskManager reports the attempt INITIALIZING, RUNNING, then `state`; a FINISHED
    producer reports its partitions first (ScheduleOrUpdateConsumers)."""
    for step in (ExecutionState.INITIALIZING, ExecutionState.RUNNING):
        if execution.state.can_transition_to(step) and state is not step:
            job.update_task_execution_state(execution.attempt_id, step, None)
    if state is ExecutionState.FINISHED:
        for partition in execution.vertex.produced_partitions:
            job.schedule_or_update_consumers(
                partition.partition_id, f"/data/{partition.partition_id}", execution.attempt_id, ADDRESS
            )
    job.update_task_execution_state(execution.attempt_id, state, error, **extra)


def finish_deployed(job: JobMaster) -> int:
    """Every deployed attempt finishes; returns how many did."""
    assert job.graph is not None
    deployed = [v.current_execution for v in job.graph.all_execution_vertices()]
    deployed = [e for e in deployed if e.state is ExecutionState.DEPLOYING]
    for execution in deployed:
        run_to(job, execution, ExecutionState.FINISHED)
    return len(deployed)


def resource_manager_on_a_fake_host(schedule_once: Callable[..., Any]) -> tuple[Any, Any]:
    """A real ResourceManager whose JobManager is a stand-in (no transport: its asks go
    nowhere), and that stand-in, whose `jobs` a test fills. `schedule_once(delay, function,
    *args)` receives the manager's timers."""
    from types import SimpleNamespace

    from flink_runtime.jobmanager.resource_manager import ResourceManager

    host = SimpleNamespace(
        rpc=SimpleNamespace(disconnect=lambda address: None),
        jobmanager_id="jm",
        rest_url="",
        jobs={},
        run_async=lambda awaitable, on_done=None: awaitable.close(),
        schedule_once=schedule_once,
        at_end_of_turn=lambda function: None,
    )
    manager = ResourceManager(host, Configuration({}), "secret")  # type: ignore[arg-type]
    manager.rpc.ask = lambda *args: SimpleNamespace(close=lambda: None)  # type: ignore[attr-defined]
    return manager, host
