"""SourceSplits: no split is done twice, whatever fails, restarts or stops."""

from __future__ import annotations

from flink_runtime.io.splits import InputSplit
from flink_runtime.scheduler.source_splits import SourceSplits


def splits(n: int) -> list[InputSplit]:
    return [InputSplit(split_number=i) for i in range(n)]


def drain(source: SourceSplits, attempt: str, subtask: int = 0) -> list[int]:
    """Take every split one at a time, reporting each as completed when asking for the next."""
    taken, completed = [], None
    while (split := source.next_split("src", attempt, subtask, None, completed, stopping=False)) is not None:
        taken.append(split.split_number)
        completed = split.split_number
    return taken


def test_a_failed_attempt_gives_back_the_splits_it_had_not_completed() -> None:
    source = SourceSplits()
    source.start({"src": splits(3)})
    first = source.next_split("src", "a1", 0, None, None, stopping=False)
    source.next_split("src", "a1", 0, None, first.split_number, stopping=False)
    source.attempt_stopped("src", "a1", 0)
    assert sorted(drain(source, "a2")) == sorted({0, 1, 2} - {first.split_number})
    assert source.progress["src"].completed.keys() == {0, 1, 2}


def test_a_restart_hands_out_only_what_no_attempt_completed() -> None:
    source = SourceSplits()
    source.start({"src": splits(4)})
    done = source.next_split("src", "a1", 1, None, None, stopping=False)
    source.next_split("src", "a1", 1, None, done.split_number, stopping=False)
    source.restart()
    assert sorted(drain(source, "a2")) == sorted(set(range(4)) - {done.split_number})
    assert source.completed_by("src", 1) == [done.split_number]
    assert source.total() == {"src": 4}


def test_a_stop_hands_out_nothing_new_but_records_what_completed() -> None:
    source = SourceSplits()
    source.start({"src": splits(2)})
    split = source.next_split("src", "a1", 0, None, None, stopping=False)
    assert source.next_split("src", "a1", 0, None, split.split_number, stopping=True) is None
    assert source.progress["src"].completed == {split.split_number: 0}
    assert source.progress["src"].assignments == 1


def test_a_new_round_starts_from_its_own_splits() -> None:
    source = SourceSplits()
    source.start({"src": splits(2)})
    drain(source, "a1")
    source.new_round({"src": splits(1)})
    assert source.total() == {"src": 1} and source.progress == {}
    assert drain(source, "a2") == [0]


def test_a_lost_partition_gives_its_completed_splits_back_to_the_same_subtask() -> None:
    """A producer's TaskManager died after it finished: what it completed is read again,
    and the new attempt of that subtask starts from nothing."""
    source = SourceSplits()
    source.start({"src": splits(4)})
    first = drain(source, "a1", subtask=0)
    source.attempt_finished("a1")
    assert source.completed_by("src", 0) == sorted(first)
    assert source.forget_completed("src", 0) == sorted(first)
    assert source.completed_by("src", 0) == []
    assert sorted(drain(source, "a2", subtask=0)) == sorted(first)
    assert source.forget_completed("src", 3) == []  # a subtask that completed nothing loses nothing
