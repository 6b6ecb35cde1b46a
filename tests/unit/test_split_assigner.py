from __future__ import annotations

import random
import time

import msgspec
import pytest

from flink_runtime.scheduler.split_assigner import (
    DefaultInputSplitAssigner,
    InputSplit,
    LocatableInputSplitAssigner,
)


def test_input_split_round_trips_over_the_wire() -> None:
    split = InputSplit(7, ["host-a"], {"path": "/data/part-7", "start": 0, "length": 128})
    for encode, decode in (
        (msgspec.json.encode, msgspec.json.decode),
        (msgspec.msgpack.encode, msgspec.msgpack.decode),
    ):
        assert decode(encode(split), type=InputSplit) == split
    assert msgspec.json.encode(InputSplit(1)) == b'{"split_number":1}'


def test_local_split_is_preferred() -> None:
    splits = [InputSplit(0, ["a"]), InputSplit(1, ["b"]), InputSplit(2, ["c"])]
    assigner = LocatableInputSplitAssigner(splits)
    assert assigner.get_next_input_split("b", 0) == splits[1]
    assert assigner.get_next_input_split("C", 1) == splits[2]  # case-insensitive
    assert assigner.local_assignments == 2
    assert assigner.remote_assignments == 0
    assert assigner.unassigned_count == 1


def test_remote_fallback_picks_the_least_hosted_split() -> None:
    splits = [
        InputSplit(0, ["a", "b", "c"]),
        InputSplit(1, ["a"]),
        InputSplit(2, ["b", "c"]),
        InputSplit(3, []),
    ]
    assigner = LocatableInputSplitAssigner(splits)
    # "z" has no local splits: first the split stored nowhere, then by host count.
    order = [assigner.get_next_input_split("z", 0) for _ in range(4)]
    assert [s.split_number for s in order if s] == [3, 1, 2, 0]
    assert assigner.get_next_input_split("z", 0) is None
    assert assigner.remote_assignments == 4
    assert assigner.local_assignments == 0


def test_no_host_means_remote() -> None:
    assigner = LocatableInputSplitAssigner([InputSplit(0, ["a"]), InputSplit(1, ["a", "b"])])
    assert assigner.get_next_input_split(None, 0).split_number == 0
    assert assigner.remote_assignments == 1


def test_local_then_remote_when_local_runs_out() -> None:
    splits = [InputSplit(0, ["a"]), InputSplit(1, ["b"]), InputSplit(2, ["a", "b"])]
    assigner = LocatableInputSplitAssigner(splits)
    got = [assigner.get_next_input_split("a", 0) for _ in range(3)]
    assert [s.split_number for s in got if s] == [0, 2, 1]
    assert (assigner.local_assignments, assigner.remote_assignments) == (2, 1)
    # Split 2 was taken by "a", so "b" cannot get it again.
    assert assigner.get_next_input_split("b", 1) is None


def test_duplicate_split_numbers_are_rejected() -> None:
    with pytest.raises(ValueError):
        LocatableInputSplitAssigner([InputSplit(0), InputSplit(0)])
    with pytest.raises(ValueError):
        DefaultInputSplitAssigner([InputSplit(0), InputSplit(0)])


def test_returned_splits_are_handed_out_again() -> None:
    splits = [InputSplit(i, [f"h{i % 2}"]) for i in range(4)]
    assigner = LocatableInputSplitAssigner(splits)
    first = assigner.get_next_input_split("h0", 0)
    second = assigner.get_next_input_split("h0", 0)
    assert first is not None and second is not None
    assert assigner.assigned_splits(0) == [first, second]
    # Task 0 fails: its splits go back (returning one twice changes nothing).
    assigner.return_input_splits(assigner.assigned_splits(0) + [first], 0)
    assert assigner.assigned_splits(0) == []
    assert assigner.unassigned_count == 4
    again = {assigner.get_next_input_split("h0", 1).split_number for _ in range(2)}
    assert again == {first.split_number, second.split_number}
    rest = {assigner.get_next_input_split("h1", 2).split_number for _ in range(2)}
    assert rest == {1, 3}
    assert assigner.get_next_input_split("h0", 1) is None
    with pytest.raises(ValueError):
        assigner.return_input_splits([InputSplit(99)], 0)


def test_every_split_handed_out_exactly_once_across_many_tasks() -> None:
    rng = random.Random(7)
    hosts = [f"host-{i}" for i in range(20)]
    n = 100_000
    splits = [InputSplit(i, rng.sample(hosts, rng.randint(0, 3))) for i in range(n)]
    task_hosts = [rng.choice(hosts + ["elsewhere"]) for _ in range(64)]

    start = time.perf_counter()
    assigner = LocatableInputSplitAssigner(splits)
    handed: list[int] = []
    returned_once = False
    active = list(range(64))
    while active:
        task = rng.choice(active)
        split = assigner.get_next_input_split(task_hosts[task], task)
        if split is None:
            active.remove(task)
            continue
        handed.append(split.split_number)
        if not returned_once and len(handed) == n // 2:
            # One task fails midway; its splits come back.
            back = assigner.assigned_splits(task)
            assigner.return_input_splits(back, task)
            returned = {s.split_number for s in back}
            handed = [h for h in handed if h not in returned]
            returned_once = True
    elapsed = time.perf_counter() - start

    assert sorted(handed) == list(range(n))
    assert assigner.unassigned_count == 0
    assert assigner.local_assignments + assigner.remote_assignments >= n
    # Most splits are read where they are stored.
    assert assigner.local_assignments > assigner.remote_assignments
    assert elapsed < 5.0, f"{n} splits took {elapsed:.2f}s"


def test_default_assigner_is_fifo_and_takes_returns() -> None:
    splits = [InputSplit(i, ["a"]) for i in range(3)]
    assigner = DefaultInputSplitAssigner(splits)
    assert assigner.get_next_input_split("zzz", 0) == splits[0]
    assert assigner.get_next_input_split(None, 1) == splits[1]
    assigner.return_input_splits([splits[0]], 0)
    assert assigner.unassigned_count == 2
    assert [assigner.get_next_input_split("a", 2) for _ in range(3)] == [splits[2], splits[0], None]
    assert assigner.unassigned_count == 0


def test_the_largest_split_goes_first_so_subtasks_end_together() -> None:
    # Pulled as subtasks finish (LPT): two subtasks, sizes 1, 1, 1, 1, 4 in listing order.
    sizes = [1, 1, 1, 1, 4]
    splits = [InputSplit(n, [], {"files": [f"f{n}"], "bytes": size}) for n, size in enumerate(sizes)]
    assigner = LocatableInputSplitAssigner(splits)
    busy_until = [0, 0]
    while True:
        task = busy_until.index(min(busy_until))  # the subtask that is free first asks next
        split = assigner.get_next_input_split(None, task)
        if split is None:
            break
        busy_until[task] += split.payload["bytes"]
    # In listing order one subtask would end at 6 and the other at 2; largest first, both at 4.
    assert busy_until == [4, 4]
    # Splits without a size keep their order.
    plain = LocatableInputSplitAssigner([InputSplit(n) for n in range(3)])
    assert [plain.get_next_input_split(None, 0).split_number for _ in range(3)] == [0, 1, 2]
