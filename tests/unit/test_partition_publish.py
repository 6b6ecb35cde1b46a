"""Publishing mode 'overwrite_partitions' (operators/spark/partitioned_sink.py) with the
JobManager dying at the worst moments: between moving a partition's old directory away
and moving the new one in, and before the manifest is written. Real files and renames;
the "crash" is a filesystem whose rename stops the publish after N renames."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from flink_runtime.io.filesystem import LocalFileSystem, join
from flink_runtime.operators.spark import io, partitioned_sink
from flink_runtime.security.paths import AllowedDirectories

JOB = "0123456789abcdef0123456789abcdef"


class Crash(BaseException):
    """The JobManager process ends here (nothing after it runs)."""


class CrashingFileSystem(LocalFileSystem):
    def __init__(self, renames_before_crash: int) -> None:
        self.left = renames_before_crash

    def rename(self, source: str, target: str) -> None:
        if self.left == 0:
            raise Crash(f"crashed before renaming {source}")
        self.left -= 1
        super().rename(source, target)


def hashes(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file() and "_flink_staging" not in p.parts and p.name != "_SUCCESS"
    }


@pytest.fixture
def sink(tmp_path: Path) -> dict:
    """Published days 1-3 (one file each); the job staged new days 2 and 3 (two chunks)."""
    out = tmp_path / "out"
    for day in (1, 2, 3):
        (out / f"day={day}").mkdir(parents=True)
        (out / f"day={day}" / "subtask-0-old.json").write_text(f"old {day}")
    sink = {"path": str(out), "format": "json", "mode": "overwrite_partitions", "partition_by": ["day"]}
    root = Path(io.sink_staging_root(sink, JOB))
    for chunk in ("split-0", "split-1"):
        for day in (2, 3):
            (root / chunk / f"day={day}").mkdir(parents=True)
            (root / chunk / f"day={day}" / "part-0.json").write_text(f"new {day} {chunk}")
    return sink


def swap(sink: dict, fs: LocalFileSystem) -> None:
    root = io.sink_staging_root(sink, JOB)
    moves = io._staged_moves(fs, root, sink["path"])
    partitioned_sink.swap_partitions(fs, root, sink["path"], moves, depth=1)


def recover(sink: dict) -> list[str]:
    staging = join(io.sink_staging_dir(sink), JOB)
    return partitioned_sink.complete_interrupted_publish(sink, staging, JOB, AllowedDirectories())


def expected_after(out: Path) -> dict[str, str]:
    return {
        "day=1/subtask-0-old.json": hashlib.sha256(b"old 1").hexdigest(),
        **{
            f"day={day}/{chunk}-part-0.json": hashlib.sha256(f"new {day} {chunk}".encode()).hexdigest()
            for day in (2, 3)
            for chunk in ("split-0", "split-1")
        },
    }


def test_a_publish_interrupted_mid_swap_is_completed_by_the_recovered_run(sink: dict) -> None:
    out = Path(sink["path"])
    # 4 file moves into _publish, then day=2: old away, new in; day=3: old away, then the crash.
    with pytest.raises(Crash):
        swap(sink, CrashingFileSystem(renames_before_crash=4 + 2 + 1))
    assert not (out / "day=3").exists()  # the one moment a partition is missing...
    assert (out / "_flink_staging" / JOB / partitioned_sink.MANIFEST).exists()
    assert recover(sink) == ["day=2", "day=3"]  # ...until the recovered run plans
    assert hashes(out) == expected_after(out)
    assert not (out / "_flink_staging" / JOB / partitioned_sink.MANIFEST).exists()
    assert recover(sink) == []  # done once


def test_a_publish_interrupted_before_its_manifest_changed_nothing(sink: dict) -> None:
    out = Path(sink["path"])
    before = hashes(out)
    with pytest.raises(Crash):
        swap(sink, CrashingFileSystem(renames_before_crash=3))
    assert hashes(out) == before
    assert recover(sink) == []
    assert hashes(out) == before
    # The recovered run stages its own output and publishes it whole.
    io.discard_sink_staging(sink, JOB)
    root = Path(io.sink_staging_root(sink, f"{JOB}/run-0badcafe"))
    for chunk in ("split-0", "split-1"):
        for day in (2, 3):
            (root / chunk / f"day={day}").mkdir(parents=True)
            (root / chunk / f"day={day}" / "part-0.json").write_text(f"new {day} {chunk}")
    assert io.publish_sink(sink, f"{JOB}/run-0badcafe") == 4
    assert hashes(out) == expected_after(out)
    assert not (out / "_flink_staging").exists()


def test_a_publish_without_a_crash_replaces_only_the_jobs_days(sink: dict) -> None:
    out = Path(sink["path"])
    day1 = (out / "day=1" / "subtask-0-old.json").stat()
    assert io.publish_sink(sink, JOB) == 4
    assert hashes(out) == expected_after(out)
    assert (out / "day=1" / "subtask-0-old.json").stat().st_mtime_ns == day1.st_mtime_ns
    assert (out / "_SUCCESS").exists() and not (out / "_flink_staging").exists()


@pytest.mark.parametrize(
    ("sink", "counted"),
    [({"format": "parquet"}, True), ({"format": "PARQUET"}, True), ({"format": "csv"}, False), ({}, False)],
)
def test_only_parquet_sinks_say_how_many_rows_their_files_hold(sink: dict, counted: bool) -> None:
    """Spark's format names are case-insensitive; a sink of any other format is counted
    by an Observation during its write instead (operators/spark/task.py)."""
    assert io.counts_rows_in_files(sink) is counted
