from __future__ import annotations

import pytest

from flink_runtime.scheduler.slot_sharing import Acquired, SharedSlotManager, shared_slot_key
from flink_runtime.scheduler.slotpool import SlotPool


def test_same_group_same_index_shares_a_key() -> None:
    assert shared_slot_key("default", None, "source", 3) == shared_slot_key("default", None, "map", 3)
    assert shared_slot_key("default", None, "source", 3) != shared_slot_key("default", None, "source", 4)
    assert shared_slot_key("a", None, "v", 0) != shared_slot_key("b", None, "v", 0)


def test_no_group_gets_keys_of_its_own() -> None:
    assert shared_slot_key(None, None, "source", 0) == ("vertex:source", 0)
    assert shared_slot_key(None, None, "source", 0) != shared_slot_key(None, None, "map", 0)
    # A vertex named like a group cannot collide with the group.
    assert shared_slot_key(None, None, "default", 0) != shared_slot_key("default", None, "x", 0)


def test_co_location_lands_in_the_same_slot() -> None:
    head = shared_slot_key("default", "iteration", "head", 2)
    tail = shared_slot_key("default", "iteration", "tail", 2)
    assert head == tail
    # Even without a sharing group, co-located subtasks share a key.
    assert shared_slot_key(None, "it", "head", 1) == shared_slot_key(None, "it", "tail", 1)
    assert shared_slot_key(None, "it", "head", 1) != shared_slot_key(None, "it", "head", 0)

    # And through the manager they end up in one physical slot.
    pool = SlotPool()
    pool.add_task_manager("tm1", "h", 2)
    manager = SharedSlotManager()
    assert manager.acquire(head, "head-2") == Acquired(None, True)
    slot = pool.request_slot("req-1", 0.0)
    assert slot is not None and slot.allocation_id is not None
    assert manager.bind(head, slot.allocation_id) == ["head-2"]
    assert manager.acquire(tail, "tail-2") == Acquired(slot.allocation_id, False)


def test_negative_subtask_index_is_rejected() -> None:
    with pytest.raises(ValueError):
        shared_slot_key("g", None, "v", -1)


def test_acquire_requests_once_and_bind_returns_all_waiters() -> None:
    manager = SharedSlotManager()
    key = ("group:default", 0)
    assert manager.acquire(key, "source-0") == Acquired(None, True)
    assert manager.acquire(key, "map-0") == Acquired(None, False)
    assert manager.acquire(key, "map-0") == Acquired(None, False)  # idempotent
    assert set(manager.pending_keys) == {key}
    assert manager.bind(key, "alloc-1") == ["source-0", "map-0"]
    assert not manager.pending_keys
    assert manager.acquire(key, "sink-0") == Acquired("alloc-1", False)
    assert manager.members_of(key) == ["source-0", "map-0", "sink-0"]
    assert manager.key_of("alloc-1") == key


def test_release_after_last_member_without_expectations() -> None:
    manager = SharedSlotManager()
    key = ("group:default", 0)
    manager.acquire(key, "a")
    manager.bind(key, "alloc")
    manager.acquire(key, "b")
    assert manager.release(key, "a") is None
    assert manager.release(key, "a") is None  # not a member any more
    assert manager.release(key, "b") == "alloc"
    assert manager.allocation_of(key) is None
    assert manager.key_of("alloc") is None


def test_release_only_after_all_expected_members() -> None:
    # Producer and co-located consumer: the consumer is deployed lazily, after
    # the producer finished. The slot must survive the gap.
    manager = SharedSlotManager()
    key = shared_slot_key("default", "colo", "producer", 0)
    manager.expect(key, 2)
    assert manager.acquire(key, "producer-0").request_slot
    manager.bind(key, "alloc")
    assert manager.release(key, "producer-0") is None  # consumer still to come
    assert manager.allocation_of(key) == "alloc"
    assert manager.expected_of(key) == 1
    assert manager.acquire(key, "consumer-0") == Acquired("alloc", False)
    assert manager.release(key, "consumer-0") == "alloc"
    assert manager.allocation_of(key) is None


def test_expect_lowered_to_zero_frees_an_unused_slot() -> None:
    # Failover: the consumer that was expected will not come in this attempt.
    manager = SharedSlotManager()
    key = ("group:g", 0)
    manager.expect(key, 2)
    manager.acquire(key, "p")
    manager.bind(key, "alloc")
    assert manager.release(key, "p") is None
    assert manager.expect(key, 0) == "alloc"
    assert manager.expect(key, 0) is None


def test_pending_key_dropped_when_nobody_waits() -> None:
    manager = SharedSlotManager()
    key = ("group:g", 1)
    assert manager.acquire(key, "e1").request_slot
    assert manager.release(key, "e1") is None
    assert not manager.is_pending(key)  # the caller cancels its slot request
    with pytest.raises(KeyError):
        manager.bind(key, "late-alloc")
    # A pending key with expected members keeps its request.
    manager.expect(key, 2)
    assert manager.acquire(key, "e2").request_slot
    manager.release(key, "e2")
    assert manager.is_pending(key)
    assert manager.bind(key, "alloc") == []
    assert manager.acquire(key, "e3") == Acquired("alloc", False)
    assert manager.release(key, "e3") == "alloc"


def test_bind_rejects_an_allocation_used_by_another_key() -> None:
    manager = SharedSlotManager()
    manager.acquire(("group:g", 0), "a")
    manager.acquire(("group:g", 1), "b")
    manager.bind(("group:g", 0), "alloc")
    with pytest.raises(ValueError):
        manager.bind(("group:g", 1), "alloc")


def test_drop_allocation_returns_members_and_allows_a_new_slot() -> None:
    manager = SharedSlotManager()
    key = ("group:g", 0)
    manager.expect(key, 3)
    manager.acquire(key, "a")
    manager.bind(key, "alloc")
    manager.acquire(key, "b")
    assert manager.drop_allocation("alloc") == ["a", "b"]
    assert manager.drop_allocation("alloc") == []
    assert manager.release(key, "a") is None  # already dropped: harmless
    # The third expected execution needs a fresh physical slot.
    assert manager.acquire(key, "c") == Acquired(None, True)
    manager.bind(key, "alloc-2")
    assert manager.release(key, "c") == "alloc-2"


def test_drop_allocation_forgets_key_without_expectations() -> None:
    manager = SharedSlotManager()
    key = ("vertex:v", 0)
    manager.acquire(key, "a")
    manager.bind(key, "alloc")
    assert manager.drop_allocation("alloc") == ["a"]
    assert manager.members_of(key) == []
    assert manager.acquire(key, "a2") == Acquired(None, True)


def test_sharing_reduces_slots_to_max_parallelism() -> None:
    # source(4) -> map(4) -> sink(2), one sharing group: 4 slots, not 10.
    pool = SlotPool()
    pool.add_task_manager("tm1", "h", 8)
    manager = SharedSlotManager()
    deployed: dict[str, str] = {}
    request_of: dict[tuple[str, int], str] = {}
    for vertex, parallelism in (("source", 4), ("map", 4), ("sink", 2)):
        for i in range(parallelism):
            key = shared_slot_key("default", None, vertex, i)
            execution_id = f"{vertex}-{i}"
            acquired = manager.acquire(key, execution_id)
            if acquired.allocation_id is not None:
                deployed[execution_id] = acquired.allocation_id
            elif acquired.request_slot:
                request_of[key] = f"req-{key[1]}"
                slot = pool.request_slot(request_of[key], 0.0)
                assert slot is not None and slot.allocation_id is not None
                for eid in manager.bind(key, slot.allocation_id):
                    deployed[eid] = slot.allocation_id
    assert pool.allocated_slots == 4
    assert len(deployed) == 10
    assert deployed["source-1"] == deployed["map-1"] == deployed["sink-1"]
    assert deployed["source-3"] == deployed["map-3"]
    assert deployed["source-0"] != deployed["source-1"]
