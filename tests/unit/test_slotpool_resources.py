"""Fine-grained resources in the SlotPool: profile matching, dynamic slots carved from a
TaskManager's free resources, no over-commit, and requests that can never fit."""

from __future__ import annotations

import random

import psutil
import pytest

from flink_runtime.scheduler.resource_profile import ResourceProfile
from flink_runtime.scheduler.slotpool import SlotPool, UnfulfillableSlotRequest

P = ResourceProfile.of
UNKNOWN = ResourceProfile.UNKNOWN


def test_profile_arithmetic_and_matching() -> None:
    assert P(0, 0) is UNKNOWN
    assert P(1, 256) + P(0.5, 256) == P(1.5, 512)
    assert P(2, 1024) - P(0.5, 256) == P(1.5, 768)
    assert (P(1, 100) + UNKNOWN).is_unknown  # one unspecified vertex: the group is unspecified
    assert P(2, 1024).fits(P(2, 1024).divide(3).multiply(3))  # three default slots fill, not overflow
    assert P(2, 1024).fits(P(2, 1024))
    assert not P(2, 1024).fits(P(2.5, 10))
    assert not P(2, 1024).fits(P(1, 2048))
    assert P(1, 1).fits(UNKNOWN)
    assert ResourceProfile.ANY.fits(P(1000, 10**9))
    assert P(2, 0).count_fitting(P(0.5, 0)) == 4
    with pytest.raises(ValueError, match="cannot subtract"):
        P(1, 10) - P(2, 0)
    with pytest.raises(ValueError, match="cpu_cores must be >= 0"):
        ResourceProfile(-1.0)


def test_unknown_requests_take_default_slots_exactly_as_by_count() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm1", "h", 3, total_resource=P(2, 1024))
    slots = [pool.request_slot(f"r{i}", 0.0) for i in range(4)]
    assert [s.slot_index for s in slots[:3] if s] == [0, 1, 2]
    assert slots[3] is None and pool.pending_profiles() == [UNKNOWN]
    assert slots[0] is not None and slots[0].resource_profile == P(2, 1024).divide(3)
    assert pool.free_resource_of("tm1").cpu_cores == pytest.approx(0)
    assert pool.release_slot("r1") == [("r3", pool.slot_of("r3"))]


def test_specified_profiles_are_carved_and_never_over_commit() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm1", "h", 2, total_resource=P(2, 2048))
    a = pool.request_slot("a", 0.0, profile=P(1.5, 512))
    assert a is not None and a.slot_index == 2 and a.resource_profile == P(1.5, 512)  # dynamic index from N
    assert pool.free_resource_of("tm1") == P(0.5, 1536)
    # A default slot (1 core) no longer fits: 0.5 core left.
    assert pool.free_slots_of("tm1") == 0
    assert pool.request_slot("b", 0.0, profile=P(1, 100)) is None
    assert pool.request_slot("c", 0.0, profile=P(0.5, 100)) is None  # FIFO: behind "b"
    assert pool.pending_profiles() == [P(1, 100), P(0.5, 100)]
    fulfilled = pool.release_slot("a")
    assert [(rid, slot.slot_index, slot.resource_profile) for rid, slot in fulfilled] == [
        ("b", 2, P(1, 100)),
        ("c", 3, P(0.5, 100)),
    ]
    assert pool.free_resource_of("tm1") == P(0.5, 1848)
    # Two cores, requests of one core each: two at a time, never three.
    pool2 = SlotPool()
    pool2.add_task_manager("tm", "h", 4, total_resource=P(2, 4096))
    got = [pool2.request_slot(f"x{i}", 0.0, profile=P(1, 0)) for i in range(4)]
    assert sum(slot is not None for slot in got) == 2


def test_fixed_slots_match_by_profile() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm1", "h", 0, slot_profiles=[P(0.5, 256), P(2, 1024)])
    assert pool.total_resource_of("tm1") == P(2.5, 1280)
    big = pool.request_slot("big", 0.0, profile=P(1, 512))
    assert big is not None and big.slot_index == 1 and big.resource_profile == P(2, 1024)
    small = pool.request_slot("small", 0.0, profile=P(0.25, 100))
    assert small is not None and small.slot_index == 0
    with pytest.raises(UnfulfillableSlotRequest, match="needs 3 cores"):
        pool.request_slot("huge", 0.0, profile=P(3, 0))


def test_a_request_no_taskmanager_could_ever_hold_fails_at_once_with_the_numbers() -> None:
    pool = SlotPool()
    # No TaskManager yet: one may still come, so the request waits.
    assert pool.request_slot("early", 0.0, profile=P(4, 0)) is None
    pool.cancel_request("early")
    pool.add_task_manager("small", "h", 2, total_resource=P(1, 1024))
    pool.add_task_manager("large", "h", 2, total_resource=P(2, 2048))
    with pytest.raises(UnfulfillableSlotRequest) as raised:
        pool.request_slot("r", 0.0, profile=P(4, 512))
    message = str(raised.value)
    assert "NoResourceAvailableException" in message
    assert "needs 4 cores, 512 MB task heap" in message
    assert "the largest, large, offers 2 cores, 2048 MB task heap" in message
    assert not pool.is_pending("r")
    # Heap too, not only cores.
    with pytest.raises(UnfulfillableSlotRequest, match="4096 MB task heap"):
        pool.request_slot("r2", 0.0, profile=P(1, 4096))
    # An active resource manager would start a TaskManager for it instead.
    lenient = SlotPool(fail_unfulfillable=False)
    lenient.add_task_manager("small", "h", 2, total_resource=P(1, 1024))
    assert lenient.request_slot("r", 0.0, profile=P(4, 512)) is None
    assert lenient.pending_profiles() == [P(4, 512)]


def test_queued_request_fails_when_the_only_taskmanager_that_could_hold_it_leaves() -> None:
    pool = SlotPool()
    pool.add_task_manager("small", "h", 1, total_resource=P(1, 1024))
    pool.add_task_manager("large", "h", 1, total_resource=P(4, 1024))
    assert pool.request_slot("hold", 0.0, profile=P(4, 0)) is not None
    assert pool.request_slot("wait", 0.0, profile=P(3, 0)) is None
    assert pool.request_slot("small-one", 0.0) is None  # FIFO behind "wait"
    assert pool.take_unfulfillable() == []
    assert pool.remove_task_manager("large") == ["hold"]
    dropped = pool.take_unfulfillable()
    assert [rid for rid, _ in dropped] == ["wait"] and "needs 3 cores" in dropped[0][1]
    assert [rid for rid, _ in pool.serve_pending()] == ["small-one"]


def test_taskmanager_without_reported_resources_counts_slots_only() -> None:
    pool = SlotPool()
    pool.add_task_manager("old", "h", 2)  # an older TaskManager: ANY
    assert pool.request_slot("a", 0.0, profile=P(64, 10**6)) is not None
    assert pool.request_slot("b", 0.0, profile=P(64, 10**6)) is not None
    assert pool.request_slot("c", 0.0) is None


def test_random_mixed_requests_never_over_commit() -> None:
    rng = random.Random(7)
    pool = SlotPool()
    totals = {"tm1": P(2, 2048), "tm2": P(4, 1024), "tm3": P(1, 4096)}
    for tm_id, total in totals.items():
        pool.add_task_manager(tm_id, "h", rng.randint(1, 4), total_resource=total)
    held: dict[str, ResourceProfile] = {}
    profiles = [UNKNOWN, P(0.5, 128), P(1, 512), P(0.25, 1024), P(1.5, 0)]
    for step in range(2000):
        if held and rng.random() < 0.45:
            rid = rng.choice(sorted(held))
            del held[rid]
            fulfilled = pool.release_slot(rid)
        else:
            rid = f"r{step}"
            slot = pool.request_slot(rid, 0.0, profile=rng.choice(profiles))
            fulfilled = [(rid, slot)] if slot is not None else []
        for request_id, slot in fulfilled:
            held[request_id] = slot.resource_profile
        for tm_id, total in totals.items():
            used = [s.resource_profile for s in pool.slots_of(tm_id) if s.allocation_id is not None]
            cpu = sum(p.cpu_cores for p in used)
            heap = sum(p.task_heap_memory_mb for p in used)
            assert cpu <= total.cpu_cores + 1e-6 and heap <= total.task_heap_memory_mb + 1e-6, (step, tm_id)


def test_slot_requests_carry_the_sum_of_their_groups_vertices_or_the_groups_own_spec() -> None:
    from flink_runtime.jobgraph import JobGraph, JobVertex
    from flink_runtime.jobgraph import ResourceProfile as Spec
    from flink_runtime.scheduler.slot_sharing import slot_profiles

    graph = JobGraph(
        name="g",
        vertices=[
            JobVertex(
                id="a", name="a", invokable="noop", parallelism=2, resources=Spec(cpu_cores=1, task_heap_memory_mb=100)
            ),
            JobVertex(id="b", name="b", invokable="noop", parallelism=1, resources=Spec(cpu_cores=0.5)),
            JobVertex(id="c", name="c", invokable="noop", slot_sharing_group="mixed", resources=Spec(cpu_cores=1)),
            JobVertex(id="d", name="d", invokable="noop", slot_sharing_group="mixed"),
            JobVertex(id="e", name="e", invokable="noop", slot_sharing_group="sized"),
            JobVertex(id="f", name="f", invokable="noop", slot_sharing_group=None, resources=Spec(cpu_cores=3)),
        ],
        slot_sharing_groups={"sized": Spec(cpu_cores=2, task_heap_memory_mb=512)},
    )
    profiles = slot_profiles(graph)
    # Subtask 0 of "default" holds a[0] and b[0]; subtask 1 only a[1].
    assert profiles.profile(("group:default", 0)) == P(1.5, 100)
    assert profiles.profile(("group:default", 1)) == P(1, 100)
    # One unspecified vertex makes the group unspecified, as in Flink.
    assert profiles.profile(("group:mixed", 0)) is UNKNOWN
    # A group's own spec wins over its vertices'.
    assert profiles.profile(("group:sized", 0)) == P(2, 512)
    assert profiles.profile(("vertex:f", 0)) == P(3, 0)


def test_the_allocator_asks_the_pool_with_the_profile_of_the_shared_slot() -> None:
    from types import SimpleNamespace

    from flink_runtime.scheduler.execution_slots import ExecutionSlotAllocator
    from flink_runtime.scheduler.slot_sharing import SlotProfiles

    pool = SlotPool()
    pool.add_task_manager("tm", "h", 4, total_resource=P(2, 1024))
    profiles = SlotProfiles([("v", "default", None, 4, P(1, 0))], {})
    asked: list[ResourceProfile] = []

    def request(request_id: str, profile: ResourceProfile):  # type: ignore[no-untyped-def]
        asked.append(profile)
        return pool.request_slot(request_id, 0.0, profile=profile)

    allocator = ExecutionSlotAllocator("job", request, pool.release_slot, pool.cancel_request, profiles)
    job_vertex = SimpleNamespace(slot_sharing_group="default", co_location_group=None, id="v")
    got = [
        allocator.allocate(SimpleNamespace(job_vertex=SimpleNamespace(job_vertex=job_vertex), subtask_index=i), f"e{i}")  # type: ignore[arg-type]
        for i in range(4)
    ]
    assert asked == [P(1, 0)] * 4
    # Two cores, one core each: two run, two wait.
    assert sum(a is not None for a in got) == 2 and pool.pending_requests == 2


def test_resources_of_a_slot_sharing_group_no_vertex_is_in_are_refused_naming_it() -> None:
    from flink_runtime.jobgraph import InvalidJobGraph, JobGraph

    with pytest.raises(InvalidJobGraph) as raised:
        JobGraph.from_dict(
            {
                "name": "g",
                "vertices": [{"id": "a", "name": "a", "invokable": "noop"}],
                "slot_sharing_groups": {"heavy": {"cpu_cores": 2}},
            }
        )
    assert "no vertex is in slot sharing group 'heavy' (groups: 'default')" in str(raised.value)


def test_pipeline_resources_on_operators_and_named_slot_sharing_groups() -> None:
    from flink_runtime.jobgraph import ResourceProfile as Spec
    from flink_runtime.pipeline import Pipeline

    p = Pipeline("etl", parallelism=2)
    heavy = p.slot_sharing_group("heavy").resources(cpu=2, heap="1g")
    p.slot_sharing_group("unused").resources(cpu=8)
    rows = p.read_parquet("in/").select("a", "k").resources(cpu=0.5, heap="256m").filter("a > 0").resources(cpu=0.25)
    counts = rows.key_by("k").agg("count(*) AS n").slot_sharing_group(heavy)
    counts.write_parquet("out/")
    graph = p.job_graph()
    by_id = {vertex.id: vertex for vertex in graph.vertices}
    source = next(v for v in graph.vertices if v.id.startswith("read"))
    aggregate = next(v for v in graph.vertices if v.id.startswith("aggregate"))
    # Chained select and filter add up; the sink chained after the aggregate inherits its group.
    assert source.resources == Spec(cpu_cores=0.75, task_heap_memory_mb=256)
    assert source.slot_sharing_group == "default"
    assert aggregate.slot_sharing_group == "heavy" and aggregate.resources == Spec()
    assert graph.slot_sharing_groups == {"heavy": Spec(cpu_cores=2, task_heap_memory_mb=1024)}
    assert len(by_id) == 2  # the sink chains into the aggregate's vertex (same group)
    # Without resources nothing changes in the JobGraph's JSON.
    plain = Pipeline("plain")
    plain.read_text("x").write_json("y")
    assert b"resources" not in plain.job_graph().to_json()
    assert b"slot_sharing_groups" not in plain.job_graph().to_json()


def test_pipeline_resource_arguments_are_checked_where_given() -> None:
    from flink_runtime.pipeline import Pipeline

    p = Pipeline("bad")
    source = p.read_text("x")
    with pytest.raises(ValueError, match="cpu must be a positive number of cores"):
        source.resources(cpu=-1)
    with pytest.raises(ValueError, match="needs at least one of cpu=, heap=, managed="):
        source.resources()
    with pytest.raises(ValueError, match="heap must be a number of bytes or a size"):
        source.resources(heap="lots")
    with pytest.raises(ValueError, match="must be 1-128 letters"):
        p.slot_sharing_group("no spaces allowed")
    with pytest.raises(ValueError, match="belongs to another pipeline"):
        source.slot_sharing_group(Pipeline("other").slot_sharing_group("g"))


def test_the_taskmanagers_resources_size_its_spark_application_where_spark_can() -> None:
    from flink_runtime.configuration import Configuration
    from flink_runtime.taskmanager.resources import task_manager_total_resource
    from flink_runtime.taskmanager.spark_session import default_heap_mb, session_settings

    sized = Configuration({"taskmanager.cpu.cores": "1.5", "taskmanager.memory.task.heap.size": "768m"})
    settings, cores = session_settings(sized, slots=4)
    assert cores == 2 and settings["spark.driver.memory"] == "768m"  # local[2], a 768 MB driver heap
    standalone = Configuration(
        {"spark.master": "spark://h:7077", "taskmanager.cpu.cores": "3", "taskmanager.memory.task.heap.size": "2g"}
    )
    settings, cores = session_settings(standalone, slots=1)
    assert cores == 3 and settings["spark.executor.memory"] == "2048m" and "spark.driver.memory" not in settings
    # An explicit spark.* key wins; nothing configured: a local heap sized from the slots.
    explicit = Configuration({"taskmanager.memory.task.heap.size": "2g", "spark.driver.memory": "1g"})
    assert session_settings(explicit, slots=2)[0]["spark.driver.memory"] == "1g"
    settings, cores = session_settings(Configuration({}), slots=2)
    assert cores == 2 and settings["spark.driver.memory"] == "1024m" and "spark.executor.memory" not in settings
    assert session_settings(Configuration({}), slots=8)[0]["spark.driver.memory"] == f"{default_heap_mb(8)}m"
    assert default_heap_mb(8) == min(4096, max(1024, psutil.virtual_memory().total // 2**20 // 4))
    # What the TaskManager registers: Flink's defaults (cores = slots, heap = the Spark heap,
    # sized from the slots: 3 x 512 MB).
    assert task_manager_total_resource(Configuration({}), 3) == {
        "cpu_cores": 3.0,
        "task_heap_memory_mb": float(default_heap_mb(3)),
        "managed_memory_mb": 0.0,
    }
    assert task_manager_total_resource(sized, 4)["cpu_cores"] == 1.5


def test_the_resource_manager_registers_total_resources_and_reports_slots_per_job() -> None:
    from types import SimpleNamespace

    from flink_runtime.rpc.messages import RegisterTaskManager

    from .jobmaster_fakes import resource_manager_on_a_fake_host

    rm, _ = resource_manager_on_a_fake_host(lambda delay, function, *args: function(*args))
    answer = rm.register_task_manager(
        RegisterTaskManager(
            task_manager_id="tm",
            address="tcp://127.0.0.1:1",
            host="h",
            slots=2,
            secret="secret",
            total_resource={"cpu_cores": 2, "task_heap_memory_mb": 1024},
        )
    )
    assert type(answer).__name__ == "AcknowledgeRegistration"
    assert rm.slot_pool.total_resource_of("tm") == P(2, 1024)
    failed: list[tuple[str, str]] = []
    job = SimpleNamespace(
        job_id="job-1",
        on_slot_request_failed=lambda request_id, reason: failed.append((request_id, reason)),
    )
    slot = rm.request_slot(job, "r1", [], P(1.5, 256))  # type: ignore[arg-type]
    assert slot is not None and slot.resource_profile == P(1.5, 256)
    assert rm.allocated_slots_of("tm") == [(slot, "job-1")]
    assert rm.slot_pool.free_resource_of("tm") == P(0.5, 768)
    # A request no TaskManager could hold fails the job's request (from the mailbox), with the numbers.
    assert rm.request_slot(job, "r2", [], P(3, 0)) is None  # type: ignore[arg-type]
    assert failed and failed[0][0] == "r2" and "needs 3 cores" in failed[0][1]


def test_a_request_queued_before_any_taskmanager_fails_once_one_registers_too_small() -> None:
    pool = SlotPool()
    assert pool.request_slot("big", 0.0, profile=P(4, 0)) is None
    assert pool.request_slot("small", 0.0) is None
    pool.add_task_manager("tm", "h", 2, total_resource=P(2, 1024))
    dropped = pool.take_unfulfillable()
    assert [rid for rid, _ in dropped] == ["big"] and "offers 2 cores" in dropped[0][1]
    # The head that blocked the queue is gone: the small request gets its slot.
    assert [rid for rid, _ in pool.serve_pending()] == ["small"]


def test_coarse_grained_taskmanagers_have_fixed_default_slots() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm", "h", 4, total_resource=P(2, 1024), dynamic=False)
    # Each slot is 0.5 core, 256 MB: a half-core request takes one, a one-core one fits none.
    half = pool.request_slot("half", 0.0, profile=P(0.5, 100))
    assert half is not None and half.slot_index == 0 and half.resource_profile == P(0.5, 256)
    with pytest.raises(UnfulfillableSlotRequest, match="offers 0.5 cores, 256 MB task heap"):
        pool.request_slot("one", 0.0, profile=P(1, 0))
    assert [pool.request_slot(f"u{i}", 0.0) is not None for i in range(4)] == [True, True, True, False]


def test_free_resources_looked_up_on_reuse_are_what_a_recount_gives() -> None:
    """Releases and allocations of default slots look a TaskManager's free resources up by
    its free slot count; carved and occupied slots take the full count. Either way the
    figures are those of a sum over the slots held, whatever the order of operations."""
    total = ResourceProfile(3.0, 3000.0, 300.0)
    carved = ResourceProfile(0.5, 500.0, 50.0)
    pool = SlotPool()
    pool.add_task_manager("tm", "host", 3, occupied=[2], total_resource=total)
    rng = random.Random(26)
    held: dict[str, ResourceProfile] = {}
    for step in range(400):
        if step == 40:
            pool.slots_vacated("tm", [])  # the earlier registration's task ended
        if held and rng.random() < 0.5:
            request_id = rng.choice(sorted(held))
            del held[request_id]
            pool.release_slot(request_id)
        else:
            profile = carved if rng.random() < 0.2 else ResourceProfile.UNKNOWN
            request_id = f"r{step}"
            if pool.request_slot(request_id, 0.0, profile=profile) is None:
                pool.cancel_request(request_id)
            else:
                held[request_id] = carved if profile is carved else total.divide(3)
        occupied = len(pool.occupied_slots_of("tm"))
        used = ResourceProfile.total([*held.values(), total.divide(3).multiply(occupied)])
        free = pool.free_resource_of("tm")
        assert free.cpu_cores == pytest.approx(total.cpu_cores - used.cpu_cores)
        assert free.task_heap_memory_mb == pytest.approx(total.task_heap_memory_mb - used.task_heap_memory_mb)
        default_free = sum(1 for slot in pool.slots_of("tm")[:3] if slot.allocation_id is None) - (1 if occupied else 0)
        assert pool.free_slots_of("tm") == min(default_free, free.count_fitting(total.divide(3)))
