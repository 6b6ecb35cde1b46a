"""Slot reports (Flink's SlotReport): a TaskManager registering anew (with a new leader,
or after its JobManager took it for lost) reports the slots tasks of its earlier
registration still hold, and each heartbeat answer the slots still held. The JobManager
deploys into none of them until a report no longer lists it: the TaskManager would
refuse such a deployment (its slot is occupied), and repeated refusals would fail the job.

The TaskExecutor is real (real RPC, FakeTasks through its `create_task` seam); the
JobManager side is its real ResourceManager, fed the TaskExecutor's own messages."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import msgspec

from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.jobmanager.resource_manager import ResourceManager
from flink_runtime.rpc.endpoint import RpcEndpoint, handles
from flink_runtime.rpc.messages import (
    Acknowledge,
    AcknowledgeRegistration,
    AcknowledgeTaskExecutionStates,
    Heartbeat,
    HeartbeatResponse,
    Message,
    RegisterTaskManager,
    SubmitTask,
    TaskOperationResult,
    UpdateTaskExecutionStates,
)
from flink_runtime.rpc.service import RpcService
from flink_runtime.scheduler.slotpool import PhysicalSlot
from flink_runtime.taskmanager.taskexecutor import TaskExecutor
from tests.unit.taskexecutor_fakes import FakeTask, descriptor

SECRET = "slot-report-test-secret"


class ScriptedJobManager(RpcEndpoint):
    """Accepts registrations as the JobManager ids it is given in turn; records them."""

    def __init__(self, *jobmanager_ids: str) -> None:
        super().__init__("scripted JobManager", RpcService("127.0.0.1", 0, cluster_secret=SECRET))
        self.ids = list(jobmanager_ids)
        self.registrations: list[RegisterTaskManager] = []

    @handles(RegisterTaskManager)
    def on_register(self, message: RegisterTaskManager) -> Message:
        self.registrations.append(message)
        jobmanager_id = self.ids.pop(0) if len(self.ids) > 1 else self.ids[0]
        return AcknowledgeRegistration(registration_id=f"r{len(self.registrations)}", jobmanager_id=jobmanager_id)

    @handles(UpdateTaskExecutionStates)
    def on_update(self, message: UpdateTaskExecutionStates) -> Message:
        return AcknowledgeTaskExecutionStates(answers=[Acknowledge() for _ in message.updates])


class FakeRpc:
    def tell(self, address: str, message: Message) -> None:
        pass

    async def ask(self, address: str, message: Message, timeout: float) -> Message:
        raise AssertionError("not asked in these tests")

    def disconnect(self, address: str) -> None:
        pass


class FakeJobMaster:
    """What the ResourceManager calls on a job: which slots it was given."""

    def __init__(self) -> None:
        self.allocated: list[tuple[str, PhysicalSlot]] = []

    def on_slot_allocated(self, request_id: str, slot: PhysicalSlot) -> None:
        self.allocated.append((request_id, slot))

    def executions_on(self, task_manager_id: str) -> dict[str, ExecutionState]:
        return {}


class FakeHost:
    """The JobManager hosting the ResourceManager; its asks (heartbeats) are dropped."""

    def __init__(self) -> None:
        self.rpc = FakeRpc()
        self.jobmanager_id = "jm-2"
        self.rest_url = ""
        self.jobs: dict[str, Any] = {}

    def run_async(self, awaitable: Coroutine[Any, Any, Any], on_done: Any = None) -> None:
        awaitable.close()

    def schedule_once(self, delay: float, function: Any, *args: Any) -> None:
        pass  # its timers never fire: the test drives the ResourceManager itself

    def at_end_of_turn(self, function: Any) -> None:
        pass  # nor do its turns end


def resource_manager() -> ResourceManager:
    config = Configuration({"security.cluster.secret": SECRET, "heartbeat.timeout": "60 s"})
    return ResourceManager(FakeHost(), config, SECRET)  # type: ignore[arg-type]


async def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 5.0
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def task_manager_of_fake_tasks(tmp_path: Path, jobmanager: RpcEndpoint) -> tuple[TaskExecutor, list[FakeTask]]:
    """A started TaskExecutor of 2 slots registering at `jobmanager`, whose tasks are
    FakeTasks (the list holds them in the order they were made)."""
    config = {
        "io.tmp.dirs": str(tmp_path),
        "taskmanager.numberOfTaskSlots": 2,
        "heartbeat.interval": "10 s",
        "heartbeat.timeout": "60 s",
        "security.cluster.secret": SECRET,
    }
    tm = TaskExecutor(Configuration(config), jobmanager_address=jobmanager.address)
    made: list[FakeTask] = []

    def create_task(task_descriptor: Any) -> FakeTask:
        made.append(FakeTask(task_descriptor, report=tm.task_table.report_from_task_thread))
        return made[-1]

    tm.create_task = create_task  # type: ignore[method-assign]
    await tm.start()
    return tm, made


async def test_a_new_leader_deploys_into_no_slot_a_task_of_the_old_one_still_holds(
    tmp_path: Path, endpoints: list[RpcEndpoint]
) -> None:
    jobmanager = ScriptedJobManager("jm-1", "jm-2")
    await jobmanager.start()
    endpoints.append(jobmanager)
    tm, made = await task_manager_of_fake_tasks(tmp_path, jobmanager)
    endpoints.append(tm)
    await asyncio.wait_for(tm.registered.wait(), 5.0)

    # The old leader's task runs in slot 1 and ignores cancellation for now (a Spark job).
    old = descriptor("old", jobmanager_id="jm-1", allocation_id="old-alloc", slot_index=1)
    assert (await jobmanager.rpc.ask(tm.address, SubmitTask(descriptor=old), 2.0)).success

    # A new leader: the TaskManager registers there; its old task is cancelled, not yet gone.
    tm.registered.clear()
    tm.run_in_mailbox(tm.connection.start_registration)
    await until(lambda: tm.jobmanager_id == "jm-2", "the TaskManager did not register with the new leader")
    await until(lambda: made[0].cancelled, "the old leader's task was not cancelled")
    registration = jobmanager.registrations[-1]

    rm = resource_manager()
    rm.register_task_manager(registration)
    job = FakeJobMaster()
    # Slot 0 is free; slot 1 is held by the old task: the second request waits.
    assert rm.request_slot(job, "a", []) == PhysicalSlot(tm.resource_id, 0, tm.host, "a")  # type: ignore[arg-type]
    assert rm.request_slot(job, "b", []) is None, "the new leader takes a slot the old task holds for free"  # type: ignore[arg-type]
    assert registration.occupied_slots == [1]

    async def heartbeat() -> HeartbeatResponse:
        answer = await jobmanager.rpc.ask(tm.address, Heartbeat(jobmanager_id="jm-2"), 2.0)
        assert isinstance(answer, HeartbeatResponse)
        rm._receive_heartbeat(answer, time.monotonic())
        return answer

    assert (await heartbeat()).occupied_slots == [1]
    assert job.allocated == [] and rm.slot_pool.free_slots == 0

    # The old task ends at last: the next heartbeat frees its slot, and the waiting request gets it.
    await asyncio.to_thread(made[0].report, ExecutionState.CANCELED)
    await until(lambda: "old" not in tm.tasks, "the old task did not leave the task table")
    assert (await heartbeat()).occupied_slots == []
    assert job.allocated == [("b", PhysicalSlot(tm.resource_id, 1, tm.host, "b"))]
    # ...and the TaskManager takes a deployment there now.
    new = descriptor("new", jobmanager_id="jm-2", allocation_id="b", slot_index=1)
    answer = await jobmanager.rpc.ask(tm.address, SubmitTask(descriptor=new), 2.0)
    assert answer == TaskOperationResult(execution_id="new", success=True)
    assert jobmanager.registrations[0].occupied_slots == []  # nothing ran at the first one


def test_a_registration_of_an_older_peer_has_every_slot_free() -> None:
    """The field is additive: a TaskManager that does not send it (an older version)
    decodes to no occupied slots, and the default is left off the wire."""
    message = RegisterTaskManager(task_manager_id="tm", address="tcp://127.0.0.1:1", host="h", slots=2, secret=SECRET)
    encoded = msgspec.msgpack.encode(message)
    assert b"occupied_slots" not in encoded
    assert b"occupied_slots" not in msgspec.msgpack.encode(HeartbeatResponse(task_manager_id="tm"))
    rm = resource_manager()
    answer = rm.register_task_manager(msgspec.msgpack.decode(encoded, type=RegisterTaskManager))
    assert isinstance(answer, AcknowledgeRegistration)
    assert (rm.slot_pool.free_slots, rm.slot_pool.occupied_slots) == (2, 0)


def test_a_heartbeat_of_an_unknown_task_manager_changes_no_slot() -> None:
    rm = resource_manager()
    rm._receive_heartbeat(HeartbeatResponse(task_manager_id="ghost", occupied_slots=[0]), time.monotonic())
    assert rm.slot_pool.total_slots == 0
