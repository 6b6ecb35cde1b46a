"""Result partitions served over the network by the TaskManager that produced them.

Why the RPC (ZeroMQ) rather than an HTTP server of its own: every TaskManager already
listens there, CURVE-authenticated with the cluster's shared secret (and encrypted), so
only registered members of the cluster can ask and no second port has to be opened
between hosts; ZeroMQ bounds every message (pekko.framesize), which the bounded slices
below stay well under. A consumer asks for the file list of its subpartition, then
for each file one slice at a time (MAX_CHUNK_BYTES), appending each to its local copy:
memory stays bounded whatever the partition's size.

`PartitionService` is the server side, a mixin of the TaskExecutor (as LogService):
its reads run on worker threads, never in the mailbox. It answers consumers (one
subpartition each) and the JobManager, which copies whole partitions into a savepoint
(checkpoint/served_partitions.py). `fetch_remote_inputs` is the consumers' client
side, run in a task's thread before its invokable starts (io/partition_files.py says
what is fetched and where it goes; shuffle/partition_client.py copies it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from flink_runtime.io import partition_files as pf
from flink_runtime.io.partitions import PartitionNotFoundError
from flink_runtime.jobgraph.jobgraph import Partitioner
from flink_runtime.rpc.endpoint import handles
from flink_runtime.rpc.messages import (
    InputGateDeploymentDescriptor,
    PartitionFileChunk,
    PartitionFiles,
    PartitionRequestRefused,
    RequestPartitionFile,
    RequestPartitionFiles,
    RequestSubpartitionFiles,
    SubpartitionFiles,
    TaskDeploymentDescriptor,
)
from flink_runtime.shuffle.partition_client import Ask, answer, fetch_files

T = TypeVar("T")


class PartitionService:
    """The TaskExecutor's answers to RequestSubpartitionFiles and RequestPartitionFile."""

    data_dir: str

    @handles(RequestSubpartitionFiles)
    def _on_request_subpartition_files(
        self, message: RequestSubpartitionFiles
    ) -> Awaitable[SubpartitionFiles | PartitionRequestRefused]:
        return asyncio.to_thread(list_subpartition, self.data_dir, message)

    @handles(RequestPartitionFiles)
    def _on_request_partition_files(
        self, message: RequestPartitionFiles
    ) -> Awaitable[PartitionFiles | PartitionRequestRefused]:
        return asyncio.to_thread(list_partition, self.data_dir, message)

    @handles(RequestPartitionFile)
    def _on_request_partition_file(
        self, message: RequestPartitionFile
    ) -> Awaitable[PartitionFileChunk | PartitionRequestRefused]:
        return asyncio.to_thread(read_partition_file, self.data_dir, message)


def list_subpartition(data_dir: str, request: RequestSubpartitionFiles) -> SubpartitionFiles | PartitionRequestRefused:
    key = pf.PartitionKey(
        request.data_namespace,
        request.result_id,
        request.partition_number,
        request.subpartition_index,
        request.broadcast,
    )
    return _listed_or_refused(lambda: SubpartitionFiles(files=pf.subpartition_files(data_dir, key)))


def list_partition(data_dir: str, request: RequestPartitionFiles) -> PartitionFiles | PartitionRequestRefused:
    key = pf.PartitionKey(request.data_namespace, request.result_id, request.partition_number, 0)
    return _listed_or_refused(lambda: PartitionFiles(files=pf.committed_entry_files(data_dir, key)))


def _listed_or_refused(listing: Callable[[], T]) -> T | PartitionRequestRefused:
    try:
        return listing()
    except pf.InvalidPartitionRequest as exc:
        return PartitionRequestRefused(kind="invalid", reason=str(exc))
    except (PartitionNotFoundError, OSError, ValueError) as exc:
        return PartitionRequestRefused(kind="not-found", reason=str(exc))


def read_partition_file(data_dir: str, request: RequestPartitionFile) -> PartitionFileChunk | PartitionRequestRefused:
    key = pf.PartitionKey(request.data_namespace, request.result_id, request.partition_number, 0)
    try:
        data, size = pf.read_slice(pf.partition_file(data_dir, key, request.name), request.offset, request.max_bytes)
    except pf.InvalidPartitionRequest as exc:
        return PartitionRequestRefused(kind="invalid", reason=str(exc))
    except OSError as exc:
        return PartitionRequestRefused(kind="not-found", reason=f"cannot read {request.name}: {exc.strerror or exc}")
    return PartitionFileChunk(name=request.name, offset=request.offset, file_size=size, data=data)


# -- the consumer's side ----------------------------------------------------------------------


def fetch_remote_inputs(
    descriptor: TaskDeploymentDescriptor, own_address: str, data_dir: str, ask: Ask
) -> tuple[TaskDeploymentDescriptor, Path | None]:
    """The descriptor with every partition produced on another TaskManager fetched into
    this one's data directory (locations rewritten to the copies), and the folder of the
    copies (None when nothing was fetched). A partition that cannot be fetched raises
    PartitionUnreachableError naming it."""
    namespace = descriptor.data_namespace or descriptor.job_id
    base = pf.fetched_dir(data_dir, namespace, descriptor.execution_id)
    fetched = False
    gates = []
    for gate in descriptor.input_gates:
        locations = list(gate.partition_locations)
        addresses = gate.partition_addresses
        producers = gate.partition_producers or [""] * len(addresses)
        for index, (number, address) in enumerate(zip(gate.partition_numbers, addresses, strict=False)):
            if not address or address == own_address:
                continue  # produced here (or by a sender that does not serve): read in place
            if pf.committed_by(locations[index], producers[index]):
                continue  # a data directory shared with the producer's: no network hop
            key = pf.PartitionKey(
                namespace,
                gate.result_id,
                number,
                gate.consumed_subpartition_index,
                broadcast=gate.partitioner is Partitioner.BROADCAST,
            )
            target = pf.fetched_partition_dir(base, key)
            try:
                _fetch_subpartition(key, address, target, ask)
            except BaseException:
                pf.remove_fetched(base)
                raise
            locations[index] = str(target)
            fetched = True
        gates.append(_with_locations(gate, locations))
    if not fetched:
        return descriptor, None
    return _with_gates(descriptor, gates), base


def _fetch_subpartition(key: pf.PartitionKey, address: str, target: Path, ask: Ask) -> None:
    request = RequestSubpartitionFiles(
        data_namespace=key.data_namespace,
        result_id=key.result_id,
        partition_number=key.partition_number,
        subpartition_index=key.subpartition_index,
        broadcast=key.broadcast,
    )
    listed = answer(ask, address, key, request, SubpartitionFiles)
    assert isinstance(listed, SubpartitionFiles)
    fetch_files(ask, address, key, listed.files, target)


def _with_locations(gate: InputGateDeploymentDescriptor, locations: list[str]) -> InputGateDeploymentDescriptor:
    return msgspec.structs.replace(gate, partition_locations=locations)


def _with_gates(
    descriptor: TaskDeploymentDescriptor, gates: list[InputGateDeploymentDescriptor]
) -> TaskDeploymentDescriptor:
    return msgspec.structs.replace(descriptor, input_gates=gates)
