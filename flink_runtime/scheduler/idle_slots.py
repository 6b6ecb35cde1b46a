"""The slots a job holds and no subtask of it uses: Flink's JobMaster slot pool keeps them.

In Flink a JobMaster's slot pool keeps every slot it was given while the job runs: a
slot whose subtasks finished is *idle* (free in the job's pool, still allocated to the
job at its TaskManager), the job's next subtask asking for a slot of that profile
takes it without a new request to the ResourceManager, and an idle slot is given back
to its TaskManager only after ``slot.idle.timeout``. That is why a Flink streaming job
holds its slots while it waits for input; here a continuous job waits between rounds
(jobmanager/rounds.py), and its next round is deployed into the slots it kept.

Pure bookkeeping on allocation ids, with time passed in: the job's
ExecutionSlotAllocator (execution_slots.py) decides when a slot goes idle and asks
here for one to reuse; the caller gives back what ``expired`` / ``take_all`` return.
"""

from __future__ import annotations

from collections.abc import Iterator

from flink_runtime.scheduler.resource_profile import ResourceProfile

__all__ = ["IdleSlots"]


class IdleSlots:
    """Idle allocations of one job by the profile they were requested with (an UNKNOWN
    request's slot serves UNKNOWN requests only, a profile's slot that same profile: a
    dynamic slot is carved to its request's size), each with when it went idle."""

    def __init__(self) -> None:
        # profile -> allocation id -> idle since; dicts keep insertion order, so the slot
        # idle longest comes first (the one expiring first is reused first: fewer expire).
        self._by_profile: dict[ResourceProfile, dict[str, float]] = {}
        self._profile_of: dict[str, ResourceProfile] = {}

    def __len__(self) -> int:
        return len(self._profile_of)

    def __contains__(self, allocation_id: str) -> bool:
        return allocation_id in self._profile_of

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._profile_of))

    def keep(self, allocation_id: str, profile: ResourceProfile, now: float) -> None:
        """The allocation's subtasks ended: the job keeps it, idle since ``now``."""
        if allocation_id in self._profile_of:
            raise ValueError(f"allocation {allocation_id!r} is already idle")
        self._profile_of[allocation_id] = profile
        self._by_profile.setdefault(profile, {})[allocation_id] = now

    def take(self, profile: ResourceProfile) -> str | None:
        """An idle allocation requested with ``profile``, no longer idle; None if none."""
        idle = self._by_profile.get(profile)
        if not idle:
            return None
        allocation_id = next(iter(idle))
        self.drop(allocation_id)
        return allocation_id

    def drop(self, allocation_id: str) -> bool:
        """Forget an allocation (its TaskManager is gone); False if it was not idle."""
        profile = self._profile_of.pop(allocation_id, None)
        if profile is None:
            return False
        idle = self._by_profile[profile]
        del idle[allocation_id]
        if not idle:
            del self._by_profile[profile]
        return True

    def expired(self, now: float, timeout: float) -> list[str]:
        """Drop and return the allocations idle for ``timeout`` or longer at ``now``."""
        expired = [
            allocation_id
            for idle in self._by_profile.values()
            for allocation_id, since in idle.items()
            if now - since >= timeout
        ]
        for allocation_id in expired:
            self.drop(allocation_id)
        return expired

    def take_all(self) -> list[str]:
        """Drop and return every idle allocation (the job ended, or another job waits)."""
        allocation_ids = list(self._profile_of)
        self._by_profile.clear()
        self._profile_of.clear()
        return allocation_ids
