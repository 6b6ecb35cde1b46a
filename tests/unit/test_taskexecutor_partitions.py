"""PartitionService (taskmanager/partition_service.py) alone: a data directory on disk and
a fake `ask` for the consumer's side; no RPC, no TaskExecutor. The file-level answers are
tested in test_partition_serving.py; here, what the component owns and decides."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.io import partition_files as pf
from flink_runtime.io.partitions import ResultPartitionWriter
from flink_runtime.jobgraph.jobgraph import Partitioner
from flink_runtime.rpc.messages import (
    InputGateDeploymentDescriptor,
    Message,
    PartitionRequestRefused,
    ReleasePartitions,
    RequestPartitionFile,
    RequestSubpartitionFiles,
    SubpartitionFiles,
)
from flink_runtime.taskmanager.partition_service import PartitionService
from tests.unit.taskexecutor_fakes import descriptor

JOB = "0123456789abcdef0123456789abcdef"
PRODUCER = "tcp://10.0.0.2:6122"


def produce(data_dir: Path) -> str:
    writer = ResultPartitionWriter(data_dir, JOB, "res", 0, 2, Partitioner.HASH, ["k"], "exec-p")
    writer.emit_all({"k": n % 5, "n": n} for n in range(100))
    return writer.commit()


async def test_requests_are_answered_on_a_worker_thread_from_its_data_directory(tmp_path: Path) -> None:
    produce(tmp_path)
    threads: list[str] = []

    async def run_in_thread(function, *args):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return function(*args)

    service = PartitionService(str(tmp_path), pf.NETWORK, run_in_thread)
    listed = await service.subpartition_files(
        RequestSubpartitionFiles(data_namespace=JOB, result_id="res", partition_number=0, subpartition_index=1)
    )
    assert isinstance(listed, SubpartitionFiles) and listed.files
    refused = await service.partition_file(
        RequestPartitionFile(data_namespace=JOB, result_id="res", partition_number=0, name="../../etc/passwd")
    )
    assert isinstance(refused, PartitionRequestRefused) and refused.kind == "invalid"
    assert len(threads) == 2, "every read goes through run_in_thread"


async def test_release_deletes_the_job_and_ignores_an_invalid_namespace(tmp_path: Path) -> None:
    produce(tmp_path)
    (tmp_path / "keep").mkdir()
    service = PartitionService(str(tmp_path), pf.NETWORK)
    assert service.release(ReleasePartitions(job_id="../keep")) is None
    assert service.release(ReleasePartitions(job_id=JOB, data_namespace="not a namespace/..")) is None
    release = service.release(ReleasePartitions(job_id=JOB))
    assert release is not None
    await release
    assert not (tmp_path / JOB).exists() and (tmp_path / "keep").exists()


def test_inputs_are_fetched_only_when_partitions_are_served_over_the_network(tmp_path: Path) -> None:
    def ask(address: str, message: Message) -> Message:
        raise AssertionError("nothing to fetch")

    assert PartitionService(str(tmp_path), pf.SHARED).input_fetcher("tcp://me:1", ask) is None
    fetch = PartitionService(str(tmp_path), pf.NETWORK).input_fetcher("tcp://me:1", ask)
    assert fetch is not None
    gate = InputGateDeploymentDescriptor(
        result_id="res",
        partitioner=Partitioner.HASH,
        consumed_subpartition_index=0,
        partition_locations=[str(tmp_path / "local")],
        partition_numbers=[0],
        partition_addresses=["tcp://me:1"],
    )
    local = descriptor("exec-c", input_gates=[gate])
    assert fetch(local) == (local, None), "produced here: read in place"


def test_the_serving_mode_comes_from_the_configuration(tmp_path: Path) -> None:
    service = PartitionService.from_configuration(
        Configuration({"taskmanager.network.partition-serving": "shared"}), str(tmp_path)
    )
    assert (service.serving, service.data_dir) == (pf.SHARED, str(tmp_path))
    with pytest.raises(ConfigurationError, match="partition-serving"):
        PartitionService.from_configuration(
            Configuration({"taskmanager.network.partition-serving": "carrier-pigeon"}), str(tmp_path)
        )
