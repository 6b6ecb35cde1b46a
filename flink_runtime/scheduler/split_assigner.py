"""Input splits, handed to source subtasks one at a time.

A source vertex's input is cut into *input splits* (a file block, a key range,
...) when the job starts. Instead of dealing them out up front, Flink lets each
source subtask ask for the next split when it is done with the previous one
(``RequestNextInputSplit``), so fast slots take more work and a slow or
late-starting slot does not hold the job back.

Flink's ``LocatableInputSplitAssigner`` also considers *where* a split's data
lives: a subtask asking from host H first gets a split stored on H (a local
read). Only when H has none left does it get a remote split, and then one stored
on as few hosts as possible, because a split stored on many hosts is likely to
be read locally by one of them later, while a split stored nowhere (or on one
busy host) is best taken now. ``DefaultInputSplitAssigner`` is the plain FIFO
version, without locality.

Among equally placed splits the locatable assigner hands out the largest first (by
the ``bytes`` a split's payload declares, if any): with subtasks pulling as they
finish, largest-first ends them closest together (LPT scheduling), where a large
split handed out last keeps one subtask busy while the others idle.

When a subtask fails, the splits it had been given are returned
(``return_input_splits``) and handed out again to whoever asks next.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Protocol

from flink_runtime.io.splits import InputSplit

__all__ = [
    "InputSplit",
    "InputSplitAssigner",
    "LocatableInputSplitAssigner",
    "DefaultInputSplitAssigner",
]


class InputSplitAssigner(Protocol):
    """What the JobManager needs from any assigner."""

    def get_next_input_split(self, host: str | None, task_index: int) -> InputSplit | None: ...

    def return_input_splits(self, splits: Iterable[InputSplit], task_index: int) -> None: ...

    @property
    def unassigned_count(self) -> int: ...


def split_bytes(split: InputSplit) -> int:
    """The size a split's payload declares (`{"bytes": n, ...}`), else 0."""
    payload = split.payload
    size = payload.get("bytes", 0) if isinstance(payload, dict) else 0
    return size if isinstance(size, int) else 0


def _normalise_host(host: str) -> str:
    # Host names are case-insensitive; Flink lower-cases them before comparing.
    return host.lower()


class _AssignmentTracking:
    """Which splits are out, and with which task: shared by both assigners."""

    def __init__(self, splits: Iterable[InputSplit]) -> None:
        self._splits: dict[int, InputSplit] = {}
        for split in splits:
            if split.split_number in self._splits:
                raise ValueError(f"duplicate input split number {split.split_number}")
            self._splits[split.split_number] = split
        # split number -> task index it was handed to.
        self._assigned_to: dict[int, int] = {}

    @property
    def unassigned_count(self) -> int:
        return len(self._splits) - len(self._assigned_to)

    @property
    def total_count(self) -> int:
        return len(self._splits)

    def assigned_splits(self, task_index: int) -> list[InputSplit]:
        """The splits currently held by one task, e.g. to return on its failure.

        A scan of the assigned splits: meant for the (rare) failover path.
        """
        return [self._splits[n] for n, task in self._assigned_to.items() if task == task_index]

    def _mark_assigned(self, split_number: int, task_index: int) -> InputSplit:
        self._assigned_to[split_number] = task_index
        return self._splits[split_number]

    def _take_back(self, splits: Iterable[InputSplit]) -> list[InputSplit]:
        """Mark returned splits unassigned; returns those that really were out."""
        taken: list[InputSplit] = []
        for split in splits:
            known = self._splits.get(split.split_number)
            if known is None:
                raise ValueError(f"unknown input split number {split.split_number}")
            # Returning a split twice must not let it be handed out twice.
            if self._assigned_to.pop(split.split_number, None) is not None:
                taken.append(known)
        return taken


class LocatableInputSplitAssigner(_AssignmentTracking):
    """Hands out splits local to the asking host first (Flink's locality rule).

    Splits are indexed by host and by number of hosts, so each call is O(1)
    amortised. Index entries of already assigned splits are skipped when met
    (lazy deletion): a split stored on k hosts sits in k+1 queues, and each
    entry is popped at most once.
    """

    def __init__(self, splits: Iterable[InputSplit]) -> None:
        super().__init__(splits)
        self.local_assignments = 0
        self.remote_assignments = 0
        self._hosts_of: dict[int, tuple[str, ...]] = {}
        self._by_host: dict[str, deque[int]] = {}
        # number of hosts -> splits with that many hosts, for the remote pick.
        self._by_host_count: dict[int, deque[int]] = {}
        order = list(self._splits.items())
        if any(split_bytes(split) for split in self._splits.values()):
            order.sort(key=lambda item: -split_bytes(item[1]))  # stable: equal sizes keep their order
        for number, split in order:
            hosts = tuple(dict.fromkeys(_normalise_host(h) for h in split.hosts))
            self._hosts_of[number] = hosts
            self._index(number)
        # Host counts never change (returned splits keep their hosts), so the
        # order to search buckets in is fixed; there are only a few buckets.
        self._host_counts = sorted(self._by_host_count)

    def get_next_input_split(self, host: str | None, task_index: int) -> InputSplit | None:
        """The next split for task ``task_index`` running on ``host``, or None when done."""
        if host is not None:
            local = self._by_host.get(_normalise_host(host))
            if local:
                number = self._pop_unassigned(local)
                if number is not None:
                    self.local_assignments += 1
                    return self._mark_assigned(number, task_index)
        for count in self._host_counts:
            number = self._pop_unassigned(self._by_host_count[count])
            if number is not None:
                self.remote_assignments += 1
                return self._mark_assigned(number, task_index)
        return None

    def return_input_splits(self, splits: Iterable[InputSplit], task_index: int) -> None:
        """Put back the splits a failed task had; they are handed out again."""
        for split in self._take_back(splits):
            # Older index entries of the split may still be queued too; the
            # duplicates are harmless (skipped once the split is assigned).
            self._index(split.split_number)

    def _index(self, number: int) -> None:
        hosts = self._hosts_of[number]
        for host in hosts:
            self._by_host.setdefault(host, deque()).append(number)
        self._by_host_count.setdefault(len(hosts), deque()).append(number)

    def _pop_unassigned(self, queue: deque[int]) -> int | None:
        while queue:
            number = queue.popleft()
            if number not in self._assigned_to:
                return number
        return None


class DefaultInputSplitAssigner(_AssignmentTracking):
    """Hands out splits in order, ignoring where they are stored."""

    def __init__(self, splits: Iterable[InputSplit]) -> None:
        super().__init__(splits)
        self._queue: deque[int] = deque(self._splits)

    def get_next_input_split(self, host: str | None, task_index: int) -> InputSplit | None:
        """The next split in order, or None when all are out; ``host`` is ignored."""
        if not self._queue:
            return None
        return self._mark_assigned(self._queue.popleft(), task_index)

    def return_input_splits(self, splits: Iterable[InputSplit], task_index: int) -> None:
        """Put back the splits a failed task had; they are handed out again."""
        self._queue.extend(split.split_number for split in self._take_back(splits))
