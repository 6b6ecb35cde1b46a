"""How a file source's input is cut into splits (operators/spark/io.py: file_splits)."""

from __future__ import annotations

from flink_runtime.io.filesystem import FileStatus
from flink_runtime.operators.spark.io import DEFAULT_SPLIT_SIZE, file_splits

MIB = 1 << 20


def _files(sizes: list[int]) -> list[FileStatus]:
    return [FileStatus(f"/data/part-{n:05d}.txt", size, False) for n, size in enumerate(sizes)]


def _bytes(splits: list) -> list[int]:
    return [split.payload["bytes"] for split in splits]


def test_by_default_each_subtask_reads_one_split_of_even_bytes() -> None:
    # 1 GiB in 100 files, 2 subtasks: one split each, not 9 splits of 128 MiB (5 vs 4).
    files = _files([1024 * MIB // 100] * 100)
    splits = file_splits(files, DEFAULT_SPLIT_SIZE, parallelism=2)
    assert len(splits) == 2
    assert _bytes(splits) == [sum(f.size for f in files) // 2] * 2
    # Every file once, in listing order, numbered from 0.
    assert [path for split in splits for path in split.payload["files"]] == [f.path for f in files]
    assert [split.split_number for split in splits] == [0, 1]


def test_a_split_size_cuts_even_splits_without_a_small_leftover() -> None:
    files = _files([10 * MIB] * 100)  # 1000 MiB
    splits = file_splits(files, 128 * MIB, parallelism=2)
    # ceil(1000 / 128) = 8 splits of 120-130 MiB: 4 per subtask, none of 104 MiB left over.
    assert len(splits) == 8
    assert min(_bytes(splits)) >= 120 * MIB and max(_bytes(splits)) <= 130 * MIB


def test_uneven_files_still_give_even_splits_within_a_file() -> None:
    sizes = [50, 1, 1, 1, 30, 2, 2, 5, 40, 3, 3, 12, 1, 1, 20, 8]
    splits = file_splits(_files([size * MIB for size in sizes]), DEFAULT_SPLIT_SIZE, parallelism=3)
    assert len(splits) == 3
    assert max(_bytes(splits)) - min(_bytes(splits)) <= max(sizes) * MIB


def test_small_split_size_is_one_file_per_split_and_fewer_files_than_subtasks() -> None:
    files = _files([100, 0, 200, 300])
    assert [split.payload["files"] for split in file_splits(files, 1, parallelism=2)] == [
        [files[0].path],
        [files[1].path],
        [files[2].path],
        [files[3].path],
    ]
    assert len(file_splits(files[:1], DEFAULT_SPLIT_SIZE, parallelism=4)) == 1
    assert file_splits([], DEFAULT_SPLIT_SIZE, parallelism=2) == []
