"""A job keeps the slots its subtasks finished with (Flink's JobMaster slot pool and
slot.idle.timeout): the pure bookkeeping, the job's allocator against a real SlotPool, and
a continuous JobMaster between its rounds (jobmaster_fakes.py's in-memory JobManager)."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace
from typing import Any

import pytest

from flink_runtime.executiongraph import ExecutionState, JobStatus
from flink_runtime.scheduler.execution_slots import ExecutionSlotAllocator
from flink_runtime.scheduler.idle_slots import IdleSlots
from flink_runtime.scheduler.resource_profile import ResourceProfile
from flink_runtime.scheduler.slotpool import SlotPool

from .jobmaster_fakes import FakePlanner, current, finish_deployed, job_graph, run_to, start_job

E = ExecutionState
UNKNOWN = ResourceProfile.UNKNOWN


def test_idle_slots_serve_their_own_profile_oldest_first_and_expire_after_the_timeout() -> None:
    idle = IdleSlots()
    big = ResourceProfile(cpu_cores=2.0)
    idle.keep("a", UNKNOWN, now=10.0)
    idle.keep("b", UNKNOWN, now=11.0)
    idle.keep("c", big, now=12.0)
    assert len(idle) == 3 and "c" in idle
    assert idle.take(ResourceProfile(cpu_cores=1.0)) is None  # a dynamic slot is its request's size
    assert idle.take(UNKNOWN) == "a"
    assert idle.expired(now=60.9, timeout=50.0) == []
    assert idle.expired(now=61.0, timeout=50.0) == ["b"]
    assert idle.drop("c") and not idle.drop("c")
    assert len(idle) == 0 and idle.take(big) is None


def _vertex(subtask: int) -> Any:
    job_vertex = SimpleNamespace(slot_sharing_group="default", co_location_group=None, id="v")
    return SimpleNamespace(job_vertex=SimpleNamespace(job_vertex=job_vertex), subtask_index=subtask)


def _allocator(pool: SlotPool, clock: list[float], timeout: float = 50.0) -> tuple[ExecutionSlotAllocator, list[str]]:
    asked: list[str] = []

    def request(request_id: str, profile: ResourceProfile) -> Any:
        asked.append(request_id)
        return pool.request_slot(request_id, clock[0], profile=profile)

    def release(allocation_id: str) -> None:
        # As the ResourceManager: a queued request the freed slot serves is the job's.
        for request_id, slot in pool.release_slot(allocation_id):
            if not request_id.startswith("other"):
                allocator.slot_allocated(request_id, slot)

    allocator = ExecutionSlotAllocator(
        "job",
        request,
        release,
        pool.cancel_request,
        idle_timeout=timeout,
        requests_waiting=lambda: pool.pending_requests > 0,
        clock=lambda: clock[0],
    )
    return allocator, asked


def test_a_finished_subtasks_slot_stays_with_the_job_until_the_idle_timeout() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm", "h", 2)
    clock = [100.0]
    allocator, asked = _allocator(pool, clock)
    first = [allocator.allocate(_vertex(i), f"e{i}") for i in range(2)]
    assert None not in first and pool.free_slots == 0 and len(asked) == 2
    for i in range(2):
        allocator.release(_vertex(i), f"e{i}", finished=True)
    # Idle, still the job's: the pool counts them allocated, and the next attempts take
    # them back without a request.
    assert pool.free_slots == 0 and allocator.idle_slots == 2 and allocator.held_slots == 2
    again = [allocator.allocate(_vertex(i), f"r{i}") for i in range(2)]
    assert sorted(again) == sorted(first) and len(asked) == 2  # type: ignore[type-var]
    for i in range(2):
        allocator.release(_vertex(i), f"r{i}", finished=True)
    clock[0] = 140.0
    assert allocator.release_idle(140.0) == 0  # idle since 100 s: 40 s < slot.idle.timeout
    assert allocator.release_idle(150.0) == 2 and pool.free_slots == 2 and allocator.held_slots == 0
    # Given back: the next attempt asks the pool again.
    assert allocator.allocate(_vertex(0), "n0") is not None and len(asked) == 3


def test_a_slot_goes_back_at_once_when_a_request_waits_or_its_task_did_not_finish() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm", "h", 2)
    clock = [0.0]
    allocator, asked = _allocator(pool, clock)
    assert allocator.allocate(_vertex(0), "e0") is not None
    assert allocator.allocate(_vertex(1), "e1") is not None
    assert allocator.allocate(_vertex(2), "e2") is None and pool.pending_requests == 1  # more subtasks than slots
    # The queued subtask gets the finished one's slot through the pool, as before.
    allocator.release(_vertex(0), "e0", finished=True)
    assert pool.pending_requests == 0 and allocator.idle_slots == 0
    # A failed task may still run in its slot until its TaskManager ends it: not kept for
    # the retry (the pool's next allocation id makes the TaskManager refuse a task beside it).
    allocator.release(_vertex(1), "e1", finished=False)
    assert allocator.idle_slots == 0 and pool.free_slots == 1
    # Another job's request waits in the pool: the slot goes to it, not into idleness.
    assert pool.request_slot("other-job", 0.0) is not None
    assert pool.request_slot("other-job-2", 0.0) is None
    allocator.release(_vertex(2), "e2", finished=True)
    assert allocator.idle_slots == 0 and pool.pending_requests == 0


def test_a_job_that_ends_gives_back_its_idle_slots_and_a_lost_one_is_forgotten() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm-a", "h", 1)
    pool.add_task_manager("tm-b", "h", 1)
    clock = [0.0]
    allocator, asked = _allocator(pool, clock)
    allocations = [allocator.allocate(_vertex(i), f"e{i}") for i in range(2)]
    for i in range(2):
        allocator.release(_vertex(i), f"e{i}", finished=True)
    lost = next(a for a in allocations if pool.slot_of(a).task_manager_id == "tm-a")  # type: ignore[arg-type, union-attr]
    assert pool.remove_task_manager("tm-a") == [lost]
    assert allocator.allocation_lost(lost) == [] and allocator.idle_slots == 1
    allocator.release_all([_vertex(0), _vertex(1)])
    assert allocator.held_slots == 0 and pool.free_slots == 1


def test_a_continuous_job_deploys_its_next_round_into_the_slots_it_kept(caplog: pytest.LogCaptureFixture) -> None:
    """Between rounds the job holds its slots (RUNNING, as a Flink streaming job); the next
    round is deployed into them with no slot request; past slot.idle.timeout they go back,
    and the round after asks for slots again."""
    planner = FakePlanner(splits=2, monitor_interval=1.0, new_input=[1, 1])
    job, gateway = start_job(job_graph(("source", 2)), planner=planner)
    kept = {submit.descriptor.allocation_id for submit in gateway.submitted}
    assert len(kept) == 2 and len(gateway.requested) == 2
    finish_deployed(job)
    gateway.settle()  # the round's output published: the job waits for new input
    assert job.status is JobStatus.RUNNING and job.rounds.idle
    assert set(gateway.allocated) == kept and job.deployer.slots.held_slots == 2

    gateway.advance(1.0)  # the scan finds a file: round 2
    assert job.rounds.round == 1 and not job.rounds.idle
    round_two = gateway.submitted[2:]
    assert len(round_two) == 2 and {s.descriptor.allocation_id for s in round_two} == kept
    assert len(gateway.requested) == 2, "round 2 asked for new slots"

    caplog.set_level(logging.INFO, "flink_runtime.jobmanager.rounds")
    finish_deployed(job)
    gateway.settle()
    assert job.rounds.idle and set(gateway.allocated) == kept
    assert (
        f"Job {job.job_id}: round 1 published: 0 new slot request(s), 2 subtask(s) deployed into slots the job "
        "kept; waiting for new input with 2 slot(s) held." in caplog.messages
    )
    job.release_idle_slots(time.monotonic() + 45.0)  # the ResourceManager's timer
    assert set(gateway.allocated) == kept
    job.release_idle_slots(time.monotonic() + 51.0)  # past slot.idle.timeout (50 s)
    assert not gateway.allocated and job.deployer.slots.held_slots == 0

    gateway.advance(1.0)  # round 3 asks for slots again
    assert job.rounds.round == 2 and len(gateway.requested) == 4
    job.cancel()
    assert job.status is JobStatus.CANCELED and not gateway.allocated


def test_a_job_stopped_between_rounds_gives_its_kept_slots_back(tmp_path: Any) -> None:
    planner = FakePlanner(splits=1, monitor_interval=5.0)
    job, gateway = start_job(job_graph(("source", 1)), {"state.checkpoints.dir": str(tmp_path / "cp")}, planner=planner)
    finish_deployed(job)
    gateway.settle()
    assert job.rounds.idle and len(gateway.allocated) == 1
    job.stop_with_savepoint(str(tmp_path / "sp"), drain=False)
    gateway.settle()
    assert job.status is JobStatus.FINISHED and not gateway.allocated


def test_a_failed_attempts_slot_is_not_kept_for_its_retry() -> None:
    job, gateway = start_job(
        job_graph(("source", 1)),
        {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "1 s"},
    )
    failed = current(job, "source")
    run_to(job, failed, E.FAILED, "boom")
    assert not gateway.allocated  # given back at once
    gateway.advance(1.0)
    retry = gateway.submitted[-1].descriptor
    assert retry.execution_id == current(job, "source").attempt_id
    assert retry.allocation_id != failed.assigned_resource and len(gateway.requested) == 2


class _Job:
    """A job as the ResourceManager calls it (JobMaster's slot events and idle release),
    its slots kept by a real ExecutionSlotAllocator."""

    def __init__(self, rm: Any, job_id: str, clock: Any) -> None:
        self.job_id = job_id
        self.status = JobStatus.RUNNING
        self.deployed: dict[str, str] = {}
        self.slots = ExecutionSlotAllocator(
            job_id,
            lambda request_id, profile: rm.request_slot(self, request_id, [], profile),
            rm.release_slot,
            rm.cancel_slot_request,
            idle_timeout=50.0,
            requests_waiting=lambda: rm.slot_pool.pending_requests > 0,
            clock=clock,
        )

    def run(self, subtask: int, execution_id: str) -> None:
        allocation_id = self.slots.allocate(_vertex(subtask), execution_id)
        if allocation_id is not None:
            self.deployed[execution_id] = allocation_id

    def on_slot_allocated(self, request_id: str, slot: Any) -> None:
        for execution_id in self.slots.slot_allocated(request_id, slot) or []:
            self.deployed[execution_id] = slot.allocation_id

    def release_idle_slots(self, now: float, everything: bool = False) -> None:
        self.slots.release_idle(now, everything)

    def executions_on(self, task_manager_id: str) -> dict[str, ExecutionState]:
        return {}


def test_the_resource_manager_gives_a_jobs_idle_slots_to_another_jobs_request_and_expires_them() -> None:
    from flink_runtime.rpc.messages import RegisterTaskManager

    from .jobmaster_fakes import resource_manager_on_a_fake_host

    timers: list[Any] = []
    rm, host = resource_manager_on_a_fake_host(lambda delay, function, *args: timers.append((function, args)))
    rm.register_task_manager(
        RegisterTaskManager(task_manager_id="tm", address="tcp://127.0.0.1:1", host="h", slots=2, secret="secret")
    )
    idle_since = [time.monotonic()]
    streaming, batch = _Job(rm, "streaming", lambda: idle_since[0]), _Job(rm, "batch", time.monotonic)
    host.jobs = {"streaming": streaming, "batch": batch}
    streaming.run(0, "s0")
    streaming.run(1, "s1")
    for subtask in (0, 1):
        streaming.slots.release(_vertex(subtask), f"s{subtask}", finished=True)
    # Between its rounds: its slots are used, by it, in the pool and on the TaskManager.
    assert rm.slot_pool.free_slots == 0
    assert [job for _slot, job in rm.allocated_slots_of("tm")] == ["streaming", "streaming"]
    rm.check_timeouts()  # idle for less than slot.idle.timeout: kept
    assert streaming.slots.idle_slots == 2

    # Another job asks: its request waits, and from the mailbox the idle slots go to it.
    batch.run(0, "b0")
    assert "b0" not in batch.deployed and len(timers) == 1
    function, args = timers.pop()
    function(*args)
    assert "b0" in batch.deployed and streaming.slots.idle_slots == 0
    assert sorted(job for _slot, job in rm.allocated_slots_of("tm")) == ["batch"]

    # Kept again, idle since 51 s ago (its clock): past slot.idle.timeout the
    # ResourceManager's timer gives it back.
    idle_since[0] = time.monotonic() - 51.0
    streaming.run(0, "s2")
    streaming.slots.release(_vertex(0), "s2", finished=True)
    assert streaming.slots.idle_slots == 1 and rm.slot_pool.free_slots == 0
    rm.check_timeouts()
    assert streaming.slots.idle_slots == 0 and rm.slot_pool.free_slots == 1
