"""Partitions served by the TaskManager that produced them (io/partition_files.py and
taskmanager/partition_service.py), one layer at a time: the server's answers read from
a producer's data directory, and the consumer's fetch with `ask` calling them directly.
The real transport (ZeroMQ between namespaced hosts) is tested in
tests/integration/test_multihost_netns.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flink_runtime.io import partition_files as pf
from flink_runtime.io.partitions import InputGate, PartitionNotFoundError, ResultPartitionWriter
from flink_runtime.jobgraph.jobgraph import Partitioner
from flink_runtime.rpc.messages import (
    InputGateDeploymentDescriptor,
    Message,
    PartitionRequestRefused,
    RequestPartitionFile,
    RequestSubpartitionFiles,
    SubpartitionFiles,
    TaskDeploymentDescriptor,
)
from flink_runtime.rpc.service import AskTimeoutError
from flink_runtime.taskmanager.partition_service import fetch_remote_inputs, list_subpartition, read_partition_file

JOB = "0" * 31 + "1"
PRODUCER = "tcp://10.0.0.2:6122"
CONSUMER = "tcp://10.0.0.3:6122"


def produce(data_dir: Path, records: int = 500, partition_number: int = 0) -> str:
    writer = ResultPartitionWriter(data_dir, JOB, "res", partition_number, 2, Partitioner.HASH, ["k"], "exec-p")
    writer.emit_all({"k": n % 5, "n": n} for n in range(records))
    return writer.commit()


def server(data_dir: Path):
    """An `ask` answered by a producer TaskManager's handlers over `data_dir`."""
    asked: list[Message] = []

    def ask(address: str, message: Message) -> Message:
        assert address == PRODUCER
        asked.append(message)
        if isinstance(message, RequestSubpartitionFiles):
            return list_subpartition(str(data_dir), message)
        assert isinstance(message, RequestPartitionFile)
        return read_partition_file(str(data_dir), message)

    return ask, asked


def consumer(
    location: str, address: str = PRODUCER, subpartition: int = 1, producer: str = ""
) -> TaskDeploymentDescriptor:
    gate = InputGateDeploymentDescriptor(
        result_id="res",
        partitioner=Partitioner.HASH,
        consumed_subpartition_index=subpartition,
        partition_locations=[location],
        partition_numbers=[0],
        partition_addresses=[address],
        partition_producers=[producer] if producer else [],
    )
    return TaskDeploymentDescriptor(
        job_id=JOB,
        job_name="j",
        execution_id="exec-c",
        jobmanager_id="jm",
        allocation_id="a",
        slot_index=0,
        data_namespace=JOB,
        vertex_id="sum",
        task_name="Sum (2/2)",
        subtask_index=1,
        parallelism=2,
        attempt_number=0,
        invokable="modulo-sum",
        input_gates=[gate],
    )


def test_modes() -> None:
    assert pf.serving_mode("auto", "/data") == "network"
    assert pf.serving_mode("AUTO", "hdfs://nn/flink") == "shared"
    assert pf.serving_mode("SHARED", "/nfs/flink") == "shared"
    with pytest.raises(ValueError, match="network serves partitions from a local io.tmp.dirs"):
        pf.serving_mode("network", "s3a://bucket/flink")
    with pytest.raises(ValueError, match="must be one of auto, network, shared, not 'nfs'"):
        pf.serving_mode("nfs", "/data")


def test_a_consumer_reads_a_remote_subpartition_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    location = produce(tmp_path / "producer")
    monkeypatch.setattr(pf, "MAX_CHUNK_BYTES", 1000)  # several slices per file
    ask, asked = server(tmp_path / "producer")
    descriptor, fetched = fetch_remote_inputs(consumer(location), CONSUMER, str(tmp_path / "consumer"), ask)
    assert fetched is not None and fetched.is_relative_to(tmp_path / "consumer")
    gate = descriptor.input_gates[0]
    assert Path(gate.partition_locations[0]).is_relative_to(fetched)
    records = list(InputGate("res", 1, gate.partition_locations).records())
    local = list(InputGate("res", 1, [location]).records())
    assert records == local and len(records) > 0
    slices = [m for m in asked if isinstance(m, RequestPartitionFile)]
    assert len(slices) > 2 and all(m.max_bytes <= 1000 for m in slices)
    pf.remove_fetched(fetched)
    assert not fetched.exists()


def test_a_partition_of_the_same_taskmanager_is_read_in_place(tmp_path: Path) -> None:
    location = produce(tmp_path / "data")

    def ask(address: str, message: Message) -> Message:
        raise AssertionError("no network hop for a partition produced here")

    descriptor, fetched = fetch_remote_inputs(consumer(location, address=CONSUMER), CONSUMER, str(tmp_path), ask)
    assert fetched is None and descriptor.input_gates[0].partition_locations == [location]


def test_a_shared_data_dir_is_read_in_place_only_for_the_attempt_that_finished_it(tmp_path: Path) -> None:
    """A copy this TaskManager can see (a data directory shared with the producer's) is
    read in place when the finishing attempt committed it; an older attempt's copy (the
    producer ran here before a restart) is fetched from where the current one ran."""
    location = produce(tmp_path / "shared")
    ask, asked = server(tmp_path / "shared")
    same = consumer(location, producer="exec-p")
    descriptor, fetched = fetch_remote_inputs(same, CONSUMER, str(tmp_path / "consumer"), ask)
    assert fetched is None and not asked and descriptor.input_gates[0].partition_locations == [location]
    newer = consumer(location, producer="exec-p-attempt-2")
    descriptor, fetched = fetch_remote_inputs(newer, CONSUMER, str(tmp_path / "consumer"), ask)
    assert fetched is not None and asked, "a copy of another attempt was read as if current"


def test_a_gone_producer_is_a_lost_partition_naming_it(tmp_path: Path) -> None:
    def ask(address: str, message: Message) -> Message:
        raise AskTimeoutError("no answer within 10 s")

    with pytest.raises(pf.PartitionUnreachableError) as caught:
        fetch_remote_inputs(consumer("/elsewhere/res/0"), CONSUMER, str(tmp_path), ask)
    assert caught.value.partition_id == "res#0" and caught.value.data_address == PRODUCER
    assert "cannot be fetched from the TaskManager that produced it" in str(caught.value)
    assert isinstance(caught.value, PartitionNotFoundError)
    assert not any(tmp_path.rglob("*.jsonl")), "a failed fetch left files behind"


def test_a_producer_without_the_partition_refuses_with_the_reason(tmp_path: Path) -> None:
    ask, _ = server(tmp_path / "empty")
    with pytest.raises(pf.PartitionUnreachableError, match="does not exist"):
        fetch_remote_inputs(consumer("/x"), CONSUMER, str(tmp_path / "consumer"), ask)


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "a/../../b", ".hidden", "a//b", "a/b/c/d"])
def test_a_file_request_never_leaves_the_partition(tmp_path: Path, name: str) -> None:
    produce(tmp_path)
    request = RequestPartitionFile(data_namespace=JOB, result_id="res", partition_number=0, name=name)
    answer = read_partition_file(str(tmp_path), request)
    assert isinstance(answer, PartitionRequestRefused) and answer.kind == "invalid", answer


@pytest.mark.parametrize(
    ("namespace", "result_id", "number"),
    [("../x", "res", 0), (JOB, "../res", 0), (JOB, "res", -1), ("/", "res", 0)],
)
def test_a_listing_request_takes_ids_only(tmp_path: Path, namespace: str, result_id: str, number: int) -> None:
    request = RequestSubpartitionFiles(
        data_namespace=namespace, result_id=result_id, partition_number=number, subpartition_index=0
    )
    answer = list_subpartition(str(tmp_path), request)
    assert isinstance(answer, PartitionRequestRefused) and answer.kind == "invalid", answer


def test_a_spark_partition_lists_only_the_consumers_subpartition(tmp_path: Path) -> None:
    partition = tmp_path / JOB / "res" / "0"
    for chunk in ("split-0", "split-1"):
        files = {}
        for sub in (0, 1):
            folder = partition / chunk / f"__sub={sub}"
            folder.mkdir(parents=True)
            (folder / "part-0.parquet").write_bytes(b"x" * (10 + sub))
            files[f"__sub={sub}/part-0.parquet"] = 10 + sub
        (partition / chunk / "_chunk.json").write_text(json.dumps({"files": files}))
    (partition / "_COMMITTED.json").write_text(json.dumps({"chunks": ["split-0", "split-1"]}))
    request = RequestSubpartitionFiles(data_namespace=JOB, result_id="res", partition_number=0, subpartition_index=1)
    answer = list_subpartition(str(tmp_path), request)
    assert isinstance(answer, SubpartitionFiles)
    assert sorted(answer.files) == [
        "_COMMITTED.json",
        "split-0/__sub=1/part-0.parquet",
        "split-0/_chunk.json",
        "split-1/__sub=1/part-0.parquet",
        "split-1/_chunk.json",
    ]
    assert answer.files["split-1/__sub=1/part-0.parquet"] == 11
