"""The SlotPool: the JobManager's view of the TaskManager slots it may deploy into.

In Flink a TaskManager offers a fixed number of *task slots*; a slot is the unit
of scheduling: one slot runs one pipeline of subtasks (see ``slot_sharing``). The
JobManager's SlotPool holds the slots offered to it and serves *slot requests*
from the scheduler:

* a request is served at once if a slot is free, otherwise it waits in a FIFO
  queue and is served when a slot is released or a TaskManager registers;
* the scheduler may name preferred TaskManagers (where the execution's inputs
  were produced) and preferred hosts (where its input split lives); with no
  preference met, the slot comes from the TaskManager with most free slots, so
  load spreads over the cluster instead of filling one machine first;
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

Operations are O(1) or O(log n) amortised: a job may queue 10,000 requests
against a handful of slots, so nothing scans the queue or all TaskManagers.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

__all__ = ["PhysicalSlot", "SlotOffer", "SlotPool", "Fulfilment"]


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


# Flink's name for a slot as the TaskManager offers it to the JobManager. The
# data is the same, so one type serves both roles.
SlotOffer = PhysicalSlot

# (request_id, slot): a queued request that has just been given a slot.
Fulfilment = tuple[str, PhysicalSlot]


@dataclass(slots=True)
class _TaskManagerSlots:
    host: str
    slots: list[PhysicalSlot]
    # Min-heap of free slot indices: slots fill from index 0 up, which keeps
    # placement deterministic and easy to read in logs and tests.
    free: list[int]
    # Slots held by tasks the pool never allocated (an earlier registration's): neither
    # free nor allocated here until the TaskManager reports them vacated.
    occupied: set[int] = field(default_factory=set)


@dataclass(slots=True, eq=False)
class _PendingRequest:
    request_id: str
    requested_at: float
    preferred_task_managers: tuple[str, ...] = field(default=())
    preferred_hosts: tuple[str, ...] = field(default=())


class SlotPool:
    """Slots offered by TaskManagers, and the slot requests waiting for them.

    Every method that can hand out slots to *queued* requests
    (``release_slot``, ``add_task_manager``, ``slots_vacated``) returns the list of
    ``(request_id, slot)`` fulfilments it made, so the caller learns about
    every fulfilment exactly once and can deploy the waiting executions.
    """

    def __init__(self) -> None:
        self._task_managers: dict[str, _TaskManagerSlots] = {}
        # host -> TaskManagers on it (dicts as ordered sets).
        self._task_managers_by_host: dict[str, dict[str, None]] = {}
        # free-slot count -> TaskManagers with exactly that many free slots
        # (only counts > 0). With ``_max_free`` this finds "the TaskManager with
        # most free slots" in O(1): counts only move by one per allocation.
        self._by_free_count: dict[int, dict[str, None]] = {}
        self._max_free = 0
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

    # ------------------------------------------------------------------ queries

    @property
    def total_slots(self) -> int:
        return self._total_slots

    @property
    def free_slots(self) -> int:
        return self._free_slots

    @property
    def allocated_slots(self) -> int:
        """Slots that are not free: held by an allocation of this pool, or occupied by
        a task of an earlier registration (``occupied_slots``); free + allocated == total."""
        return len(self._allocations) + self._occupied_slots

    @property
    def occupied_slots(self) -> int:
        """Slots held by tasks of an earlier registration, not yet reported vacated."""
        return self._occupied_slots

    @property
    def pending_requests(self) -> int:
        """Number of requests waiting for a slot."""
        return len(self._pending)

    @property
    def task_managers(self) -> list[str]:
        return list(self._task_managers)

    def has_task_manager(self, tm_id: str) -> bool:
        return tm_id in self._task_managers

    def is_pending(self, request_id: str) -> bool:
        return request_id in self._pending

    def free_slots_of(self, tm_id: str) -> int:
        """Free slots of one TaskManager; KeyError if it is not registered."""
        return len(self._task_managers[tm_id].free)

    def occupied_slots_of(self, tm_id: str) -> list[int]:
        """Indices of one TaskManager's slots held by an earlier registration's tasks;
        KeyError if it is not registered."""
        return sorted(self._task_managers[tm_id].occupied)

    def slots_of(self, tm_id: str) -> list[PhysicalSlot]:
        """All slots of one TaskManager by index; KeyError if it is not registered."""
        return list(self._task_managers[tm_id].slots)

    def slot_of(self, allocation_id: str) -> PhysicalSlot | None:
        """The slot an allocation occupies, or None if it holds none (any more)."""
        location = self._allocations.get(allocation_id)
        if location is None:
            return None
        tm_id, index = location
        return self._task_managers[tm_id].slots[index]

    # ----------------------------------------------------------- task managers

    def add_task_manager(self, tm_id: str, host: str, num_slots: int, occupied: Iterable[int] = ()) -> list[Fulfilment]:
        """Register a TaskManager's slots; queued requests take the free ones at once.

        ``occupied``: indices of slots still held by tasks of an earlier registration;
        they stay unavailable until ``slots_vacated`` frees them (indices out of range
        are ignored: such a slot does not exist here).

        Returns the ``(request_id, slot)`` pairs fulfilled by the new slots.
        A TaskManager id may be registered once; a restarted TaskManager must
        be removed first (its old allocations are gone with it).
        """
        if tm_id in self._task_managers:
            raise ValueError(f"TaskManager {tm_id!r} is already registered")
        if num_slots < 0:
            raise ValueError(f"num_slots must be >= 0, got {num_slots}")
        held = {index for index in occupied if 0 <= index < num_slots}
        free = [index for index in range(num_slots) if index not in held]
        self._task_managers[tm_id] = _TaskManagerSlots(
            host=host,
            slots=[PhysicalSlot(tm_id, index, host) for index in range(num_slots)],
            free=free,  # an ascending list is already a heap
            occupied=held,
        )
        self._task_managers_by_host.setdefault(host, {})[tm_id] = None
        self._total_slots += num_slots
        self._free_slots += len(free)
        self._occupied_slots += len(held)
        if num_slots:
            self._slotless_since = None
        self._move_free_count(tm_id, 0, len(free))
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
        vacated = tm.occupied.difference(still_occupied)
        if not vacated:
            return []
        tm.occupied -= vacated
        old_free = len(tm.free)
        for index in vacated:
            heapq.heappush(tm.free, index)
        self._occupied_slots -= len(vacated)
        self._free_slots += len(vacated)
        self._move_free_count(tm_id, old_free, len(tm.free))
        return self._serve_pending()

    def remove_task_manager(self, tm_id: str) -> list[str]:
        """Forget a (lost or departed) TaskManager and all its slots.

        Returns the allocation ids that were on it: the caller fails those
        executions. Unknown ids are ignored (a TaskManager may be reported lost
        by heartbeat and by its own disconnect), returning [].
        """
        tm = self._task_managers.pop(tm_id, None)
        if tm is None:
            return []
        lost = [slot.allocation_id for slot in tm.slots if slot.allocation_id is not None]
        for allocation_id in lost:
            del self._allocations[allocation_id]
        on_host = self._task_managers_by_host[tm.host]
        del on_host[tm_id]
        if not on_host:
            del self._task_managers_by_host[tm.host]
        self._move_free_count(tm_id, len(tm.free), 0)
        self._total_slots -= len(tm.slots)
        self._free_slots -= len(tm.free)
        self._occupied_slots -= len(tm.occupied)
        return lost

    # ---------------------------------------------------------------- requests

    def request_slot(
        self,
        request_id: str,
        now: float,
        preferred_hosts: Iterable[str] = (),
        preferred_task_managers: Iterable[str] = (),
    ) -> PhysicalSlot | None:
        """Allocate a slot for ``request_id`` now, or queue the request.

        Preference order: the first listed TaskManager with a free slot, then the
        TaskManager with most free slots on the first listed host that has any,
        then the TaskManager with most free slots overall. Preferences are soft:
        a request is never held back waiting for a preferred slot, as in Flink.

        Returns the allocated slot, or None if the request was queued; a queued
        request is later reported by ``release_slot`` / ``add_task_manager``,
        or dropped by ``cancel_request`` / ``expire_requests``.
        """
        if request_id in self._pending or request_id in self._allocations:
            raise ValueError(f"slot request {request_id!r} is already pending or allocated")
        request = _PendingRequest(request_id, now, tuple(preferred_task_managers), tuple(preferred_hosts))
        # Queued requests are served whenever slots free up, so if a slot is
        # free nobody is waiting and taking it does not jump the queue.
        if self._free_slots > 0:
            return self._allocate(request)
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

    def release_slot(self, allocation_id: str) -> list[Fulfilment]:
        """Free the slot held by ``allocation_id`` and serve queued requests.

        Returns the ``(request_id, slot)`` pairs fulfilled as a result (at most
        one here, but the type matches ``add_task_manager``). Releasing an
        unknown allocation (e.g. one lost with its TaskManager) does nothing.
        """
        location = self._allocations.pop(allocation_id, None)
        if location is None:
            return []
        tm_id, index = location
        tm = self._task_managers[tm_id]
        tm.slots[index] = replace(tm.slots[index], allocation_id=None)
        heapq.heappush(tm.free, index)
        self._free_slots += 1
        self._move_free_count(tm_id, len(tm.free) - 1, len(tm.free))
        return self._serve_pending()

    # ---------------------------------------------------------------- internals

    def _serve_pending(self) -> list[Fulfilment]:
        fulfilled: list[Fulfilment] = []
        queue = self._queue
        while self._free_slots > 0 and queue:
            request = queue.popleft()
            if self._pending.get(request.request_id) is not request:
                self._stale -= 1
                continue
            del self._pending[request.request_id]
            fulfilled.append((request.request_id, self._allocate(request)))
        return fulfilled

    def _allocate(self, request: _PendingRequest) -> PhysicalSlot:
        tm_id = self._choose_task_manager(request)
        tm = self._task_managers[tm_id]
        index = heapq.heappop(tm.free)
        slot = replace(tm.slots[index], allocation_id=request.request_id)
        tm.slots[index] = slot
        self._allocations[request.request_id] = (tm_id, index)
        self._free_slots -= 1
        self._move_free_count(tm_id, len(tm.free) + 1, len(tm.free))
        return slot

    def _choose_task_manager(self, request: _PendingRequest) -> str:
        """The TaskManager to allocate from; requires a free slot somewhere."""
        for tm_id in request.preferred_task_managers:
            tm = self._task_managers.get(tm_id)
            if tm is not None and tm.free:
                return tm_id
        for host in request.preferred_hosts:
            best: str | None = None
            best_free = 0
            # A host runs few TaskManagers, so a scan here is cheap.
            for tm_id in self._task_managers_by_host.get(host, ()):
                free = len(self._task_managers[tm_id].free)
                if free > best_free:
                    best, best_free = tm_id, free
            if best is not None:
                return best
        # Insertion order within a bucket makes equally loaded TaskManagers
        # take turns, which spreads consecutive requests round-robin.
        return next(iter(self._by_free_count[self._max_free]))

    def _move_free_count(self, tm_id: str, old: int, new: int) -> None:
        if old == new:
            return
        if old > 0:
            bucket = self._by_free_count[old]
            del bucket[tm_id]
            if not bucket:
                del self._by_free_count[old]
        if new > 0:
            self._by_free_count.setdefault(new, {})[tm_id] = None
            self._max_free = max(self._max_free, new)
        # Counts usually move by one, so this walk is short; only removing a
        # large TaskManager makes it longer, bounded by its slot count.
        while self._max_free > 0 and self._max_free not in self._by_free_count:
            self._max_free -= 1

    def _compact_queue(self) -> None:
        # Without this, a caller that requests and cancels while no slot ever
        # frees up would grow the queue without bound.
        if self._stale > 64 and self._stale > len(self._pending):
            self._queue = deque(r for r in self._queue if self._pending.get(r.request_id) is r)
            self._stale = 0
