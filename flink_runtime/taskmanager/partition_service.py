"""Result partitions served over the network by the TaskManager that produced them.

Why the RPC (ZeroMQ) rather than an HTTP server of its own: every TaskManager already
listens there, CURVE-authenticated with the cluster's shared secret (and encrypted), so
only registered members of the cluster can ask and no second port has to be opened
between hosts; ZeroMQ bounds every message (pekko.framesize), which the bounded slices
below stay well under. A consumer asks for the file list of its subpartition, then
for each file one slice at a time (MAX_CHUNK_BYTES), appending each to its local copy:
memory stays bounded whatever the partition's size.

`PartitionService` is a component of the TaskExecutor: the server side, whose reads
run on worker threads, never in the mailbox. It answers consumers (one subpartition
each) and the JobManager, which copies whole partitions into a savepoint
(checkpoint/served_partitions.py). `fetch_remote_inputs` is the consumers' client
side, run in a task's thread before its invokable starts (io/partition_files.py says
what is fetched and where it goes; shuffle/partition_client.py copies it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.io import partition_files as pf
from flink_runtime.io.partitions import (
    InvalidDataNamespace,
    PartitionNotFoundError,
    release_job_partitions,
    validate_namespace,
)
from flink_runtime.jobgraph.jobgraph import Partitioner
from flink_runtime.rpc.messages import (
    InputGateDeploymentDescriptor,
    PartitionFileChunk,
    PartitionFiles,
    PartitionRequestRefused,
    ReleasePartitions,
    RequestPartitionFile,
    RequestPartitionFiles,
    RequestSubpartitionFiles,
    SubpartitionFiles,
    TaskDeploymentDescriptor,
)
from flink_runtime.shuffle.partition_client import Ask, answer, fetch_files
from flink_runtime.taskmanager.task import FetchInputs

T = TypeVar("T")
log = logging.getLogger(__name__)

# Runs a blocking read off the mailbox (asyncio.to_thread; a test may run it inline).
RunInThread = Callable[..., Awaitable[Any]]


class PartitionService:
    """The partitions this TaskManager produced: served to consumers and the JobManager
    (RequestSubpartitionFiles, RequestPartitionFiles, RequestPartitionFile), released
    when the JobManager says so, and the fetching of a task's inputs produced elsewhere.

    Owns the data directory's partitions and how they are served (`serving`: network
    or shared, io/partition_files.py)."""

    def __init__(self, data_dir: str, serving: str, run_in_thread: RunInThread = asyncio.to_thread) -> None:
        self.data_dir = data_dir
        self.serving = serving
        self._run_in_thread = run_in_thread

    @classmethod
    def from_configuration(cls, config: Configuration, data_dir: str) -> PartitionService:
        try:
            # network: this TaskManager serves the partitions it produces, and fetches
            # those produced elsewhere.
            serving = pf.serving_mode(config.get(cfg.PARTITION_SERVING), data_dir)
        except ValueError as exc:
            raise cfg.ConfigurationError(str(exc)) from None
        return cls(data_dir, serving)

    # -- the server's side (reads run on worker threads, never in the mailbox) -----------------

    def subpartition_files(
        self, message: RequestSubpartitionFiles
    ) -> Awaitable[SubpartitionFiles | PartitionRequestRefused]:
        return self._run_in_thread(list_subpartition, self.data_dir, message)

    def partition_files(self, message: RequestPartitionFiles) -> Awaitable[PartitionFiles | PartitionRequestRefused]:
        return self._run_in_thread(list_partition, self.data_dir, message)

    def partition_file(self, message: RequestPartitionFile) -> Awaitable[PartitionFileChunk | PartitionRequestRefused]:
        return self._run_in_thread(read_partition_file, self.data_dir, message)

    def release(self, message: ReleasePartitions) -> Awaitable[Any] | None:
        """Delete a job's (or data namespace's) partitions; None if the namespace is invalid."""
        namespace = message.data_namespace or message.job_id
        try:
            validate_namespace(namespace)
        except InvalidDataNamespace as exc:
            log.warning("ReleasePartitions ignored: %s", exc)
            return None
        return self._run_in_thread(release_job_partitions, self.data_dir, namespace)

    # -- the consumer's side ---------------------------------------------------------------------

    def input_fetcher(self, own_address: str, ask: Ask) -> FetchInputs | None:
        """How a task (in its thread) fetches its inputs produced on other TaskManagers;
        None when partitions are not served over the network (the data directory is shared)."""
        if self.serving != pf.NETWORK:
            return None
        data_dir = self.data_dir
        return lambda descriptor: fetch_remote_inputs(descriptor, own_address, data_dir, ask)


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
    if not descriptor.input_gates:
        return descriptor, None  # a source: nothing to fetch (and no folder path to build)
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
            broadcast = gate.partitioner is Partitioner.BROADCAST
            first, count = gate.consumed_subpartition_index, 1 if broadcast else gate.consumed_subpartition_count
            # A run of subpartitions (a consumer with decided parallelism) lands in one
            # folder per partition: each keeps its own `__sub=<i>` files there.
            keys = [
                pf.PartitionKey(namespace, gate.result_id, number, index, broadcast=broadcast)
                for index in range(first, first + count)
            ]
            target = pf.fetched_partition_dir(base, keys[0])
            try:
                for key in keys:
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
