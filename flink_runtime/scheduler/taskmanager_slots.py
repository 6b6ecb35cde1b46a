"""One TaskManager's slots and resources, as the SlotPool books them (Flink's
``TaskManagerInfo`` in the fine-grained slot manager, with ``TaskSlotTable``'s split
between static and dynamic slots).

A TaskManager registers its *total* resources and ``taskmanager.numberOfTaskSlots``
(N). Its slots are either

* *dynamic* (the default, Flink's fine-grained resource management, default since Flink
  1.18): a request with a specified profile gets a slot of exactly that profile carved
  from the TaskManager's free resources, with an index from N up; a request with the
  UNKNOWN profile takes one of the N static slots (indices 0..N-1) sized as the
  *default slot profile*, total / N. Jobs that specify no resources therefore see
  exactly N slots per TaskManager, as before; or
* *fixed*: the N slots were given their profiles when the TaskManager started (Flink's
  coarse-grained mode, ``cluster.fine-grained-resource-management.enabled: false``, or
  a TaskManager that did not report its resources: its slots are ANY). A request takes
  a free slot whose profile holds it.

Either way nothing is handed out beyond the TaskManager's total: that is the
"never over-commits" the pool promises.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from flink_runtime.scheduler.resource_profile import ResourceProfile

__all__ = ["PhysicalSlot", "TaskManagerSlots", "unfulfillable_reason"]


@dataclass(frozen=True, slots=True)
class PhysicalSlot:
    """One slot of one TaskManager, as the SlotPool sees it at one moment.

    Frozen: the pool hands out snapshots, so a caller holding a slot it was
    given never sees it silently change when the slot is later reused.
    """

    task_manager_id: str
    slot_index: int
    host: str
    # The allocation (== request id) occupying the slot; None while free.
    allocation_id: str | None = None
    # What the slot holds: its fixed profile, the profile carved for it, or the
    # TaskManager's default slot profile. Not part of a slot's identity.
    resource_profile: ResourceProfile = field(default=ResourceProfile.ANY, compare=False)


@dataclass(slots=True, eq=False)
class TaskManagerSlots:
    host: str
    num_slots: int
    total: ResourceProfile
    # Profiles of the static slots 0..N-1 (all the default profile unless fixed ones were given).
    static_profiles: list[ResourceProfile]
    dynamic: bool
    slots: dict[int, PhysicalSlot]
    # Min-heap of free static slot indices: slots fill from index 0 up, which keeps
    # placement deterministic and easy to read in logs and tests.
    free: list[int]
    # Slots held by tasks the pool never allocated (an earlier registration's): neither
    # free nor allocated here until the TaskManager reports them vacated.
    occupied: set[int] = field(default_factory=set)
    # Dynamic mode: total minus every allocated and occupied slot's profile.
    free_resources: ResourceProfile = ResourceProfile.ANY
    # Cached "how many more UNKNOWN requests fit now" (the pool's free slot count).
    free_count: int = 0
    # Dynamic mode, no carved nor occupied slot: (free_resources, free_count) by the number
    # of free static slots, as `recompute` computed them the first time. A finished
    # subtask's release and the next one's allocation then cost a lookup, not a sum over
    # every slot (and the same floats as the sum, which it is).
    _by_free_static: dict[int, tuple[ResourceProfile, int]] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        tm_id: str,
        host: str,
        num_slots: int,
        total: ResourceProfile,
        slot_profiles: list[ResourceProfile] | None,
        dynamic: bool,
        occupied: Iterable[int],
    ) -> TaskManagerSlots:
        if slot_profiles:
            # Fixed profiles given: they are the slots, whatever N said.
            num_slots, static, dynamic = len(slot_profiles), list(slot_profiles), False
            if total.is_any:
                total = sum(slot_profiles[1:], slot_profiles[0])
        else:
            default = total.divide(num_slots) if num_slots > 0 else ResourceProfile.ZERO
            static = [default] * num_slots
            # A TaskManager that did not report its resources cannot be carved.
            dynamic = dynamic and not total.is_any and num_slots > 0
        held = {index for index in occupied if index >= 0 and (index < num_slots or dynamic)}
        tm = cls(
            host=host,
            num_slots=num_slots,
            total=total,
            static_profiles=static,
            dynamic=dynamic,
            slots={index: PhysicalSlot(tm_id, index, host, None, static[index]) for index in range(num_slots)},
            free=[index for index in range(num_slots) if index not in held],  # ascending: a heap
            occupied=held,
        )
        tm.recompute()
        return tm

    # ------------------------------------------------------------------ queries

    @property
    def default_profile(self) -> ResourceProfile:
        return self.total.divide(self.num_slots) if self.num_slots > 0 else ResourceProfile.ZERO

    def free_resource(self) -> ResourceProfile:
        """What is still free: carved from in dynamic mode; the free slots' sum in fixed mode."""
        if self.dynamic:
            return self.free_resources
        profiles = [self.static_profiles[index] for index in self.free]
        return sum(profiles[1:], profiles[0]) if profiles else ResourceProfile.ZERO

    def could_ever_fit(self, required: ResourceProfile) -> bool:
        """Whether this TaskManager, empty, could hold ``required`` in one slot."""
        if required.is_unknown:
            return self.num_slots > 0
        if self.dynamic:
            return self.total.fits(required)
        return any(profile.fits(required) for profile in self.static_profiles)

    def largest_slot(self) -> ResourceProfile:
        """The largest single slot it could ever give: its total (dynamic) or its
        largest fixed slot (by cores, then heap), for messages."""
        if self.dynamic or not self.static_profiles:
            return self.total
        return max(self.static_profiles, key=lambda p: (p.cpu_cores, p.task_heap_memory_mb, p.managed_memory_mb))

    def slot_for(self, required: ResourceProfile) -> int | None:
        """The index a request would get now, or None if it does not fit now.
        -1 stands for a new dynamic slot."""
        if required.is_unknown:
            return self.free[0] if self.free_count > 0 else None
        if self.dynamic:
            return -1 if self.free_resources.fits(required) else None
        fitting = [index for index in self.free if self.static_profiles[index].fits(required)]
        return min(fitting) if fitting else None

    # ------------------------------------------------------------------ updates

    def allocate(self, tm_id: str, index: int, allocation_id: str, required: ResourceProfile) -> PhysicalSlot:
        """Book the slot ``slot_for`` chose (``-1``: carve a dynamic one of ``required``)."""
        if index == -1:
            index = self._new_dynamic_index()
            slot = PhysicalSlot(tm_id, index, self.host, allocation_id, required)
        else:
            free = self.free
            if free[0] == index:  # the usual choice: the lowest free index
                heapq.heappop(free)
            else:
                free.remove(index)
                heapq.heapify(free)
            slot = PhysicalSlot(tm_id, index, self.host, allocation_id, self.slots[index].resource_profile)
        self.slots[index] = slot
        self.recompute()
        return slot

    def release(self, index: int) -> None:
        if index >= self.num_slots:
            del self.slots[index]
        else:
            old = self.slots[index]
            self.slots[index] = PhysicalSlot(old.task_manager_id, index, self.host, None, old.resource_profile)
            heapq.heappush(self.free, index)
        self.recompute()

    def vacate(self, still_occupied: Iterable[int]) -> bool:
        """Slots of an earlier registration no longer reported held become free."""
        vacated = self.occupied.difference(still_occupied)
        if not vacated:
            return False
        self.occupied -= vacated
        for index in vacated:
            if index < self.num_slots:
                heapq.heappush(self.free, index)
        self.recompute()
        return True

    def recompute(self) -> None:
        """Free resources and the free (default-sized) slot count, from the slots.

        A TaskManager has a handful of slots, so recounting them is cheaper to get right
        than incremental arithmetic, and float sums cannot drift."""
        if not self.dynamic:
            self.free_count = len(self.free)
            return
        static_only = not self.occupied and len(self.slots) == self.num_slots
        if static_only:
            # Every allocated slot is a static one of the default profile: the result
            # depends on how many are free only.
            known = self._by_free_static.get(len(self.free))
            if known is not None:
                self.free_resources, self.free_count = known
                return
        profiles = [slot.resource_profile for slot in self.slots.values() if slot.allocation_id is not None]
        # What an earlier registration's tasks hold is not known: count a default slot each.
        profiles.append(self.default_profile.multiply(len(self.occupied)))
        used = ResourceProfile.total(profiles)
        self.free_resources = ResourceProfile(
            max(0.0, self.total.cpu_cores - used.cpu_cores),
            max(0.0, self.total.task_heap_memory_mb - used.task_heap_memory_mb),
            max(0.0, self.total.managed_memory_mb - used.managed_memory_mb),
        )
        self.free_count = min(len(self.free), self.free_resources.count_fitting(self.default_profile))
        if static_only:
            self._by_free_static[len(self.free)] = (self.free_resources, self.free_count)

    def _new_dynamic_index(self) -> int:
        index = self.num_slots
        while index in self.slots or index in self.occupied:
            index += 1
        return index


def unfulfillable_reason(task_managers: Mapping[str, TaskManagerSlots], profile: ResourceProfile) -> str | None:
    """Why none of ``task_managers`` could ever hold ``profile`` in one slot, naming what
    was asked and the largest TaskManager (Flink's NoResourceAvailableException); None
    when one could, or when none is registered (one may still come)."""
    if profile.is_unknown or not task_managers:
        return None
    if any(tm.could_ever_fit(profile) for tm in task_managers.values()):
        return None
    largest_id, largest = max(
        task_managers.items(),
        key=lambda item: (item[1].largest_slot().cpu_cores, item[1].largest_slot().task_heap_memory_mb),
    )
    return (
        f"NoResourceAvailableException: a slot request needs {profile.short_description()}, more than "
        f"any of the {len(task_managers)} registered TaskManagers could ever offer in one slot; "
        f"the largest, {largest_id}, offers {largest.largest_slot().short_description()}. Lower the "
        f"resources of the vertex or slot sharing group, or start a TaskManager with more "
        f"(taskmanager.cpu.cores, taskmanager.memory.task.heap.size, taskmanager.memory.managed.size)."
    )
