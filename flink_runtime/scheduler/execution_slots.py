"""Slots for one job's executions: Flink's ExecutionSlotAllocator.

Executions share slots by key (slot sharing group, co-location group, subtask; see
slot_sharing.py). The first execution of a key without a slot makes one request to
the JobManager's slot pool, carrying the key's resource profile (``SlotProfiles``);
the others wait on it. The allocator tells its caller which
executions a slot (or its loss, or a timeout) concerns; deploying or failing them is
the caller's business.

As Flink's JobMaster slot pool, the job keeps a slot whose subtasks finished (idle, see
idle_slots.py) for ``slot.idle.timeout``: its next subtasks asking for a slot of that
profile take it without a new request, so a continuous job holds its slots between
rounds. A slot goes back to the pool at once when a slot request waits there (this job's
own queued subtasks, or another job's: they get it as before), when what left it did not
finish (a failed or cancelled task may still run there until the TaskManager ends it:
the pool's next allocation id makes the TaskManager refuse a task beside it), and with
every other slot of the job when the job ends.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from flink_runtime.scheduler.idle_slots import IdleSlots
from flink_runtime.scheduler.resource_profile import ResourceProfile
from flink_runtime.scheduler.slot_sharing import SharedSlotManager, SlotKey, SlotProfiles, shared_slot_key

if TYPE_CHECKING:
    from flink_runtime.executiongraph import ExecutionVertex
    from flink_runtime.scheduler.slotpool import PhysicalSlot


def slot_key(vertex: ExecutionVertex) -> SlotKey:
    job_vertex = vertex.job_vertex.job_vertex
    return shared_slot_key(
        job_vertex.slot_sharing_group, job_vertex.co_location_group, job_vertex.id, vertex.subtask_index
    )


class ExecutionSlotAllocator:
    def __init__(
        self,
        job_id: str,
        request_slot: Callable[[str, ResourceProfile], PhysicalSlot | None],
        release_slot: Callable[[str], None],
        cancel_slot_request: Callable[[str], None],
        profiles: SlotProfiles | None = None,
        *,
        idle_timeout: float = 0.0,
        requests_waiting: Callable[[], bool] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """request_slot(request_id, profile) asks the pool; it returns a slot at once when
        one is free, else None and the pool calls back (JobMaster.on_slot_allocated) later.
        profiles: what each shared slot needs (None: every request is UNKNOWN).
        idle_timeout: seconds a slot whose subtasks finished stays with the job
        (slot.idle.timeout; 0: given back at once); requests_waiting(): whether a slot
        request waits in the pool (then a slot is given back at once); clock(): monotonic
        seconds."""
        self._job_id = job_id
        self._request_slot = request_slot
        self._profiles = profiles
        self._release_slot = release_slot
        self._cancel_slot_request = cancel_slot_request
        self._shared = SharedSlotManager()
        self._request_of_key: dict[SlotKey, str] = {}
        self._key_of_request: dict[str, SlotKey] = {}
        self._request_ids = itertools.count()
        self._idle_timeout = idle_timeout
        self._requests_waiting = requests_waiting or (lambda: False)
        self._clock = clock or _monotonic
        self._idle = IdleSlots()
        # Allocations a member left without finishing: its task may still run there.
        self._unclean: set[str] = set()
        # So far: requests made to the pool, and slots the job kept that were taken again.
        self.requests_made = 0
        self.kept_slots_taken = 0

    @property
    def held_slots(self) -> int:
        """Slots the job holds: those its subtasks use, and the idle ones it keeps."""
        return self._shared.allocation_count + len(self._idle)

    @property
    def idle_slots(self) -> int:
        return len(self._idle)

    def idle_allocations(self) -> list[str]:
        """The allocation ids of the idle slots the job keeps."""
        return list(self._idle)

    def declare_usage(self, vertices: Iterable[ExecutionVertex]) -> None:
        """Keep co-located slots alive between a producer finishing and its consumer starting.

        Exchanges are blocking, so a consumer never runs beside its producer: sharing a slot
        only matters for co-location, where the i-th subtasks must meet in one slot. For
        those keys the slot sharing manager is told how many subtasks will still come.
        Every other shared slot goes back to the pool as soon as its subtasks finished, as
        in Flink's pipelined-region scheduling of batch jobs: holding it for a consumer
        that waits on producers still queued for slots deadlocks a job with more subtasks
        than slots, and a failed subtask's retry could not use the finished one's slot.
        """
        counts: dict[SlotKey, int] = {}
        for vertex in vertices:
            if vertex.job_vertex.job_vertex.co_location_group is None:
                continue
            key = slot_key(vertex)
            counts[key] = counts.get(key, 0) + 1
        for key, count in counts.items():
            self._shared.expect(key, count)

    def allocate(self, vertex: ExecutionVertex, execution_id: str) -> str | None:
        """The allocation id to deploy into now, or None: the execution waits for
        `slot_allocated` (a request was made, or one for its key is pending)."""
        key = slot_key(vertex)
        acquired = self._shared.acquire(key, execution_id)
        if acquired.allocation_id is not None or not acquired.request_slot:
            return acquired.allocation_id
        profile = self._profile(key)
        idle = self._idle.take(profile)
        if idle is not None:  # a slot the job kept: no request
            self.kept_slots_taken += 1
            self._shared.bind(key, idle)
            return idle
        self.requests_made += 1
        request_id = f"{self._job_id}/{key[0]}/{key[1]}/{next(self._request_ids)}"
        self._request_of_key[key] = request_id
        self._key_of_request[request_id] = key
        slot = self._request_slot(request_id, profile)
        if slot is None:
            return None
        waiting = self.slot_allocated(request_id, slot)
        return slot.allocation_id if waiting is not None and execution_id in waiting else None

    def slot_allocated(self, request_id: str, slot: PhysicalSlot) -> list[str] | None:
        """The executions waiting on this request, now bound to the slot; None when the
        request is not (or no longer) this job's, and the caller gives the slot back."""
        key = self._key_of_request.pop(request_id, None)
        if key is None:
            return None
        del self._request_of_key[key]
        assert slot.allocation_id is not None
        return self._shared.bind(key, slot.allocation_id)

    def request_timed_out(self, request_id: str) -> list[str]:
        """The executions that waited on a request the pool could not fulfil."""
        key = self._key_of_request.pop(request_id, None)
        if key is None:
            return []
        self._request_of_key.pop(key, None)
        return self._shared.members_of(key)

    def allocation_lost(self, allocation_id: str) -> list[str]:
        """The executions that ran in a slot whose TaskManager is gone (none for an idle one,
        which is forgotten: the next subtask asks for a slot elsewhere)."""
        self._idle.drop(allocation_id)
        self._unclean.discard(allocation_id)
        return self._shared.drop_allocation(allocation_id)

    def release(self, vertex: ExecutionVertex, execution_id: str, finished: bool = False) -> None:
        """An execution ended (`finished`: FINISHED): its slot is free once nothing else
        uses it, and the job keeps it idle or gives it back (see the module docstring)."""
        key = slot_key(vertex)
        if not finished:
            held = self._shared.allocation_of(key)
            if held is not None:
                self._unclean.add(held)
        allocation_id = self._shared.release(key, execution_id)
        if allocation_id is not None:
            if allocation_id in self._unclean or self._idle_timeout <= 0 or self._requests_waiting():
                self._unclean.discard(allocation_id)
                self._release_slot(allocation_id)
            else:
                self._idle.keep(allocation_id, self._profile(key), self._clock())
        elif key in self._request_of_key and not self._shared.is_pending(key):
            request_id = self._request_of_key.pop(key)
            self._key_of_request.pop(request_id, None)
            self._cancel_slot_request(request_id)

    def release_all(self, vertices: Iterable[ExecutionVertex]) -> None:
        """The job is terminal: cancel every request and give back every slot it holds."""
        for key in list(self._request_of_key):
            self._cancel_slot_request(self._request_of_key.pop(key))
        self._key_of_request.clear()
        for key in {slot_key(vertex) for vertex in vertices}:
            allocation_id = self._shared.expect(key, 0)
            if allocation_id is not None:
                self._release_slot(allocation_id)
        self._unclean.clear()
        for allocation_id in self._idle.take_all():
            self._release_slot(allocation_id)

    def release_idle(self, now: float, everything: bool = False) -> int:
        """Give back the slots idle for slot.idle.timeout at `now` (`everything`: all idle
        ones, as a slot request waits in the pool); how many went back."""
        released = self._idle.take_all() if everything else self._idle.expired(now, self._idle_timeout)
        for allocation_id in released:
            self._release_slot(allocation_id)
        return len(released)

    def _profile(self, key: SlotKey) -> ResourceProfile:
        return self._profiles.profile(key) if self._profiles is not None else ResourceProfile.UNKNOWN


def _monotonic() -> float:
    # Looked up at each call, not bound once: the simulator runs on a clock of its own.
    return time.monotonic()
