"""SlotPool: slots a registering TaskManager reports occupied by tasks of an earlier
registration (Flink's SlotReport) are not handed out until a later report frees them."""

from __future__ import annotations

import random

from flink_runtime.scheduler.slotpool import PhysicalSlot, SlotPool


def check_counters(pool: SlotPool) -> None:
    """free + allocated == total, and the counters agree with the per-TaskManager view."""
    total = free = occupied = allocations = 0
    for tm_id in pool.task_managers:
        slots = pool.slots_of(tm_id)
        held = pool.occupied_slots_of(tm_id)
        total += len(slots)
        occupied += len(held)
        allocations += sum(1 for s in slots if s.allocation_id is not None)
        tm_free = sum(1 for s in slots if s.allocation_id is None and s.slot_index not in held)
        assert tm_free == pool.free_slots_of(tm_id)
        assert all(slots[i].allocation_id is None for i in held)
        free += tm_free
    assert (total, free, occupied) == (pool.total_slots, pool.free_slots, pool.occupied_slots)
    assert allocations + occupied == pool.allocated_slots
    assert pool.free_slots + pool.allocated_slots == pool.total_slots
    assert pool.free_slots == 0 or pool.pending_requests == 0


def test_occupied_slots_are_not_allocated() -> None:
    pool = SlotPool()
    assert pool.add_task_manager("tm1", "h", 2, occupied=[0]) == []
    check_counters(pool)
    assert (pool.total_slots, pool.free_slots, pool.occupied_slots) == (2, 1, 1)
    assert pool.request_slot("r1", now=0.0) == PhysicalSlot("tm1", 1, "h", "r1")
    assert pool.request_slot("r2", now=0.0) is None  # slot 0 is still occupied: queued
    check_counters(pool)


def test_slots_vacated_frees_unreported_slots_and_serves_the_queue() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm1", "h", 3, occupied=[0, 2])
    pool.request_slot("r1", now=0.0)
    assert pool.request_slot("r2", now=0.0) is None
    assert pool.request_slot("r3", now=0.0) is None
    # Still both occupied: nothing changes (a report may list slots of own allocations too).
    assert pool.slots_vacated("tm1", [0, 1, 2]) == []
    check_counters(pool)
    assert pool.slots_vacated("tm1", [2]) == [("r2", PhysicalSlot("tm1", 0, "h", "r2"))]
    check_counters(pool)
    assert pool.occupied_slots_of("tm1") == [2]
    assert pool.slots_vacated("tm1", []) == [("r3", PhysicalSlot("tm1", 2, "h", "r3"))]
    check_counters(pool)
    assert pool.occupied_slots == 0


def test_a_late_report_does_not_occupy_a_vacated_slot_again() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm1", "h", 1, occupied=[0])
    assert pool.slots_vacated("tm1", []) == []
    assert pool.free_slots == 1
    # An answer sent before the old task ended arrives after a fresher one.
    assert pool.slots_vacated("tm1", [0]) == []
    assert pool.free_slots == 1
    check_counters(pool)


def test_vacated_slots_rejoin_the_most_free_choice() -> None:
    pool = SlotPool()
    pool.add_task_manager("busy", "h1", 3, occupied=[0, 1, 2])
    pool.add_task_manager("other", "h2", 1)
    pool.slots_vacated("busy", [])
    # "busy" now has the most free slots, so it serves the next request.
    assert pool.request_slot("r1", now=0.0) == PhysicalSlot("busy", 0, "h1", "r1")
    check_counters(pool)


def test_removing_a_task_manager_drops_its_occupied_slots() -> None:
    pool = SlotPool()
    pool.add_task_manager("tm1", "h", 2, occupied=[1, 5])  # 5 does not exist: ignored
    assert pool.occupied_slots_of("tm1") == [1]
    assert pool.remove_task_manager("tm1") == []
    assert (pool.total_slots, pool.free_slots, pool.occupied_slots, pool.allocated_slots) == (0, 0, 0, 0)
    assert pool.slots_vacated("tm1", []) == []  # unknown: ignored


def test_random_operations_keep_counters_consistent() -> None:
    rng = random.Random(23)
    pool = SlotPool()
    tms: list[str] = []
    allocated: list[str] = []
    for step in range(2000):
        op = rng.random()
        if op < 0.1 or not tms:
            tm_id = f"tm{step}"
            slots = rng.randint(0, 4)
            pool.add_task_manager(
                tm_id, f"h{step % 3}", slots, occupied=rng.sample(range(slots), rng.randint(0, slots))
            )
            tms.append(tm_id)
        elif op < 0.15:
            pool.remove_task_manager(tms.pop(rng.randrange(len(tms))))
        elif op < 0.4:
            tm_id = rng.choice(tms)
            held = pool.occupied_slots_of(tm_id)
            fulfilled = pool.slots_vacated(tm_id, rng.sample(held, rng.randint(0, len(held))))
            allocated += [request_id for request_id, _ in fulfilled]
        elif op < 0.75:
            if pool.request_slot(f"r{step}", now=0.0) is not None:
                allocated.append(f"r{step}")
        elif allocated:
            for request_id, _ in pool.release_slot(allocated.pop(rng.randrange(len(allocated)))):
                allocated.append(request_id)
        check_counters(pool)
