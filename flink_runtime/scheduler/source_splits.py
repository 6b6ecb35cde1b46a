"""Input splits of a job's source vertices: who gets which, and which are done.

Flink's JobMaster hands splits out one at a time (RequestNextInputSplit), preferring
the requesting host. Here each source vertex also records which splits are completed
(their output committed, by which subtask) so that no attempt, restart or recovery
ever does one twice, and which splits each live attempt holds so that a failed
attempt's go back to the assigner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from flink_runtime.io.splits import InputSplit
from flink_runtime.scheduler.split_assigner import LocatableInputSplitAssigner


@dataclass
class SplitProgress:
    # split number -> the subtask that completed it (whose partition holds its chunk)
    completed: dict[int, int] = field(default_factory=dict)
    assignments: int = 0
    # Splits done by an attempt that finished without reporting each split (its output is
    # committed as a whole when it finishes): counted as done for progress (REST, the
    # dashboard), but not skipped by a restart, which reruns such an attempt whole.
    finished: set[int] = field(default_factory=set)

    def done(self) -> int:
        return len(self.finished | self.completed.keys())


class SourceSplits:
    def __init__(self) -> None:
        self._assigners: dict[str, LocatableInputSplitAssigner] = {}
        # The splits each source vertex was given, for restarts (which skip completed ones).
        self._all_splits: dict[str, list[InputSplit]] = {}
        self.progress: dict[str, SplitProgress] = {}
        # Per attempt: the splits handed to it that it has not reported completed. A failed
        # attempt's go back to the assigner, all of them: an invokable that commits its
        # output only when it finishes (not per split) loses every split it was given.
        self._inflight: dict[str, list[InputSplit]] = {}

    def start(self, splits: Mapping[str, list[InputSplit]]) -> None:
        """Source vertex id -> the splits prepared for it."""
        self._all_splits.update({vertex_id: list(vertex_splits) for vertex_id, vertex_splits in splits.items()})
        self._assigners.update({v: LocatableInputSplitAssigner(list(s)) for v, s in splits.items()})

    def total(self) -> dict[str, int]:
        """How many input splits each source vertex was prepared with."""
        return {
            vertex_id: len(splits) for vertex_id, splits in self._all_splits.items() if vertex_id in self._assigners
        }

    def completed_by(self, vertex_id: str, subtask_index: int) -> list[int]:
        progress = self.progress.get(vertex_id)
        return sorted(n for n, s in progress.completed.items() if s == subtask_index) if progress is not None else []

    def next_split(
        self,
        vertex_id: str,
        execution_id: str,
        subtask_index: int,
        host: str | None,
        completed_split: int | None,
        stopping: bool,
    ) -> InputSplit | None:
        """Record `completed_split` as done by this attempt, then hand it its next split:
        none once a stop began (in-flight splits finish, no new ones start)."""
        progress = self.progress.setdefault(vertex_id, SplitProgress())
        inflight = self._inflight.setdefault(execution_id, [])
        if completed_split is not None:
            progress.completed[completed_split] = subtask_index
            inflight[:] = [split for split in inflight if split.split_number != completed_split]
        assigner = self._assigners.get(vertex_id)
        split = assigner.get_next_input_split(host, subtask_index) if assigner and not stopping else None
        if split is not None:
            progress.assignments += 1
            inflight.append(split)
        return split

    def attempt_finished(self, execution_id: str, vertex_id: str | None = None) -> None:
        """Every split it held is in its committed output (and counts as done)."""
        splits = self._inflight.pop(execution_id, None)
        if splits and vertex_id is not None:
            self.progress.setdefault(vertex_id, SplitProgress()).finished.update(s.split_number for s in splits)

    def attempt_stopped(self, vertex_id: str, execution_id: str, subtask_index: int) -> None:
        """An attempt ended without finishing: its uncompleted splits are handed out again."""
        splits = self._inflight.pop(execution_id, None)
        assigner = self._assigners.get(vertex_id)
        if splits and assigner is not None:
            assigner.return_input_splits(splits, subtask_index)

    def forget_completed(self, vertex_id: str, subtask_index: int) -> list[int]:
        """The splits a subtask completed are lost with its partition (its TaskManager is
        gone): they are handed out again, and its next attempt starts without them."""
        progress = self.progress.get(vertex_id)
        assigner = self._assigners.get(vertex_id)
        if progress is None:
            return []
        lost = sorted(n for n, s in progress.completed.items() if s == subtask_index)
        for number in lost:
            del progress.completed[number]
        if assigner is not None and lost:
            by_number = {split.split_number: split for split in self._all_splits.get(vertex_id, [])}
            assigner.return_input_splits([by_number[n] for n in lost if n in by_number], subtask_index)
        return lost

    def restart(self) -> None:
        """The whole job restarts: every split not completed is handed out again."""
        self._assigners = {
            vertex_id: LocatableInputSplitAssigner(
                [
                    split
                    for split in self._all_splits.get(vertex_id, [])
                    if split.split_number not in self.progress.get(vertex_id, SplitProgress()).completed
                ]
            )
            for vertex_id in self._assigners
        }
        for progress in self.progress.values():
            progress.finished.clear()  # those attempts run again
        self._inflight.clear()

    def new_round(self, splits: Mapping[str, list[InputSplit]]) -> None:
        """A new round over new input: progress starts from nothing."""
        self.progress = {}
        self._inflight.clear()
        self._assigners, self._all_splits = {}, {}
        self.start(splits)
