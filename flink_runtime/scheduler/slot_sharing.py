"""Slot sharing and co-location: several subtasks in one physical slot.

Flink lets one slot hold a whole pipeline: one subtask of *each* vertex in a
*slot sharing group*. A job then needs as many slots as its highest parallelism
rather than the sum of all parallelisms, and a source, its map and its sink can
exchange data inside one slot. A *co-location group* is stricter: the i-th
subtasks of its vertices must run in the same slot (Flink uses it for iteration
heads and tails).

We key shared slots by ``(group, subtask index)``: the i-th subtasks of all
vertices of a group share one slot. That keeps Flink's invariant (a slot holds at
most one subtask of each vertex, since a vertex has one i-th subtask) and gives
the co-location guarantee for free, because co-located vertices are in one
sharing group (the JobGraph should reject co-location across sharing groups).
A vertex with no sharing group gets slots of its own.

``SharedSlotManager`` maps those keys to physical allocations from the
``SlotPool`` and decides when a shared slot can be given back. The rule:

    A shared slot goes back to the pool when its last member leaves AND no
    further execution is expected to use the key in this attempt.

With lazy deployment a producer may finish before its consumer, co-located with
it, is deployed. Releasing the slot in between would lose the co-location (and
the consumer may then find no slot at all), so the scheduler declares with
``expect(key, count)`` how many executions will still come for a key; each
``acquire`` of a new member uses one up. Without a declaration a key is plain
reference counted. After a failover the scheduler re-declares for the new
attempt (``expect`` replaces the previous count).

Typical use by the scheduler (``pool`` is the ``SlotPool``)::

    key = shared_slot_key(vertex.slot_sharing_group, vertex.co_location_group,
                          vertex.id, subtask_index)
    acquired = manager.acquire(key, execution_id)
    if acquired.allocation_id is not None:
        deploy(execution_id, acquired.allocation_id)
    elif acquired.request_slot:
        request_of[key] = request_id            # the caller picks the id
        slot = pool.request_slot(request_id, now, ...)
        if slot is not None:                     # else: a later fulfilment
            for eid in manager.bind(key, slot.allocation_id):
                deploy(eid, slot.allocation_id)
    # else: a slot request for the key is in flight; bind() will return us

    # an execution reached a terminal state (or was never deployed):
    allocation_id = manager.release(key, execution_id)
    if allocation_id is not None:
        pool.release_slot(allocation_id)
    elif key in request_of and not manager.is_pending(key):
        pool.cancel_request(request_of.pop(key))  # nobody waits any more

Pure bookkeeping on plain strings: no I/O, no ExecutionGraph types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from flink_runtime.scheduler.resource_profile import ResourceProfile

if TYPE_CHECKING:
    from flink_runtime.jobgraph import JobGraph

__all__ = ["SlotKey", "shared_slot_key", "Acquired", "SharedSlotManager", "SlotProfiles", "slot_profiles"]

# (group, subtask index); the group part is namespaced ("group:", "colocation:",
# "vertex:") so a vertex id can never collide with a group name.
SlotKey = tuple[str, int]


def shared_slot_key(
    sharing_group: str | None,
    co_location_group: str | None,
    vertex_id: str,
    subtask_index: int,
) -> SlotKey:
    """The shared slot the ``subtask_index``-th subtask of a vertex runs in.

    * In a slot sharing group: ``("group:<group>", i)``, shared by the i-th
      subtasks of all vertices of the group (which makes co-location hold too).
    * No sharing group but a co-location group: ``("colocation:<group>", i)``,
      so co-location is still honoured (Flink forbids this combination; we
      degrade gracefully rather than break the stronger guarantee).
    * Neither: ``("vertex:<vertex_id>", i)``, a slot of its own.
    """
    if subtask_index < 0:
        raise ValueError(f"subtask_index must be >= 0, got {subtask_index}")
    if sharing_group is not None:
        return (f"group:{sharing_group}", subtask_index)
    if co_location_group is not None:
        return (f"colocation:{co_location_group}", subtask_index)
    return (f"vertex:{vertex_id}", subtask_index)


class Acquired(NamedTuple):
    """What ``SharedSlotManager.acquire`` tells the scheduler to do."""

    # The slot to deploy into now; None while the key has no physical slot.
    allocation_id: str | None
    # True for exactly one caller per unbound key: request a physical slot from
    # the SlotPool, then ``bind`` it. False with no allocation: a request is
    # already in flight and ``bind`` will return this execution.
    request_slot: bool


@dataclass(slots=True)
class _SharedSlot:
    allocation_id: str | None = None
    # Executions holding the slot, or waiting for it while it is unbound
    # (a dict as an ordered set, so bind() reports them in arrival order).
    members: dict[str, None] = field(default_factory=dict)
    # Executions still expected to acquire the key in this attempt.
    expected: int = 0


class SharedSlotManager:
    """Shared slots by key: their physical allocation and their members."""

    def __init__(self) -> None:
        self._slots: dict[SlotKey, _SharedSlot] = {}
        self._key_of_allocation: dict[str, SlotKey] = {}
        # Keys with a physical slot request in flight (a dict as an ordered set).
        self._pending: dict[SlotKey, None] = {}

    # ------------------------------------------------------------------ queries

    @property
    def pending_keys(self) -> Set[SlotKey]:
        """Keys waiting for a physical slot (a live, read-only view)."""
        return self._pending.keys()

    def is_pending(self, key: SlotKey) -> bool:
        return key in self._pending

    @property
    def allocation_count(self) -> int:
        """Physical slots bound to a key."""
        return len(self._key_of_allocation)

    def allocation_of(self, key: SlotKey) -> str | None:
        slot = self._slots.get(key)
        return None if slot is None else slot.allocation_id

    def key_of(self, allocation_id: str) -> SlotKey | None:
        return self._key_of_allocation.get(allocation_id)

    def members_of(self, key: SlotKey) -> list[str]:
        slot = self._slots.get(key)
        return [] if slot is None else list(slot.members)

    def expected_of(self, key: SlotKey) -> int:
        slot = self._slots.get(key)
        return 0 if slot is None else slot.expected

    # ------------------------------------------------------------------ updates

    def expect(self, key: SlotKey, count: int) -> str | None:
        """Declare that ``count`` more executions will acquire ``key`` in this attempt.

        Replaces any earlier declaration. Lowering it to 0 on a key nobody holds
        frees the key: the allocation id to give back to the pool is returned
        (None if there is none; a pending key is dropped, so the caller should
        cancel its slot request).
        """
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        slot = self._slots.get(key)
        if slot is None:
            if count == 0:
                return None
            slot = self._slots[key] = _SharedSlot()
        slot.expected = count
        return self._release_if_unused(key, slot)

    def acquire(self, key: SlotKey, execution_id: str) -> Acquired:
        """Join the shared slot of ``key`` (idempotent per execution)."""
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _SharedSlot()
        if execution_id not in slot.members:
            slot.members[execution_id] = None
            if slot.expected > 0:
                slot.expected -= 1
        if slot.allocation_id is not None:
            return Acquired(slot.allocation_id, False)
        if key in self._pending:
            return Acquired(None, False)
        self._pending[key] = None
        return Acquired(None, True)

    def bind(self, key: SlotKey, allocation_id: str) -> list[str]:
        """Attach the physical slot obtained for a pending key.

        Returns the executions that were waiting for it (to deploy now).
        KeyError if the key is not pending: its request should have been
        cancelled when the key was dropped.
        """
        if key not in self._pending:
            raise KeyError(f"shared slot {key!r} is not waiting for a physical slot")
        if allocation_id in self._key_of_allocation:
            raise ValueError(f"allocation {allocation_id!r} is already bound to another shared slot")
        del self._pending[key]
        slot = self._slots[key]
        slot.allocation_id = allocation_id
        self._key_of_allocation[allocation_id] = key
        return list(slot.members)

    def release(self, key: SlotKey, execution_id: str) -> str | None:
        """An execution leaves the shared slot (finished, failed, cancelled).

        Returns the allocation id to give back to the SlotPool when this was
        the last member and no further member is expected; otherwise None.
        Releasing an execution that is not a member does nothing (a TaskManager
        loss may already have dropped it). If the key was pending and nobody
        wants it any more it is dropped (``is_pending`` turns False): the
        caller should cancel its slot request.
        """
        slot = self._slots.get(key)
        if slot is None or execution_id not in slot.members:
            return None
        del slot.members[execution_id]
        return self._release_if_unused(key, slot)

    def drop_allocation(self, allocation_id: str) -> list[str]:
        """The physical slot is gone (TaskManager lost): unbind it.

        Returns the member executions, which the caller fails. Executions still
        expected for the key will request a fresh slot when they acquire it.
        """
        key = self._key_of_allocation.pop(allocation_id, None)
        if key is None:
            return []
        slot = self._slots[key]
        members = list(slot.members)
        slot.members.clear()
        slot.allocation_id = None
        if slot.expected == 0:
            del self._slots[key]
        return members

    def _release_if_unused(self, key: SlotKey, slot: _SharedSlot) -> str | None:
        if slot.members or slot.expected > 0:
            return None
        del self._slots[key]
        self._pending.pop(key, None)
        allocation_id = slot.allocation_id
        if allocation_id is not None:
            del self._key_of_allocation[allocation_id]
        return allocation_id


class SlotProfiles:
    """The resource profile a shared slot's request carries (Flink's
    ``SlotSharingGroup`` resources, or the sum of its vertices' ``ResourceSpec``).

    * ``("group:<g>", i)``: the group's own profile when the JobGraph gives one
      (``slot_sharing_groups``), else the sum of the profiles of the group's vertices
      that have an i-th subtask; UNKNOWN as soon as one of them is unspecified, as in
      Flink (the slot then takes the TaskManager's default size).
    * ``("colocation:<c>", i)``: the sum over the co-location group's vertices.
    * ``("vertex:<v>", i)``: the vertex's own profile.

    The sum is what the slot holds when all the group's subtasks run in it at once; with
    blocking exchanges a consumer runs after its producer, so this over-reserves for a
    chain, and a chain whose vertices need different amounts is better split into groups.
    """

    def __init__(
        self,
        vertices: Iterable[tuple[str, str | None, str | None, int, ResourceProfile]],
        group_profiles: Mapping[str, ResourceProfile],
    ) -> None:
        """vertices: (vertex id, slot sharing group, co-location group, parallelism, profile)."""
        self._group_profiles = dict(group_profiles)
        self._members: dict[str, list[tuple[int, ResourceProfile]]] = {}
        for vertex_id, sharing_group, co_location_group, parallelism, profile in vertices:
            group = shared_slot_key(sharing_group, co_location_group, vertex_id, 0)[0]
            self._members.setdefault(group, []).append((parallelism, profile))
        self._cache: dict[SlotKey, ResourceProfile] = {}

    def profile(self, key: SlotKey) -> ResourceProfile:
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        group, index = key
        own = self._group_profiles.get(group.removeprefix("group:")) if group.startswith("group:") else None
        if own is not None and not own.is_unknown:
            result = own
        else:
            present = [profile for parallelism, profile in self._members.get(group, ()) if parallelism > index]
            result = ResourceProfile.UNKNOWN
            if present:
                result = present[0]
                for profile in present[1:]:
                    result = result.merge(profile)
        self._cache[key] = result
        return result


def slot_profiles(job_graph: JobGraph) -> SlotProfiles:
    """The SlotProfiles of a JobGraph's vertices and named slot sharing groups."""
    return SlotProfiles(
        (
            (
                vertex.id,
                vertex.slot_sharing_group,
                vertex.co_location_group,
                vertex.parallelism,
                ResourceProfile.from_spec(vertex.resources),
            )
            for vertex in job_graph.vertices
        ),
        {name: ResourceProfile.from_spec(spec) for name, spec in job_graph.slot_sharing_groups.items()},
    )


def job_slot_requests(job_graph: JobGraph) -> list[ResourceProfile]:
    """The profile of each slot the job asks for when all its subtasks run (one per shared
    slot): what an active resource manager starts TaskManagers for while the job is still
    being prepared (resourcemanager/active.py planning_demand)."""
    profiles = slot_profiles(job_graph)
    keys = {
        shared_slot_key(vertex.slot_sharing_group, vertex.co_location_group, vertex.id, index)
        for vertex in job_graph.vertices
        for index in range(vertex.parallelism)
    }
    return [profiles.profile(key) for key in sorted(keys)]
