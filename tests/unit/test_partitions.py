"""Blocking result partitions: partitioners, commit by rename, InputGate, release."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.io.filesystem import NotParquet
from flink_runtime.io.partitions import (
    DataSize,
    InputGate,
    InvalidDataNamespace,
    PartitionNotFoundError,
    ResultPartitionWriter,
    chunk_files,
    committed_chunk_data_files,
    committed_chunk_files,
    job_data_dir,
    release_job_partitions,
    stable_hash,
    write_chunk_manifest,
    write_partition_manifest,
)
from flink_runtime.jobgraph.jobgraph import Partitioner

JOB = "job-1"


def writer(
    data_dir: Path,
    partitioner: Partitioner,
    subpartitions: int,
    *,
    keys: list[str] | None = None,
    partition_number: int = 0,
    attempt: str = "attempt-1",
    result: str = "result-1",
    job: str = JOB,
) -> ResultPartitionWriter:
    return ResultPartitionWriter(
        data_dir, job, result, partition_number, subpartitions, partitioner, keys or [], attempt
    )


def read_subpartitions(location: str | Path, count: int) -> list[list[Any]]:
    """Every subpartition of one committed partition, read as a consumer reads it."""
    return [list(InputGate("result", i, [str(location)]).records()) for i in range(count)]


def records(count: int, modulo: int = 7) -> list[dict[str, int]]:
    return [{"n": n, "key": n % modulo} for n in range(count)]


def as_counter(items: list[dict[str, int]]) -> Counter[str]:
    return Counter(json.dumps(item, sort_keys=True) for item in items)


# -- stable_hash ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([3], 2115588154),  # zlib.crc32(b'[3]')
        ("user-7", 142712552),  # zlib.crc32(b'"user-7"')
        ({"b": 1, "a": 2}, 3954143967),  # keys sorted: zlib.crc32(b'{"a": 2, "b": 1}')
        (["x", 1], 1746048793),
    ],
)
def test_stable_hash_is_a_known_crc32(value: Any, expected: int) -> None:
    """Fixed numbers: the same in every process, whatever PYTHONHASHSEED says."""
    assert stable_hash(value) == expected


def test_stable_hash_ignores_dict_order() -> None:
    assert stable_hash({"a": 1, "b": [1, 2]}) == stable_hash({"b": [1, 2], "a": 1})


# -- hash partitioning ---------------------------------------------------------------------------


def test_hash_partitioning_by_key_covers_every_record_once(tmp_path: Path) -> None:
    data = records(200)
    w = writer(tmp_path, Partitioner.HASH, 4, keys=["key"])
    w.emit_all(data)
    location = w.commit()
    parts = read_subpartitions(location, 4)
    assert as_counter([r for part in parts for r in part]) == as_counter(data)
    assert w.records_written == 200
    for index, part in enumerate(parts):
        for record in part:
            assert stable_hash([record["key"]]) % 4 == index
    # One key never spreads over two subpartitions.
    owners: dict[int, set[int]] = {}
    for index, part in enumerate(parts):
        for record in part:
            owners.setdefault(record["key"], set()).add(index)
    assert all(len(indexes) == 1 for indexes in owners.values())
    assert len(owners) == 7
    # Several subpartitions are used (the hash spreads the keys).
    assert sum(1 for part in parts if part) > 1


def test_hash_partitioning_is_the_same_for_another_writer(tmp_path: Path) -> None:
    """Another producer (in another process, on another host) routes a key the same way."""
    data = records(100, modulo=13)
    first = writer(tmp_path, Partitioner.HASH, 5, keys=["key"], partition_number=0)
    second = writer(tmp_path, Partitioner.HASH, 5, keys=["key"], partition_number=1, attempt="other")
    first.emit_all(data)
    second.emit_all(reversed(data))
    parts_first = read_subpartitions(first.commit(), 5)
    parts_second = read_subpartitions(second.commit(), 5)
    for a, b in zip(parts_first, parts_second, strict=True):
        assert as_counter(a) == as_counter(b)


def test_hash_on_several_keys(tmp_path: Path) -> None:
    data = [{"a": a, "b": b, "v": a * 10 + b} for a in range(5) for b in range(5)]
    w = writer(tmp_path, Partitioner.HASH, 3, keys=["a", "b"])
    w.emit_all(data)
    parts = read_subpartitions(w.commit(), 3)
    for index, part in enumerate(parts):
        for record in part:
            assert stable_hash([record["a"], record["b"]]) % 3 == index
    assert as_counter([r for part in parts for r in part]) == as_counter(data)


def test_hash_without_keys_hashes_the_whole_record(tmp_path: Path) -> None:
    data = [f"word-{i}" for i in range(50)] * 2
    w = writer(tmp_path, Partitioner.HASH, 3)
    w.emit_all(data)
    parts = read_subpartitions(w.commit(), 3)
    for index, part in enumerate(parts):
        for record in part:
            assert stable_hash(record) % 3 == index
    assert sorted(r for part in parts for r in part) == sorted(data)


def test_single_subpartition_takes_everything(tmp_path: Path) -> None:
    for partitioner in Partitioner:
        w = writer(tmp_path, partitioner, 1, keys=["key"], result=f"r-{partitioner.value}")
        w.emit_all(records(10))
        assert read_subpartitions(w.commit(), 1) == [records(10)]


# -- forward / rebalance / broadcast ------------------------------------------------------------------


def test_forward_writes_in_order_to_one_subpartition(tmp_path: Path) -> None:
    w = writer(tmp_path, Partitioner.FORWARD, 1)
    w.emit_all(records(30))
    location = w.commit()
    assert read_subpartitions(location, 1) == [records(30)]
    assert sorted(p.name for p in Path(location).iterdir()) == ["0.jsonl", "_COMMITTED.json"]


def test_rebalance_is_round_robin(tmp_path: Path) -> None:
    data = records(10)
    w = writer(tmp_path, Partitioner.REBALANCE, 3)
    w.emit_all(data)
    parts = read_subpartitions(w.commit(), 3)
    assert parts == [data[0::3], data[1::3], data[2::3]]
    assert [len(p) for p in parts] == [4, 3, 3]


def test_broadcast_sends_every_record_to_every_subpartition(tmp_path: Path) -> None:
    data = records(12)
    w = writer(tmp_path, Partitioner.BROADCAST, 4)
    w.emit_all(data)
    assert w.records_written == 12
    assert read_subpartitions(w.commit(), 4) == [data] * 4


def test_records_round_trip_as_json(tmp_path: Path) -> None:
    data: list[Any] = [{"text": "grüße ✓", "nested": {"list": [1, 2.5, None, True]}}, "plain", 7, None]
    w = writer(tmp_path, Partitioner.FORWARD, 1)
    w.emit_all(data)
    assert read_subpartitions(w.commit(), 1) == [data]


# -- commit / abort ----------------------------------------------------------------------------------


def test_commit_is_atomic(tmp_path: Path) -> None:
    w = writer(tmp_path, Partitioner.HASH, 2, keys=["key"], partition_number=3, attempt="exec-9")
    final_dir = tmp_path / JOB / "result-1" / "3"
    assert w.final_dir == final_dir
    assert w.staging_dir.parent == final_dir.parent
    assert w.staging_dir.name.startswith(".") and "exec-9" in w.staging_dir.name
    w.emit_all(records(20))
    assert not final_dir.exists()  # nothing visible before commit
    assert w.staging_dir.is_dir()
    location = w.commit()
    assert location == str(final_dir)
    assert final_dir.is_dir()
    assert not w.staging_dir.exists()
    assert sorted(p.name for p in final_dir.iterdir()) == ["0.jsonl", "1.jsonl", "_COMMITTED.json"]
    assert json.loads((final_dir / "_COMMITTED.json").read_text())["records"] == [
        len((final_dir / name).read_text().splitlines()) for name in ("0.jsonl", "1.jsonl")
    ]
    # Only the committed partition is in the result dir: no staging leftovers.
    assert [p.name for p in final_dir.parent.iterdir()] == ["3"]


def test_abort_leaves_nothing(tmp_path: Path) -> None:
    w = writer(tmp_path, Partitioner.REBALANCE, 3)
    w.emit_all(records(5))
    w.abort()
    assert not w.staging_dir.exists()
    assert not w.final_dir.exists()
    assert list((tmp_path / JOB / "result-1").iterdir()) == []
    w.abort()  # twice is harmless


def test_empty_partition_commits_empty_files(tmp_path: Path) -> None:
    w = writer(tmp_path, Partitioner.HASH, 2)
    assert read_subpartitions(w.commit(), 2) == [[], []]
    assert w.records_written == 0


def test_second_attempt_commit_replaces_the_first(tmp_path: Path) -> None:
    first = writer(tmp_path, Partitioner.REBALANCE, 2, attempt="attempt-1")
    second = writer(tmp_path, Partitioner.REBALANCE, 2, attempt="attempt-2")
    assert first.staging_dir != second.staging_dir  # concurrent attempts do not mix
    first.emit_all([{"from": "first", "i": i} for i in range(6)])
    second.emit_all([{"from": "second", "i": i} for i in range(3)])
    first_location = first.commit()
    second_location = second.commit()
    assert first_location == second_location
    parts = read_subpartitions(second_location, 2)
    assert [r["from"] for part in parts for r in part] == ["second"] * 3
    assert sorted(p.name for p in Path(second_location).parent.iterdir()) == ["0"]


def test_recreated_attempt_starts_from_a_clean_staging_dir(tmp_path: Path) -> None:
    stale = writer(tmp_path, Partitioner.FORWARD, 1, attempt="same")
    stale.emit({"stale": True})
    stale.close()
    fresh = writer(tmp_path, Partitioner.FORWARD, 1, attempt="same")
    fresh.emit({"fresh": True})
    assert read_subpartitions(fresh.commit(), 1) == [[{"fresh": True}]]


# -- InputGate --------------------------------------------------------------------------------------


def test_input_gate_reads_its_subpartition_from_every_location(tmp_path: Path) -> None:
    locations = []
    for producer in range(3):
        w = writer(tmp_path, Partitioner.REBALANCE, 2, partition_number=producer, attempt=f"a{producer}")
        w.emit_all([{"producer": producer, "i": i} for i in range(4)])
        locations.append(w.commit())
    gate = InputGate("result-1", 1, locations)
    assert gate.files() == [Path(location) / "1.jsonl" for location in locations]
    assert list(gate.records()) == [{"producer": p, "i": i} for p in range(3) for i in (1, 3)]
    other = InputGate("result-1", 0, locations)
    assert list(other.records()) == [{"producer": p, "i": i} for p in range(3) for i in (0, 2)]


def test_input_gate_over_hash_partitions_sees_each_key_in_one_consumer(tmp_path: Path) -> None:
    data = records(90, modulo=11)
    locations = []
    for producer in range(3):
        w = writer(tmp_path, Partitioner.HASH, 4, keys=["key"], partition_number=producer, attempt=f"a{producer}")
        w.emit_all(data[producer::3])
        locations.append(w.commit())
    consumed = [list(InputGate("result-1", index, locations).records()) for index in range(4)]
    assert as_counter([r for part in consumed for r in part]) == as_counter(data)
    key_owner: dict[int, set[int]] = {}
    for index, part in enumerate(consumed):
        for record in part:
            key_owner.setdefault(record["key"], set()).add(index)
    assert all(len(owners) == 1 for owners in key_owner.values())


def test_input_gate_with_no_locations_is_empty() -> None:
    assert list(InputGate("r", 0, []).records()) == []


def test_input_gate_on_missing_partition_raises(tmp_path: Path) -> None:
    gate = InputGate("r", 0, [str(tmp_path / "nowhere")])
    with pytest.raises(PartitionNotFoundError, match=r"nowhere of result r is incomplete: it does not exist"):
        list(gate.records())


def test_input_gate_refuses_a_partition_without_its_manifest(tmp_path: Path) -> None:
    """A folder that exists but was never committed (or only partly copied) is not empty input."""
    (tmp_path / "partition").mkdir()
    with pytest.raises(PartitionNotFoundError, match="_COMMITTED.json is missing.*io.tmp.dirs"):
        list(InputGate("r", 0, [str(tmp_path / "partition")]).records())


def test_input_gate_refuses_a_missing_or_short_subpartition(tmp_path: Path) -> None:
    w = writer(tmp_path, Partitioner.REBALANCE, 2)
    w.emit_all(records(10))
    location = Path(w.commit())
    lines = (location / "1.jsonl").read_text().splitlines(keepends=True)
    (location / "1.jsonl").write_text("".join(lines[:-1]))
    with pytest.raises(PartitionNotFoundError, match="1.jsonl holds 4 records, not the 5 committed"):
        list(InputGate("result-1", 1, [str(location)]).records())
    (location / "0.jsonl").unlink()
    with pytest.raises(PartitionNotFoundError, match="0.jsonl is missing"):
        list(InputGate("result-1", 0, [str(location)]).records())


# -- partitions of chunks (Spark tasks) ------------------------------------------------------------


def write_chunk(partition: Path, chunk: str, files: dict[str, int]) -> DataSize:
    """A chunk as a Spark task commits it: Parquet files of so many rows in subpartition
    folders, then the manifest."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for relative, rows in files.items():
        (partition / chunk / relative).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"word": [f"w{i}" for i in range(rows)]}), partition / chunk / relative)
    return write_chunk_manifest(str(partition / chunk))


def test_a_sealed_partition_of_chunks_names_exactly_its_files(tmp_path: Path) -> None:
    partition = tmp_path / "p"
    written = write_chunk(partition, "split-0", {"__sub=0/part-a.parquet": 2, "__sub=1/part-b.parquet": 3})
    write_chunk(partition, "split-2", {"__sub=1/part-c.parquet": 1})
    write_chunk(partition, "split-9", {"__sub=1/part-d.parquet": 2})  # an orphan nobody sealed
    write_partition_manifest(str(partition), "r", ["split-0", "split-2"])
    assert committed_chunk_files(str(partition), "r", "__sub=1") == [
        str(partition / "split-0" / "__sub=1" / "part-b.parquet"),
        str(partition / "split-2" / "__sub=1" / "part-c.parquet"),
    ]
    assert committed_chunk_files(str(partition), "r", "__sub=3") == []
    assert chunk_files(str(partition / "split-9"), "r", "__sub=1") == [
        str(partition / "split-9/__sub=1/part-d.parquet")
    ]
    # What each file holds, as its Parquet footer said when the chunk was written.
    sizes = {
        path.rsplit("/", 1)[-1]: size
        for path, size in committed_chunk_data_files(str(partition), "r", ["__sub=1"]).items()
    }
    assert {name: size.rows for name, size in sizes.items()} == {"part-b.parquet": 3, "part-c.parquet": 1}
    on_disk = (partition / "split-0" / "__sub=1" / "part-b.parquet").stat().st_size
    assert sizes["part-b.parquet"].bytes == on_disk
    assert written.rows == 5
    assert written.bytes == on_disk + (partition / "split-0" / "__sub=0" / "part-a.parquet").stat().st_size


def test_a_manifest_without_rows_counts_none(tmp_path: Path) -> None:
    """A chunk written before its manifest recorded rows is still read; it counts no rows."""
    partition = tmp_path / "p"
    write_chunk(partition, "split-0", {"__sub=0/part-a.parquet": 2})
    manifest = partition / "split-0" / "_chunk.json"
    manifest.write_text(json.dumps({"files": json.loads(manifest.read_text())["files"]}))
    write_partition_manifest(str(partition), "r", ["split-0"])
    assert [size.rows for size in committed_chunk_data_files(str(partition), "r", ["__sub=0"]).values()] == [0]


def test_a_chunk_file_that_is_not_parquet_is_refused_when_written(tmp_path: Path) -> None:
    (tmp_path / "c" / "__sub=0").mkdir(parents=True)
    (tmp_path / "c" / "__sub=0" / "part-a.parquet").write_text("not parquet")
    with pytest.raises(NotParquet, match=r"c/__sub=0/part-a.parquet is not a readable Parquet file: .*magic"):
        write_chunk_manifest(str(tmp_path / "c"))


def test_missing_pieces_of_a_partition_of_chunks_are_errors(tmp_path: Path) -> None:
    partition = tmp_path / "p"
    with pytest.raises(PartitionNotFoundError, match="it does not exist"):
        committed_chunk_files(str(partition), "r", "__sub=0")
    write_chunk(partition, "split-0", {"__sub=0/part-a.parquet": 2})
    with pytest.raises(PartitionNotFoundError, match="_COMMITTED.json is missing"):
        committed_chunk_files(str(partition), "r", "__sub=0")
    # A producer whose earlier attempt's chunk it cannot see fails instead of sealing without it.
    with pytest.raises(PartitionNotFoundError, match="chunk split-1 committed earlier is missing"):
        write_partition_manifest(str(partition), "r", ["split-0", "split-1"])
    write_partition_manifest(str(partition), "r", ["split-0"])
    data = partition / "split-0" / "__sub=0" / "part-a.parquet"
    committed = data.stat().st_size
    data.write_text("a")
    with pytest.raises(PartitionNotFoundError, match=f"part-a.parquet is 1 bytes, not the {committed} committed"):
        committed_chunk_files(str(partition), "r", "__sub=0")
    data.unlink()
    with pytest.raises(PartitionNotFoundError, match="part-a.parquet is missing"):
        committed_chunk_files(str(partition), "r", "__sub=0")


# -- release ----------------------------------------------------------------------------------------


JOB_A = "a" * 32
JOB_B = "b" * 32


def test_release_job_partitions_removes_only_that_job(tmp_path: Path) -> None:
    for job in (JOB_A, JOB_B):
        w = writer(tmp_path, Partitioner.FORWARD, 1, job=job)
        w.emit({"job": job})
        w.commit()
    pending = writer(tmp_path, Partitioner.FORWARD, 1, job=JOB_A, result="result-2")  # uncommitted staging
    pending.emit({"x": 1})
    pending.close()
    assert job_data_dir(tmp_path, JOB_A) == tmp_path / JOB_A
    release_job_partitions(tmp_path, JOB_A)
    assert not (tmp_path / JOB_A).exists()
    assert (tmp_path / JOB_B / "result-1" / "0" / "0.jsonl").exists()
    release_job_partitions(tmp_path, JOB_A)  # releasing twice is harmless
    release_job_partitions(tmp_path, "c" * 32 + "/run-0123abcd")


@pytest.mark.parametrize(
    "namespace", ["/", "/etc", "../outside", f"{JOB_A}/../{JOB_B}", f"{JOB_A}/run-x", "", "job-a", JOB_A.upper()]
)
def test_release_refuses_anything_but_a_job_id_or_a_run_of_one(tmp_path: Path, namespace: str) -> None:
    """A ReleasePartitions naming anything but a job id or a run of one (a forged absolute
    path, say) is refused: releasing it would delete that directory."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "data").mkdir()
    with pytest.raises(InvalidDataNamespace):
        release_job_partitions(tmp_path / "data", namespace)
    assert outside.exists()
