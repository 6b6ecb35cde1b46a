"""The active resource manager's decisions (resourcemanager/policy.py), pure: stimuli with
the time passed in, actions out."""

from __future__ import annotations

import pytest

from flink_runtime.configuration import Configuration, ConfigurationError, ResourceManagerOptions
from flink_runtime.resourcemanager.active import bounds_of
from flink_runtime.resourcemanager.policy import (
    Bounds,
    ClusterView,
    FailJob,
    ResourceAllocationPolicy,
    SlotProfile,
    StartWorker,
    StopWorker,
    WorkerSpec,
)

UNKNOWN = SlotProfile()


def waiting(count: int, profile: SlotProfile = UNKNOWN, **view: object) -> ClusterView:
    return ClusterView(pending=(profile,) * count, **view)  # type: ignore[arg-type]


def starts(actions: list[object]) -> list[StartWorker]:
    return [a for a in actions if isinstance(a, StartWorker)]


def test_waiting_requests_start_workers_sized_by_slots_per_worker() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=2)
    actions = policy.decide(0.0, waiting(3, job_slots={"j": 3}))
    assert actions == [
        StartWorker("tm-active-1", WorkerSpec(slots=2, cpu_cores=2.0)),
        StartWorker("tm-active-2", WorkerSpec(slots=2, cpu_cores=2.0)),
    ]
    # Still waiting, but the starting workers' slots cover them: nothing more is started.
    assert policy.decide(1.0, waiting(3, job_slots={"j": 3})) == []


def test_free_slots_and_no_waiting_requests_start_nothing() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=1)
    assert policy.decide(0.0, waiting(2, free_slots=2, job_slots={"j": 2})) == []
    assert policy.decide(0.0, ClusterView()) == []


def test_the_biggest_waiting_profile_sizes_the_worker() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=2)
    view = ClusterView(pending=(SlotProfile(0.5, 100), SlotProfile(1.5, 300)), job_slots={"j": 2})
    assert starts(policy.decide(0.0, view)) == [StartWorker("tm-active-1", WorkerSpec(2, 3.0, 600))]


def test_an_idle_worker_stops_after_the_timeout_and_a_busy_one_does_not() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=1, idle_timeout=30.0)
    policy.decide(0.0, waiting(2, job_slots={"j": 2}))
    both = frozenset({"tm-active-1", "tm-active-2"})
    assert policy.decide(5.0, ClusterView(registered=both, busy=both)) == []
    # The job ended at t=10: both idle from the first look after it.
    assert policy.decide(10.0, ClusterView(registered=both, busy=frozenset({"tm-active-2"}))) == []
    assert policy.decide(39.9, ClusterView(registered=both, busy=frozenset({"tm-active-2"}))) == []
    actions = policy.decide(40.0, ClusterView(registered=both, busy=frozenset({"tm-active-2"})))
    assert len(actions) == 1 and isinstance(actions[0], StopWorker)
    assert actions[0].worker_id == "tm-active-1" and actions[0].registered
    assert "idle for 30.0 s (resourcemanager.taskmanager-timeout is 30 s)" in actions[0].reason
    # Asked to stop once; its end is no failure.
    assert policy.decide(50.0, ClusterView(registered=both, busy=frozenset({"tm-active-2"}))) == []
    assert policy.worker_terminated("tm-active-1", 51.0) is False
    assert policy.stopped_total == 1 and policy.failed_total == 0


def test_a_worker_that_becomes_busy_again_restarts_its_idle_clock() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=1, idle_timeout=10.0)
    policy.decide(0.0, waiting(1, job_slots={"j": 1}))
    one = frozenset({"tm-active-1"})
    policy.decide(1.0, ClusterView(registered=one))  # idle from 1
    policy.decide(9.0, ClusterView(registered=one, busy=one))  # busy again
    assert policy.decide(12.0, ClusterView(registered=one)) == []  # idle from 12
    assert isinstance(policy.decide(22.0, ClusterView(registered=one))[0], StopWorker)


def test_slots_declared_by_a_job_being_prepared_start_workers_and_keep_idle_ones() -> None:
    """A job declares its slots while it is prepared (its requests come after): they start
    workers as waiting requests do, and keep registered idle workers past the idle
    timeout until the declaration is withdrawn."""
    policy = ResourceAllocationPolicy(slots_per_worker=1, idle_timeout=2.0)
    declared = ClusterView(declared={"j": (UNKNOWN, UNKNOWN)})
    assert [start.worker_id for start in starts(policy.decide(0.0, declared))] == ["tm-active-1", "tm-active-2"]
    both = frozenset({"tm-active-1", "tm-active-2"})
    assert policy.decide(1.0, ClusterView(registered=both, free_slots=2, declared={"j": (UNKNOWN, UNKNOWN)})) == []
    # Idle for 9 s, past the timeout: kept, the job's requests will take them.
    assert policy.decide(10.0, ClusterView(registered=both, free_slots=2, declared={"j": (UNKNOWN, UNKNOWN)})) == []
    # One slot declared keeps one worker; withdrawn, the other goes too.
    one_declared = ClusterView(registered=both, free_slots=2, declared={"j": (UNKNOWN,)})
    assert [a.worker_id for a in policy.decide(11.0, one_declared)] == ["tm-active-2"]
    assert [a.worker_id for a in policy.decide(12.0, ClusterView(registered=both, free_slots=2))] == ["tm-active-1"]


def test_declared_slots_past_the_bounds_start_nothing() -> None:
    """The job fails with the numbers once its requests come; nothing starts before."""
    policy = ResourceAllocationPolicy(slots_per_worker=1, bounds=Bounds(max_workers=2))
    assert policy.decide(0.0, ClusterView(declared={"big": (UNKNOWN,) * 3})) == []
    assert len(starts(policy.decide(1.0, ClusterView(declared={"big": (UNKNOWN,) * 3, "small": (UNKNOWN,)})))) == 1


def test_a_worker_that_died_is_a_failure_and_its_job_s_requests_start_a_replacement() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=1)
    policy.decide(0.0, waiting(1, job_slots={"j": 1}))
    one = frozenset({"tm-active-1"})
    policy.decide(1.0, ClusterView(registered=one, busy=one, job_slots={"j": 1}))
    assert policy.worker_terminated("tm-active-1", 2.0) is True
    assert policy.failed_total == 1
    # The restarted task asks for a slot again.
    assert starts(policy.decide(2.5, waiting(1, job_slots={"j": 1}))) == [
        StartWorker("tm-active-2", WorkerSpec(1, 1.0))
    ]


def test_a_worker_that_never_registers_is_stopped_and_counted_failed() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=1, registration_timeout=60.0)
    policy.decide(0.0, waiting(1, job_slots={"j": 1}))
    assert policy.decide(59.0, waiting(1, job_slots={"j": 1})) == []
    actions = policy.decide(60.0, waiting(1, job_slots={"j": 1}))
    assert actions[0] == StopWorker(
        "tm-active-1",
        "not registered within 60 s (resourcemanager.taskmanager-registration.timeout)",
        registered=False,
    )
    # Its slots no longer count as coming: a new worker is started in the same decision.
    assert starts(actions) == [StartWorker("tm-active-2", WorkerSpec(1, 1.0))]
    assert policy.failed_total == 1


def test_starts_pause_once_the_failure_rate_is_exceeded() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=1, max_failure_rate=2, retry_interval=5.0)
    for now, worker in ((0.0, "tm-active-1"), (1.0, "tm-active-2")):
        assert starts(policy.decide(now, waiting(1, job_slots={"j": 1})))
        policy.worker_terminated(worker, now + 0.5)
    # Two failures within a minute: nothing is started until 5 s after the last one (1.5).
    assert policy.decide(2.0, waiting(1, job_slots={"j": 1})) == []
    assert policy.decide(6.4, waiting(1, job_slots={"j": 1})) == []
    assert starts(policy.decide(6.5, waiting(1, job_slots={"j": 1}))) == [
        StartWorker("tm-active-3", WorkerSpec(1, 1.0))
    ]


def test_max_workers_caps_the_starts() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=1, bounds=Bounds(max_workers=2))
    # Two jobs of 2 slots each: each fits alone, so neither fails; two workers are started.
    actions = policy.decide(0.0, waiting(4, job_slots={"a": 2, "b": 2}))
    assert [a.worker_id for a in starts(actions)] == ["tm-active-1", "tm-active-2"]
    assert not [a for a in actions if isinstance(a, FailJob)]


def test_a_job_needing_more_than_the_bounds_allow_fails_with_the_numbers() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=1, bounds=Bounds(max_workers=2))
    actions = policy.decide(0.0, waiting(3, job_slots={"big": 3}))
    assert actions == [
        FailJob(
            "big",
            "NoResourceAvailableException: job big needs 3 slots at once, but the resource manager may provide at "
            "most 2 (resourcemanager.max-taskmanagers 2 x taskmanager.numberOfTaskSlots 1); raise the bound or "
            "lower the job's parallelism",
        )
    ]


def test_every_bound_is_worded_with_its_numbers() -> None:
    policy = ResourceAllocationPolicy(
        slots_per_worker=2, bounds=Bounds(max_slots=6, max_cpu_cores=3.0, max_memory_mb=1000)
    )
    reason = next(
        a.reason
        for a in policy.decide(0.0, waiting(4, SlotProfile(1.0, 200), external_slots=1, job_slots={"j": 4}))
        if isinstance(a, FailJob)
    )
    # 3 cores / 2 cores per TaskManager: 1 TaskManager of 2 slots, plus 1 slot of another TaskManager.
    assert "needs 4 slots at once" in reason and "at most 3" in reason
    assert "slotmanager.max-total-resource.cpu 3 / 2 cores per TaskManager = 1 TaskManagers of 2 slots" in reason


def test_the_cpu_bound_caps_starts_of_bigger_workers() -> None:
    policy = ResourceAllocationPolicy(slots_per_worker=1, bounds=Bounds(max_cpu_cores=4.0))
    actions = policy.decide(0.0, waiting(3, SlotProfile(cpu_cores=1.5), job_slots={"a": 1, "b": 1, "c": 1}))
    assert [a.spec.cpu_cores for a in starts(actions)] == [1.5, 1.5]


def test_bounds_are_read_from_flink_s_keys() -> None:
    config = Configuration(
        {
            "resourcemanager.max-taskmanagers": "4",
            "slotmanager.number-of-slots.max": "8",
            "slotmanager.max-total-resource.cpu": "6.5",
            "slotmanager.max-total-resource.memory": "2g",
        }
    )
    assert bounds_of(config) == Bounds(max_workers=4, max_slots=8, max_cpu_cores=6.5, max_memory_mb=2048)
    assert bounds_of(Configuration()) == Bounds()
    with pytest.raises(ConfigurationError, match="resourcemanager.driver: unknown resource manager driver 'yarn'"):
        Configuration({"resourcemanager.driver": "yarn"}).get(ResourceManagerOptions.DRIVER)
