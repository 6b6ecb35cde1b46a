"""The SlotPool: the JobManager's view of the TaskManager slots it may deploy into.

In Flink a TaskManager offers a fixed number of *task slots*; a slot is the unit
of scheduling: one slot runs one pipeline of subtasks (see ``slot_sharing``). The
JobManager's SlotPool holds the slots offered to it and serves *slot requests*
from the scheduler:

* a request carries a resource profile (resource_profile.py; UNKNOWN when the job
  specified none) and is served by a TaskManager with room for it: a free static slot
  for UNKNOWN, a slot carved from the free resources for a specified profile (see
  taskmanager_slots.py); nothing is handed out beyond a TaskManager's total. A request
  no registered TaskManager could ever hold fails at once with the numbers;
* a request is served at once if it fits and nobody waits, otherwise it waits in a
  FIFO queue and is served when a slot is released or a TaskManager registers;
* the scheduler may name preferred TaskManagers and hosts; where a request goes is
  slot_placement.py's choice;
* a request expires once the pool could not serve *any* request for
  ``slot.request.timeout``, because no TaskManager offers a slot at all; the scheduler
  then fails the execution (Flink's ``NoResourceAvailableException``). A request that
  only waits for a busy slot never expires: batch subtasks finish and free their slots,
  so a job with more subtasks than slots runs in waves (Flink's batch slot requests
  fail only when unfulfillable, not while slots are occupied);
* when a TaskManager is lost its slots vanish and the allocations on it are
  reported back so the scheduler can fail those executions;
* a registering TaskManager may report slots still *occupied* by tasks of an earlier
  registration (a former leader's, or its own before it was declared lost: Flink's
  SlotReport). Those are not free until a later report (each heartbeat's) no longer
  lists them (``slots_vacated``); deploying into one would be refused by the
  TaskManager.

Everything here is pure bookkeeping: no I/O, no clocks (time is passed in as
``now``), so the JobManager's actor drives it and tests are deterministic. The
allocation id of a fulfilled request *is* its request id.

Operations on UNKNOWN requests are O(1) or O(log n) amortised: a job may queue
10,000 requests against a handful of slots, so nothing scans the queue or all
TaskManagers. A request with a specified profile scans the TaskManagers for room.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from flink_runtime.scheduler.resource_profile import ResourceProfile
from flink_runtime.scheduler.slot_placement import SlotPlacement
from flink_runtime.scheduler.taskmanager_slots import PhysicalSlot, TaskManagerSlots, unfulfillable_reason

__all__ = ["PhysicalSlot", "SlotOffer", "SlotPool", "Fulfilment", "UnfulfillableSlotRequest"]


# Flink's name for a slot as the TaskManager offers it to the JobManager. The
# data is the same, so one type serves both roles.
SlotOffer = PhysicalSlot

# (request_id, slot): a queued request that has just been given a slot.
Fulfilment = tuple[str, PhysicalSlot]


class UnfulfillableSlotRequest(ValueError):
    """No registered TaskManager could ever hold the request, even empty (Flink fails
    such a request with NoResourceAvailableException)."""


@dataclass(slots=True, eq=False)
class _PendingRequest:
    request_id: str
    requested_at: float
    preferred_task_managers: tuple[str, ...] = field(default=())
    preferred_hosts: tuple[str, ...] = field(default=())
    profile: ResourceProfile = ResourceProfile.UNKNOWN


class SlotPool:
    """Slots offered by TaskManagers, and the slot requests waiting for them.

    Every method that can hand out slots to *queued* requests
    (``release_slot``, ``add_task_manager``, ``slots_vacated``, ``serve_pending``)
    returns the list of ``(request_id, slot)`` fulfilments it made, so the caller
    learns about every fulfilment exactly once and can deploy the waiting executions.

    ``fail_unfulfillable``: a request with a profile no registered TaskManager could
    ever hold is refused at once (``UnfulfillableSlotRequest``) instead of waiting; an
    active resource manager that starts TaskManagers sized for requests turns it off.
    """

    def __init__(self, fail_unfulfillable: bool = True) -> None:
        self.fail_unfulfillable = fail_unfulfillable
        self._task_managers: dict[str, TaskManagerSlots] = {}
        self._placement = SlotPlacement(self._task_managers)
        self._total_slots = 0
        self._free_slots = 0
        self._occupied_slots = 0
        # allocation id -> (task manager id, slot index)
        self._allocations: dict[str, tuple[str, int]] = {}
        # Pending requests by id, and their FIFO order. Cancelling only removes
        # the dict entry; the queue entry goes stale and is skipped when reached
        # (lazy deletion keeps cancel O(1)). ``_stale`` counts those entries so
        # the queue can be compacted before they outnumber live ones.
        self._pending: dict[str, _PendingRequest] = {}
        self._queue: deque[_PendingRequest] = deque()
        self._stale = 0
        # When the pool was first seen without any slot by ``expire_requests`` (None
        # while it has slots): requests expire only after that long without slots.
        self._slotless_since: float | None = None
        # A TaskManager came or left: queued requests may fit none of those registered.
        self._recheck_fit = False

    # ------------------------------------------------------------------ queries

    @property
    def total_slots(self) -> int:
        """Static slots of all TaskManagers (``taskmanager.numberOfTaskSlots`` each)."""
        return self._total_slots

    @property
    def free_slots(self) -> int:
        """Default-sized slots that could be allocated now (what an UNKNOWN request takes)."""
        return self._free_slots

    @property
    def allocated_slots(self) -> int:
        """Slots that are not free: held by an allocation of this pool, or occupied by
        a task of an earlier registration (``occupied_slots``). free + allocated == total
        while every request is UNKNOWN; carved slots of specified profiles can make a
        TaskManager hold more, smaller, slots than it has static ones (or fewer, larger)."""
        return len(self._allocations) + self._occupied_slots

    @property
    def occupied_slots(self) -> int:
        """Slots held by tasks of an earlier registration, not yet reported vacated."""
        return self._occupied_slots

    @property
    def pending_requests(self) -> int:
        """Number of requests waiting for a slot."""
        return len(self._pending)

    def pending_profiles(self) -> list[ResourceProfile]:
        """The profiles of the requests waiting for a slot, oldest first (UNKNOWN for
        those that specified none: they take a TaskManager's default slot). What an
        active resource manager sizes new TaskManagers for."""
        return [r.profile for r in self._queue if self._pending.get(r.request_id) is r]

    @property
    def task_managers(self) -> list[str]:
        return list(self._task_managers)

    def has_task_manager(self, tm_id: str) -> bool:
        return tm_id in self._task_managers

    def is_pending(self, request_id: str) -> bool:
        return request_id in self._pending

    def free_slots_of(self, tm_id: str) -> int:
        """Free default-sized slots of one TaskManager; KeyError if it is not registered."""
        return self._task_managers[tm_id].free_count

    def occupied_slots_of(self, tm_id: str) -> list[int]:
        """Indices of one TaskManager's slots held by an earlier registration's tasks;
        KeyError if it is not registered."""
        return sorted(self._task_managers[tm_id].occupied)

    def slots_of(self, tm_id: str) -> list[PhysicalSlot]:
        """All slots of one TaskManager by index: its static ones, free or not, and the
        dynamic ones carved for allocations; KeyError if it is not registered."""
        tm = self._task_managers[tm_id]
        return [tm.slots[index] for index in sorted(tm.slots)]

    def slot_of(self, allocation_id: str) -> PhysicalSlot | None:
        """The slot an allocation occupies, or None if it holds none (any more)."""
        location = self._allocations.get(allocation_id)
        if location is None:
            return None
        tm_id, index = location
        return self._task_managers[tm_id].slots[index]

    def total_resource_of(self, tm_id: str) -> ResourceProfile:
        """A TaskManager's total resources (ANY if it did not report them); KeyError if
        it is not registered."""
        return self._task_managers[tm_id].total

    def free_resource_of(self, tm_id: str) -> ResourceProfile:
        """What of a TaskManager is not allocated (nor held by an earlier registration's
        tasks); KeyError if it is not registered."""
        return self._task_managers[tm_id].free_resource()

    def default_slot_profile_of(self, tm_id: str) -> ResourceProfile:
        """Total / numberOfTaskSlots: what an UNKNOWN request gets there."""
        return self._task_managers[tm_id].default_profile

    def is_dynamic(self, tm_id: str) -> bool:
        """Whether its slots are carved at allocation (else they are fixed)."""
        return self._task_managers[tm_id].dynamic

    def unfulfillable_reason(self, profile: ResourceProfile) -> str | None:
        """Why no registered TaskManager could ever hold ``profile`` (with the numbers),
        or None when one could, or none is registered (one may still come)."""
        return unfulfillable_reason(self._task_managers, profile)

    # ----------------------------------------------------------- task managers

    def add_task_manager(
        self,
        tm_id: str,
        host: str,
        num_slots: int,
        occupied: Iterable[int] = (),
        total_resource: ResourceProfile = ResourceProfile.ANY,
        slot_profiles: list[ResourceProfile] | None = None,
        dynamic: bool = True,
    ) -> list[Fulfilment]:
        """Register a TaskManager's slots; queued requests take the free ones at once.

        ``total_resource``: what it has (ANY when it did not say: its slots then hold
        anything, counted only). ``slot_profiles``: fixed slots, one profile each;
        otherwise ``num_slots`` slots of total / num_slots, and with ``dynamic`` the
        requests with a specified profile get slots carved from the free resources.
        ``occupied``: indices of slots still held by tasks of an earlier registration;
        they stay unavailable until ``slots_vacated`` frees them.

        Returns the ``(request_id, slot)`` pairs fulfilled by the new slots.
        A TaskManager id may be registered once; a restarted TaskManager must
        be removed first (its old allocations are gone with it).
        """
        if tm_id in self._task_managers:
            raise ValueError(f"TaskManager {tm_id!r} is already registered")
        if num_slots < 0:
            raise ValueError(f"num_slots must be >= 0, got {num_slots}")
        tm = TaskManagerSlots.create(tm_id, host, num_slots, total_resource, slot_profiles, dynamic, occupied)
        self._task_managers[tm_id] = tm
        self._placement.task_manager_added(tm_id, host)
        self._free_slots += tm.free_count
        self._total_slots += tm.num_slots
        self._occupied_slots += len(tm.occupied)
        if tm.num_slots:
            self._slotless_since = None
        # A request queued while no TaskManager was registered may fit none of them.
        self._recheck_fit = bool(self._pending)
        return self._serve_pending()

    def slots_vacated(self, tm_id: str, still_occupied: Iterable[int]) -> list[Fulfilment]:
        """A TaskManager's latest report: of the slots it registered as occupied, those
        not in ``still_occupied`` are free now, and queued requests take them.

        Only slots registered as occupied are affected: a report listing more (slots of
        this pool's own allocations, or an answer sent before the tasks ended) changes
        nothing, so reports may arrive late or out of order. O(1) for a TaskManager
        without occupied slots (every heartbeat calls this). Unknown ids return [].
        """
        tm = self._task_managers.get(tm_id)
        if tm is None or not tm.occupied:
            return []
        before, old_free = len(tm.occupied), tm.free_count
        if not tm.vacate(still_occupied):
            return []
        self._occupied_slots -= before - len(tm.occupied)
        self._update_free_count(tm_id, old_free)
        return self._serve_pending()

    def remove_task_manager(self, tm_id: str) -> list[str]:
        """Forget a (lost or departed) TaskManager and all its slots.

        Returns the allocation ids that were on it: the caller fails those
        executions. Unknown ids are ignored (a TaskManager may be reported lost
        by heartbeat and by its own disconnect), returning [].
        """
        tm = self._task_managers.get(tm_id)
        if tm is None:
            return []
        self._placement.task_manager_removed(tm_id, tm.host, tm.free_count)
        self._free_slots -= tm.free_count
        del self._task_managers[tm_id]
        lost = [slot.allocation_id for slot in tm.slots.values() if slot.allocation_id is not None]
        for allocation_id in lost:
            del self._allocations[allocation_id]
        self._total_slots -= tm.num_slots
        self._occupied_slots -= len(tm.occupied)
        self._recheck_fit = bool(self._pending)
        return lost

    # ---------------------------------------------------------------- requests

    def request_slot(
        self,
        request_id: str,
        now: float,
        preferred_hosts: Iterable[str] = (),
        preferred_task_managers: Iterable[str] = (),
        profile: ResourceProfile = ResourceProfile.UNKNOWN,
    ) -> PhysicalSlot | None:
        """Allocate a slot holding ``profile`` for ``request_id`` now, or queue the request.

        Preference order: the first listed TaskManager with room, then the TaskManager
        with most free slots on the first listed host that has room, then the
        TaskManager with most free slots overall. Preferences are soft: a request is
        never held back waiting for a preferred slot, as in Flink.

        Returns the allocated slot, or None if the request was queued; a queued
        request is later reported by ``release_slot`` / ``add_task_manager``,
        or dropped by ``cancel_request`` / ``expire_requests`` /
        ``take_unfulfillable``. Raises ``UnfulfillableSlotRequest`` (with the numbers)
        when ``fail_unfulfillable`` and no registered TaskManager could ever hold it.
        """
        if request_id in self._pending or request_id in self._allocations:
            raise ValueError(f"slot request {request_id!r} is already pending or allocated")
        if self.fail_unfulfillable:
            reason = self.unfulfillable_reason(profile)
            if reason is not None:
                raise UnfulfillableSlotRequest(reason)
        request = _PendingRequest(request_id, now, tuple(preferred_task_managers), tuple(preferred_hosts), profile)
        # Queued requests are served whenever resources free up, FIFO: a request only
        # takes a slot now when nobody waits, so a large request is not starved by
        # smaller ones overtaking it.
        if not self._pending:
            choice = self._choose(request)
            if choice is not None:
                return self._allocate(request, *choice)
        self._pending[request_id] = request
        self._queue.append(request)
        return None

    def cancel_request(self, request_id: str) -> bool:
        """Withdraw a queued request. Returns False if it was not queued.

        An already fulfilled request is not affected: give its slot back with
        ``release_slot``.
        """
        if self._pending.pop(request_id, None) is None:
            return False
        self._stale += 1
        self._compact_queue()
        return True

    def expire_requests(self, now: float, timeout: float) -> list[str]:
        """Drop and return queued requests that could not be served for ``timeout``.

        A request cannot be served while the pool has no slot at all; then it expires
        once it has waited ``timeout`` since both its own request time and the moment
        the pool was first seen without slots (so a TaskManager that restarts within
        ``timeout`` finds the queue intact). While any slot exists nothing expires: the
        slot will free up when the subtask in it ends.

        Call it periodically; assumes ``now`` never goes backwards between calls (a
        monotonic clock), so the FIFO queue is also ordered by request time and only its
        head is inspected.
        """
        if self._total_slots > 0:
            self._slotless_since = None
            return []
        if self._slotless_since is None:
            self._slotless_since = now
        expired: list[str] = []
        queue = self._queue
        while queue:
            head = queue[0]
            if self._pending.get(head.request_id) is not head:
                queue.popleft()
                self._stale -= 1
                continue
            if now - max(head.requested_at, self._slotless_since) < timeout:
                break
            queue.popleft()
            del self._pending[head.request_id]
            expired.append(head.request_id)
        return expired

    def take_unfulfillable(self) -> list[tuple[str, str]]:
        """Drop and return ``(request_id, reason)`` for queued requests that no
        registered TaskManager could ever hold (the one that could has left, or the
        request came before any TaskManager registered).

        Scans the queue only after a TaskManager came or left; call it periodically, then
        ``serve_pending`` (a dropped head may have blocked requests that fit now)."""
        if not self._recheck_fit:
            return []
        self._recheck_fit = False
        if not self.fail_unfulfillable or not self._task_managers:
            return []
        dropped: list[tuple[str, str]] = []
        for request_id, request in list(self._pending.items()):
            reason = self.unfulfillable_reason(request.profile)
            if reason is not None:
                del self._pending[request_id]
                self._stale += 1
                dropped.append((request_id, reason))
        self._compact_queue()
        return dropped

    def serve_pending(self) -> list[Fulfilment]:
        """Give queued requests what fits now (the methods that free resources do this
        themselves)."""
        return self._serve_pending()

    def release_slot(self, allocation_id: str) -> list[Fulfilment]:
        """Free the slot held by ``allocation_id`` and serve queued requests.

        Returns the ``(request_id, slot)`` pairs fulfilled as a result. Releasing an
        unknown allocation (e.g. one lost with its TaskManager) does nothing.
        """
        location = self._allocations.pop(allocation_id, None)
        if location is None:
            return []
        tm_id, index = location
        tm = self._task_managers[tm_id]
        old_free = tm.free_count
        tm.release(index)
        self._update_free_count(tm_id, old_free)
        return self._serve_pending()

    # ---------------------------------------------------------------- internals

    def _serve_pending(self) -> list[Fulfilment]:
        fulfilled: list[Fulfilment] = []
        queue = self._queue
        while queue:
            request = queue[0]
            if self._pending.get(request.request_id) is not request:
                queue.popleft()
                self._stale -= 1
                continue
            # The common case (nothing specified, no default slot free) stops in O(1).
            if request.profile.is_unknown and self._free_slots == 0:
                break
            choice = self._choose(request)
            if choice is None:
                break  # FIFO: the head waits for room, and so does everyone behind it
            queue.popleft()
            del self._pending[request.request_id]
            fulfilled.append((request.request_id, self._allocate(request, *choice)))
        return fulfilled

    def _allocate(self, request: _PendingRequest, tm_id: str, index: int) -> PhysicalSlot:
        tm = self._task_managers[tm_id]
        old_free = tm.free_count
        slot = tm.allocate(tm_id, index, request.request_id, request.profile)
        self._allocations[request.request_id] = (tm_id, slot.slot_index)
        self._update_free_count(tm_id, old_free)
        return slot

    def _choose(self, request: _PendingRequest) -> tuple[str, int] | None:
        return self._placement.choose(request.profile, request.preferred_task_managers, request.preferred_hosts)

    def _update_free_count(self, tm_id: str, old: int) -> None:
        """A TaskManager's free count changed from ``old``: the totals and placement follow."""
        new = self._task_managers[tm_id].free_count
        self._free_slots += new - old
        self._placement.free_count_changed(tm_id, old, new)

    def _compact_queue(self) -> None:
        # Without this, a caller that requests and cancels while no slot ever
        # frees up would grow the queue without bound.
        if self._stale > 64 and self._stale > len(self._pending):
            self._queue = deque(r for r in self._queue if self._pending.get(r.request_id) is r)
            self._stale = 0
