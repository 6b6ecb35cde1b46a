"""What a checkpoint may claim, given the chunks it can list (checkpoint/committed_chunks.py),
and a savepoint's copy of chunks only their TaskManager holds (checkpoint/served_partitions.py,
with the serving TaskManager's own request handlers behind a direct `ask`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.checkpoint import committed_chunks
from flink_runtime.checkpoint.served_partitions import ServedPartitions, is_served, served_chunk_name
from flink_runtime.io import partition_files as pf
from flink_runtime.io.partitions import CHUNK_MANIFEST, PARTITION_MANIFEST, PartitionNotFoundError
from flink_runtime.rpc.messages import Message, RequestPartitionFile, RequestPartitionFiles
from flink_runtime.rpc.service import RpcException
from flink_runtime.taskmanager.partition_service import list_partition, read_partition_file

NAMESPACE = "ab" * 16
ADDRESS = "tcp://10.0.0.2:6122"


def vertex_data(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "completed": {0: 0, 1: 1, 2: 0},  # split -> subtask
        "split_files": {0: ["in/a.csv"], 1: ["in/b.csv"], 2: ["in/c.csv"]},
        "earlier_files": ["in/restored.csv"],
        "finished": [0, 1],
        "partitions": {},
        "final_states": {"0": {"path": "final-0"}, "1": {"path": "final-1"}},
        "restored_states": {"1": {"path": "restored-1"}},
    }
    data.update(overrides)
    return data


def write_partition(data_dir: Path, result: str, partition: int, chunks: dict[str, bytes]) -> Path:
    """A committed partition as a Spark task leaves it: one folder per chunk with its manifest."""
    location = data_dir / NAMESPACE / result / str(partition)
    for chunk, payload in chunks.items():
        files = {"__sub=0/part-0.parquet": len(payload)}
        (location / chunk / "__sub=0").mkdir(parents=True)
        (location / chunk / "__sub=0" / "part-0.parquet").write_bytes(payload)
        (location / chunk / CHUNK_MANIFEST).write_text(json.dumps({"files": files}))
    (location / ".split-9.inprogress-x").mkdir()  # being written: never listed
    (location / PARTITION_MANIFEST).write_text(json.dumps({"chunks": sorted(chunks)}))
    return location


def serving_taskmanager(data_dir: Path) -> Any:
    """An `ask` answered by a TaskManager's own handlers over `data_dir` (no network)."""

    def ask(address: str, message: Message) -> Message:
        if address != ADDRESS:
            raise RpcException(f"no answer from {address}")
        if isinstance(message, RequestPartitionFiles):
            return list_partition(str(data_dir), message)
        assert isinstance(message, RequestPartitionFile)
        return read_partition_file(str(data_dir), message)

    return ask


# -- claims --------------------------------------------------------------------------------------


def test_an_unavailable_subtask_claims_nothing_it_did() -> None:
    kept = committed_chunks.claims(vertex_data(), unavailable={1})
    assert kept.completed == {0: 0, 2: 0}  # split 1 is read again
    assert kept.finished == [0]  # subtask 1 runs again
    assert kept.files == ["in/a.csv", "in/c.csv", "in/restored.csv"]
    # It starts again from the state it was restored with, not from its final one.
    assert kept.states == {"0": {"path": "final-0"}, "1": {"path": "restored-1"}}


def test_with_everything_available_every_claim_stands() -> None:
    kept = committed_chunks.claims(vertex_data(), unavailable=set())
    assert kept.completed == {0: 0, 1: 1, 2: 0} and kept.finished == [0, 1]
    assert kept.states == {"0": {"path": "final-0"}, "1": {"path": "final-1"}}


# -- listing -------------------------------------------------------------------------------------


def test_a_visible_partition_is_listed_where_it_lies(tmp_path: Path) -> None:
    location = write_partition(tmp_path, "r1", 0, {"split-0": b"a", "split-2": b"c"})
    data = vertex_data(finished=[], partitions={"r1": {0: (str(location), ADDRESS)}})
    listing = committed_chunks.committed_chunks(data, {}, served=None)
    assert listing.unavailable == set()
    assert listing.chunks == {"r1": {"0": [str(location / "split-0"), str(location / "split-2")]}}


def test_a_partition_only_its_taskmanager_holds_is_unavailable_to_a_checkpoint(tmp_path: Path) -> None:
    data = vertex_data(partitions={"r1": {0: ("data/elsewhere/r1/0", ADDRESS), 1: (None, "")}})
    listing = committed_chunks.committed_chunks(data, {}, served=None)
    assert listing.unavailable == {0}  # held by a TaskManager: cannot be referred to
    assert listing.chunks == {}
    assert ADDRESS in listing.reasons[0]
    # Partition 1 has no TaskManager and nothing visible: empty, as an empty output is.


def test_a_savepoint_lists_and_copies_what_a_taskmanager_serves(tmp_path: Path) -> None:
    producer_dir = tmp_path / "producer"
    write_partition(producer_dir, "r1", 1, {"split-1": b"b" * 10_000, "whole": b"w"})
    served = ServedPartitions(serving_taskmanager(producer_dir), NAMESPACE)
    data = vertex_data(partitions={"r1": {1: ("data/not-here/r1/1", ADDRESS)}})
    listing = committed_chunks.committed_chunks(data, {}, served)
    assert listing.unavailable == set()
    locators = listing.chunks["r1"]["1"]
    assert all(is_served(locator) for locator in locators)
    assert [served_chunk_name(locator) for locator in locators] == ["split-1", "whole"]

    savepoint = tmp_path / "savepoint"
    for locator in locators:
        served.fetch(locator, str(savepoint / "data" / "r1" / "1" / served_chunk_name(locator)))
    copied = savepoint / "data" / "r1" / "1"
    assert (copied / "split-1" / "__sub=0" / "part-0.parquet").read_bytes() == b"b" * 10_000
    assert (copied / "whole" / CHUNK_MANIFEST).exists()
    assert not (copied / PARTITION_MANIFEST).exists() and not list(copied.glob(".*"))


def test_a_taskmanager_that_does_not_answer_makes_its_partition_unavailable(tmp_path: Path) -> None:
    served = ServedPartitions(serving_taskmanager(tmp_path), NAMESPACE)
    gone = "tcp://10.0.0.9:6122"
    data = vertex_data(partitions={"r1": {0: ("data/x/r1/0", gone), 1: ("data/x/r1/1", ADDRESS)}})
    listing = committed_chunks.committed_chunks(data, {}, served)
    # One does not answer, the other answers that it has no such partition.
    assert listing.unavailable == {0, 1}
    assert committed_chunks.claims(data, listing.unavailable).finished == []


# -- the serving TaskManager's listing -----------------------------------------------------------


def test_a_partition_lists_its_committed_chunks_whole(tmp_path: Path) -> None:
    write_partition(tmp_path, "r1", 0, {"split-0": b"x"})
    key = pf.PartitionKey(NAMESPACE, "r1", 0, 0)
    assert pf.committed_entry_files(str(tmp_path), key) == {
        f"split-0/{CHUNK_MANIFEST}": len((tmp_path / NAMESPACE / "r1" / "0" / "split-0" / CHUNK_MANIFEST).read_bytes()),
        "split-0/__sub=0/part-0.parquet": 1,
    }


def test_a_chunk_without_its_manifest_or_a_missing_partition_is_not_found(tmp_path: Path) -> None:
    location = write_partition(tmp_path, "r1", 0, {"split-0": b"x"})
    (location / "split-0" / CHUNK_MANIFEST).unlink()
    with pytest.raises(PartitionNotFoundError, match="has no manifest"):
        pf.committed_entry_files(str(tmp_path), pf.PartitionKey(NAMESPACE, "r1", 0, 0))
    with pytest.raises(PartitionNotFoundError, match="does not exist"):
        pf.committed_entry_files(str(tmp_path), pf.PartitionKey(NAMESPACE, "r1", 5, 0))
    refused = list_partition(
        str(tmp_path), RequestPartitionFiles(data_namespace="../etc", result_id="r1", partition_number=0)
    )
    assert refused.kind == "invalid"  # a namespace that is not one: refused, never a path


def test_a_chunk_this_savepoint_did_not_list_is_never_copied_as_empty(tmp_path: Path) -> None:
    producer_dir = tmp_path / "producer"
    write_partition(producer_dir, "r1", 1, {"split-1": b"b"})
    listing = ServedPartitions(serving_taskmanager(producer_dir), NAMESPACE)
    (locator,) = [path for _, path in listing.chunks(ADDRESS, "r1", 1) or []]
    another = ServedPartitions(serving_taskmanager(producer_dir), NAMESPACE)  # listed nothing
    with pytest.raises(ValueError, match="was not listed by this savepoint"):
        another.fetch(locator, str(tmp_path / "savepoint" / "split-1"))
    assert not (tmp_path / "savepoint").exists()
