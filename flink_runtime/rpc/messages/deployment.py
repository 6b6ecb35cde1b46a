"""Deploying tasks: the deployment descriptors (Flink's TaskDeploymentDescriptor and its
parts), SubmitTask and CancelTask, and the TaskManager's answer to them.
"""

from __future__ import annotations

from typing import Any

from flink_runtime.jobgraph.jobgraph import Partitioner, ResultPartitionType
from flink_runtime.rpc.messages.base import Message, RpcError


class ResultPartitionDeploymentDescriptor(Message):
    partition_id: str
    result_id: str
    partition_number: int
    number_of_subpartitions: int
    partitioner: Partitioner
    keys: list[str] = []
    result_type: ResultPartitionType = ResultPartitionType.BLOCKING


class InputGateDeploymentDescriptor(Message):
    result_id: str
    partitioner: Partitioner
    # Which subpartition of each producer partition this consumer reads: from this index,
    # `consumed_subpartition_count` of them (more than one: a consumer whose parallelism
    # was decided lower than its producers split their partitions for; Spark vertices
    # only, operators/spark/io.py read_gate).
    consumed_subpartition_index: int
    # Where each consumed partition's committed data lives, in partition order.
    partition_locations: list[str]
    consumed_subpartition_count: int = 1
    # Beside each location: the partition's number and the RPC address of the TaskManager
    # that produced it, which serves it to consumers elsewhere (io/partition_files.py).
    partition_numbers: list[int] = []
    partition_addresses: list[str] = []
    # ... and the attempt that finished it: a copy visible here under the location (a
    # shared data directory) is read in place only if that attempt committed it.
    partition_producers: list[str] = []
    # Committed chunks restored from a savepoint, read in addition to the partitions.
    chunk_locations: list[str] = []


class TaskDeploymentDescriptor(Message):
    job_id: str
    job_name: str
    execution_id: str
    # The deploying JobManager's id: the task's messages carry it (FencedMessage), and a
    # TaskManager accepts tasks only from the JobManager it is registered with.
    jobmanager_id: str
    allocation_id: str
    slot_index: int
    # Where the job's data lives under the data directory and sink staging: the job id,
    # `<job id>/run-<8 hex>` for a job recovered after a JobManager restart (so the new
    # run never mixes its chunks with the files of the run it recovers from), or
    # `<job id>/round-<n>` for a later round of a continuous job.
    data_namespace: str
    vertex_id: str
    task_name: str
    subtask_index: int
    parallelism: int
    attempt_number: int
    invokable: str
    vertex_config: dict[str, Any] = {}
    job_config: dict[str, Any] = {}
    libraries: list[str] = []
    produced_partitions: list[ResultPartitionDeploymentDescriptor] = []
    input_gates: list[InputGateDeploymentDescriptor] = []
    # The JobManager's security.allowed-directories (normalized): the TaskManager confines
    # the task's reads and commits to them (and to its own list, if it has one).
    allowed_directories: list[str] = []
    # What the slot holds (cpu_cores, task_heap_memory_mb, managed_memory_mb): its share of
    # the TaskManager, which the task's Spark work is sized by. Empty when the TaskManager's
    # resources are not known. Additive with a default, so no version bump.
    slot_resource: dict[str, float] = {}


class SubmitTask(Message):
    descriptor: TaskDeploymentDescriptor


class SubmitTasks(Message):
    """JM -> TM: the deployments one JobManager mailbox turn made to one TaskManager, as
    one message (one send and one answer instead of one each).

    Each entry is Flink's SubmitTask and is taken as if it came alone, in list order:
    fenced, checked against its slot and answered on its own; a refused entry fails only
    its own task. A turn that deploys one task there still sends a lone SubmitTask.
    """

    tasks: list[SubmitTask]


class TaskOperationResults(Message):
    """TM -> JM: the answer to each entry of a SubmitTasks, in its order: what the entry
    would have been answered alone (TaskOperationResult), or the RpcError of a handler that
    raised on it (the JobManager then fails and cancels that attempt, as after a failed ask)."""

    results: list[TaskOperationResult | RpcError] = []


class CancelTask(Message):
    execution_id: str
    # The sender's fencing token (its `jobmanager_id`); a TaskManager registered with
    # another JobManager ignores the command. Empty only from senders outside a cluster.
    jobmanager_id: str = ""


class TaskOperationResult(Message):
    execution_id: str
    success: bool
    reason: str = ""
