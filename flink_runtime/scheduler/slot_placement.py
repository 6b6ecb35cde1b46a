"""Where a slot request goes: a TaskManager it prefers (its inputs were produced there),
one on a host it prefers (its input split lives there), else the TaskManager with most
free slots, so load spreads over the cluster instead of filling one machine first.

`SlotPlacement` keeps the indexes that make that choice cheap: TaskManagers by host, and
by their count of free default-sized slots (with the highest count known), so the usual
request (UNKNOWN profile) finds its TaskManager in O(1). The SlotPool owns the
TaskManagers' slots and tells it when one registers, leaves or changes its free count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from flink_runtime.scheduler.resource_profile import ResourceProfile
from flink_runtime.scheduler.taskmanager_slots import TaskManagerSlots


class SlotPlacement:
    def __init__(self, task_managers: Mapping[str, TaskManagerSlots]) -> None:
        self._task_managers = task_managers
        # host -> TaskManagers on it (dicts as ordered sets).
        self._by_host: dict[str, dict[str, None]] = {}
        # free-slot count -> TaskManagers with exactly that many free (default-sized)
        # slots (only counts > 0), and the highest such count.
        self._by_free_count: dict[int, dict[str, None]] = {}
        self._max_free = 0

    def task_manager_added(self, tm_id: str, host: str) -> None:
        self._by_host.setdefault(host, {})[tm_id] = None
        self.free_count_changed(tm_id, 0, self._task_managers[tm_id].free_count)

    def task_manager_removed(self, tm_id: str, host: str, free_count: int) -> None:
        self.free_count_changed(tm_id, free_count, 0)
        on_host = self._by_host[host]
        del on_host[tm_id]
        if not on_host:
            del self._by_host[host]

    def free_count_changed(self, tm_id: str, old: int, new: int) -> None:
        """Move a TaskManager between free-count buckets."""
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

    def choose(
        self, profile: ResourceProfile, preferred_task_managers: Iterable[str], preferred_hosts: Iterable[str]
    ) -> tuple[str, int] | None:
        """The TaskManager and slot index (-1: a new dynamic slot) to allocate from, or
        None when nothing has room for the request now."""
        for tm_id in preferred_task_managers:
            tm = self._task_managers.get(tm_id)
            index = tm.slot_for(profile) if tm is not None else None
            if index is not None:
                return tm_id, index
        for host in preferred_hosts:
            # A host runs few TaskManagers, so a scan here is cheap.
            best = self._most_free(self._by_host.get(host, ()), profile)
            if best is not None:
                return best
        if profile.is_unknown:
            if self._max_free == 0:
                return None
            # Insertion order within a bucket makes equally loaded TaskManagers
            # take turns, which spreads consecutive requests round-robin.
            tm_id = next(iter(self._by_free_count[self._max_free]))
            return tm_id, self._task_managers[tm_id].free[0]
        # A specified profile: scan for room (the most free slots first, then the
        # earliest registered), O(TaskManagers).
        return self._most_free(self._task_managers, profile)

    def _most_free(self, tm_ids: Iterable[str], profile: ResourceProfile) -> tuple[str, int] | None:
        best: tuple[str, int] | None = None
        best_free = -1
        for tm_id in tm_ids:
            tm = self._task_managers[tm_id]
            index = tm.slot_for(profile)
            if index is not None and tm.free_count > best_free:
                best, best_free = (tm_id, index), tm.free_count
        return best
