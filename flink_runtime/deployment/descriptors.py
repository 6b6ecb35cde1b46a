"""Building a TaskDeploymentDescriptor (JobManager side) and turning one into the task's
Environment (TaskManager side): the one place either crossing is written."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from flink_runtime.executiongraph import Execution, subpartition_range
from flink_runtime.invokable import Environment
from flink_runtime.io.partitions import InputGate, ResultPartitionWriter
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import Partitioner
from flink_runtime.rpc.messages import (
    InputGateDeploymentDescriptor,
    ResultPartitionDeploymentDescriptor,
    TaskDeploymentDescriptor,
)
from flink_runtime.security.paths import AllowedDirectories
from flink_runtime.security.secret_store import SecretStore


def task_deployment_descriptor(
    execution: Execution,
    *,
    job_id: str,
    job_name: str,
    jobmanager_id: str,
    allocation_id: str,
    slot_index: int,
    data_namespace: str,
    vertex_config: dict[str, Any],
    job_config: dict[str, Any],
    libraries: list[str],
    partition_locations: Mapping[str, str],
    chunk_locations: Callable[[str, range], list[str]],
    partition_addresses: Mapping[str, str] | None = None,
    allowed_directories: list[str] | None = None,
) -> TaskDeploymentDescriptor:
    """What a TaskManager needs to run this execution. `partition_locations` holds where
    finished partitions were committed, `partition_addresses` the RPC address of the
    TaskManager that produced each (it serves them); `chunk_locations(result_id,
    partitions)` the chunks a savepoint restored for the partitions a gate reads."""
    addresses = partition_addresses or {}
    vertex = execution.vertex
    ejv = vertex.job_vertex
    produced = []
    for partition in vertex.produced_partitions:
        edge = partition.result.edge
        produced.append(
            ResultPartitionDeploymentDescriptor(
                partition_id=partition.partition_id,
                result_id=partition.result.id,
                partition_number=partition.partition_number,
                number_of_subpartitions=partition.number_of_subpartitions,
                partitioner=edge.partitioner if edge is not None else Partitioner.FORWARD,
                keys=list(edge.keys) if edge is not None else [],
                result_type=partition.result.result_type,
            )
        )
    gates = []
    for group in vertex.consumed_partition_groups:
        # Only partitions available now: finished by their producer's current attempt.
        partitions = [p for p in group if p.is_finished and p.partition_id in partition_locations]
        subpartitions = subpartition_range(next(iter(group)), vertex.subtask_index)
        gates.append(
            InputGateDeploymentDescriptor(
                result_id=group.result.id,
                partitioner=group.result.edge.partitioner if group.result.edge is not None else Partitioner.FORWARD,
                consumed_subpartition_index=subpartitions.start,
                consumed_subpartition_count=len(subpartitions),
                partition_locations=[partition_locations[p.partition_id] for p in partitions],
                partition_numbers=[p.partition_number for p in partitions],
                partition_addresses=[addresses.get(p.partition_id, "") for p in partitions],
                partition_producers=[p.produced_by or p.producer.current_execution.attempt_id for p in partitions],
                chunk_locations=chunk_locations(group.result.id, group.partition_range),
            )
        )
    return TaskDeploymentDescriptor(
        job_id=job_id,
        job_name=job_name,
        execution_id=execution.attempt_id,
        jobmanager_id=jobmanager_id,
        allocation_id=allocation_id,
        slot_index=slot_index,
        data_namespace=data_namespace,
        vertex_id=ejv.id,
        task_name=vertex.task_name_with_subtask,
        subtask_index=vertex.subtask_index,
        parallelism=ejv.parallelism,
        attempt_number=execution.attempt_number,
        invokable=ejv.job_vertex.invokable,
        vertex_config=vertex_config,
        job_config=job_config,
        libraries=libraries,
        produced_partitions=produced,
        input_gates=gates,
        allowed_directories=list(allowed_directories or []),
    )


def data_namespace_of(descriptor: TaskDeploymentDescriptor) -> str:
    return descriptor.data_namespace or descriptor.job_id


def partition_writers(descriptor: TaskDeploymentDescriptor, data_dir: str) -> list[ResultPartitionWriter]:
    """JSON-lines writers for the partitions the task produces (invokables that do not
    write their own partitions)."""
    return [
        ResultPartitionWriter(
            data_dir,
            data_namespace_of(descriptor),
            partition.result_id,
            partition.partition_number,
            partition.number_of_subpartitions,
            partition.partitioner,
            partition.keys,
            descriptor.execution_id,
        )
        for partition in descriptor.produced_partitions
    ]


def task_environment(
    descriptor: TaskDeploymentDescriptor,
    *,
    outputs: list[ResultPartitionWriter],
    next_input_split: Callable[[int | None], InputSplit | None],
    cancelled: threading.Event,
    data_dir: str,
    spark: Callable[[], Any],
    own_allowed_directories: list[str] | None = None,
    secrets: SecretStore | None = None,
) -> Environment:
    """Everything the running subtask may touch, from its descriptor and its TaskManager."""
    return Environment(
        job_id=descriptor.job_id,
        vertex_id=descriptor.vertex_id,
        task_name=descriptor.task_name,
        subtask_index=descriptor.subtask_index,
        parallelism=descriptor.parallelism,
        attempt_number=descriptor.attempt_number,
        config=descriptor.vertex_config,
        job_config=descriptor.job_config,
        outputs=outputs,
        inputs=[
            InputGate(gate.result_id, gate.consumed_subpartition_index, gate.partition_locations)
            for gate in descriptor.input_gates
        ],
        next_input_split=next_input_split,
        cancelled=cancelled,
        execution_id=descriptor.execution_id,
        slot_index=descriptor.slot_index,
        data_namespace=data_namespace_of(descriptor),
        data_dir=data_dir,
        produced_partitions=descriptor.produced_partitions,
        input_gates=descriptor.input_gates,
        spark=spark,
        allowed_directories=AllowedDirectories(descriptor.allowed_directories, own_allowed_directories or []),
        secrets=secrets or SecretStore(),
    )
