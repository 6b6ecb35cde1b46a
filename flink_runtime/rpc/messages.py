"""The typed, versioned messages of the runtime's protocol, named as in Flink's design.

Every message is a msgspec Struct tagged with its class name, so a message on the wire
says what it is and the decoder refuses anything it does not know. The envelope
carries PROTOCOL_VERSION; RegisterTaskManager repeats it so an incompatible
TaskManager is refused by name rather than misunderstood.

| from -> to   | message                    | answer                                       |
|--------------|----------------------------|----------------------------------------------|
| TM -> JM     | RegisterTaskManager        | AcknowledgeRegistration / AlreadyRegistered / RefuseRegistration |
| client -> JM | SubmitJob                  | Success / JobSubmissionFailure               |
| client -> JM | CancelJob                  | CancellationSuccess / CancellationFailure    |
| JM -> TM     | SubmitTask                 | TaskOperationResult                          |
| JM -> TM     | CancelTask                 | TaskOperationResult                          |
| TM -> JM     | UpdateTaskExecutionState   | Acknowledge                                  |
| TM -> JM     | RequestNextInputSplit      | NextInputSplit                               |
| TM -> JM     | ScheduleOrUpdateConsumers  | Acknowledge                                  |
| JM -> TM     | Heartbeat                  | HeartbeatResponse                            |
| TM -> JM     | DisconnectTaskManager      | Acknowledge                                  |
| JM -> TM     | ReleasePartitions          |                                              |
| JM -> TM     | TriggerCheckpoint          | (TM -> JM) AcknowledgeCheckpoint / DeclineCheckpoint |
| JM -> TM     | RequestLogFiles            | LogFiles                                     |
| JM -> TM     | RequestLogFile             | LogFileChunk / LogFileRefused                |
| JM -> TM     | RequestTaskLog             | TaskLogLines                                 |
| JM -> TM     | RequestThreadDump          | ThreadDump                                   |
| TM -> TM     | RequestSubpartitionFiles   | SubpartitionFiles / PartitionRequestRefused  |
| TM -> TM     | RequestPartitionFile       | PartitionFileChunk / PartitionRequestRefused |
| JM -> TM     | RequestPartitionFiles      | PartitionFiles / PartitionRequestRefused     |
| JM -> TM     | RequestPartitionFile       | PartitionFileChunk / PartitionRequestRefused |
| JM -> subscribers | JobStatusChanged      |                                              |
"""

from __future__ import annotations

from typing import Any

import msgspec

from flink_runtime.io.metrics import IOMetrics
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import JobGraph, Partitioner, ResultPartitionType

# Bumped on any incompatible change to a message below.
PROTOCOL_VERSION = 4


class Message(msgspec.Struct, tag=True, kw_only=True, omit_defaults=True):
    """Base of every protocol message; the tag is the class name."""


class FencedMessage(Message):
    """A message from a task, fenced by the JobManager that deployed it (Flink's
    FencedRpcEndpoint with the JobMasterId as token).

    A task keeps running after its JobManager died until its TaskManager notices; a
    JobManager started since then (recovering the same job from the job store) refuses
    whatever such a task reports, so work computed for the old run never completes the
    new one.
    """

    jobmanager_id: str  # the `jobmanager_id` of the JobManager that deployed the task


# -- registration and liveness --------------------------------------------------------------


class RegisterTaskManager(Message):
    task_manager_id: str
    address: str  # the TaskManager's RPC address, tcp://host:port
    host: str  # for locality of input splits
    slots: int
    resources: dict[str, float] = {}
    secret: str = ""
    protocol_version: int = PROTOCOL_VERSION
    # Slots still held by live tasks (of an earlier registration: a former leader's, or
    # this JobManager's before it took the TaskManager for lost): not free until a
    # HeartbeatResponse no longer lists them. Additive with a default, so no version bump.
    occupied_slots: list[int] = []
    # What its slots share in total (Flink's TaskExecutorResourceSpec): cpu_cores,
    # task_heap_memory_mb, managed_memory_mb. Empty from an older TaskManager: its slots
    # are then counted only, as before. Additive with a default, so no version bump.
    total_resource: dict[str, float] = {}


class AcknowledgeRegistration(Message):
    registration_id: str
    jobmanager_id: str
    # The JobManager's REST API, where TaskManagers download job libraries (GET /blobs/...).
    rest_url: str = ""


class AlreadyRegistered(Message):
    registration_id: str
    jobmanager_id: str
    # The JobManager's REST API, where TaskManagers download job libraries (GET /blobs/...).
    rest_url: str = ""


class RefuseRegistration(Message):
    reason: str


class DisconnectTaskManager(Message):
    task_manager_id: str
    reason: str


class Heartbeat(Message):
    jobmanager_id: str


class HeartbeatResponse(Message):
    task_manager_id: str
    # Execution (attempt) ids the TaskManager runs, and those whose final state the
    # JobManager has not acknowledged yet: the JobManager fails what it believes runs
    # there but is missing, and cancels what it does not know (heartbeat/reconciliation.py).
    running_executions: list[str] = []
    # The TaskManager's latest CPU, memory and Spark JVM figures, by Flink's metric names
    # (taskmanager/system_metrics.py): the JobManager serves them for the whole cluster.
    metrics: dict[str, float] = {}
    # Slots held by live tasks (Flink's SlotReport): the JobManager frees a slot it took
    # as occupied at registration once this no longer lists it (scheduler/slotpool.py).
    occupied_slots: list[int] = []


class Acknowledge(Message):
    ok: bool = True
    reason: str = ""


class RpcError(Message):
    """Answer to an ask whose handler raised: the remote side's message, not a trace."""

    error: str


# -- jobs -------------------------------------------------------------------------------------


class SubmitJob(Message):
    job_graph: JobGraph


class Success(Message):
    """The job was accepted and its sources run."""

    job_id: str


class JobSubmissionFailure(Message):
    job_id: str
    reason: str
    # "invalid" (the graph is wrong), "duplicate" (job id in use), "failed" (ended early)
    kind: str = "failed"


class CancelJob(Message):
    job_id: str


class CancellationSuccess(Message):
    job_id: str


class CancellationFailure(Message):
    job_id: str
    reason: str


class JobStatusChanged(Message):
    job_id: str
    old_state: str
    new_state: str
    timestamp: float  # seconds since the epoch


# -- tasks --------------------------------------------------------------------------------


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
    # Which subpartition of each producer partition this consumer reads.
    consumed_subpartition_index: int
    # Where each consumed partition's committed data lives, in partition order.
    partition_locations: list[str]
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


class CancelTask(Message):
    execution_id: str
    # The sender's fencing token (its `jobmanager_id`); a TaskManager registered with
    # another JobManager ignores the command. Empty only from senders outside a cluster.
    jobmanager_id: str = ""


class TaskOperationResult(Message):
    execution_id: str
    success: bool
    reason: str = ""


class UpdateTaskExecutionState(FencedMessage):
    job_id: str
    execution_id: str
    state: str  # an ExecutionState name
    error: str | None = None
    # With FINISHED: the handle of the task's final operator state snapshot, if it has state.
    state_handle: dict[str, Any] | None = None
    # With a final state: what the attempt read and wrote (None from senders that predate it).
    io_metrics: IOMetrics | None = None
    # With FAILED: finished partitions (ids) the task could not fetch from the TaskManager
    # that produced them; their producers run again (Flink's PartitionNotFoundException).
    missing_partitions: list[str] = []


class TriggerCheckpoint(Message):
    job_id: str
    execution_id: str
    checkpoint_id: int
    timestamp: float
    jobmanager_id: str = ""  # the sender's fencing token, as CancelTask's


class AcknowledgeCheckpoint(FencedMessage):
    job_id: str
    execution_id: str
    checkpoint_id: int
    # The task's operator state for this checkpoint (a state backend handle), if any.
    state_handle: dict[str, Any] | None = None


class DeclineCheckpoint(FencedMessage):
    job_id: str
    execution_id: str
    checkpoint_id: int
    reason: str


class RequestNextInputSplit(FencedMessage):
    job_id: str
    execution_id: str
    host: str | None = None
    # The split this subtask asked for last, now completed: its output is committed
    # (chunks in the result partitions, sink staging), so it is never handed out again.
    completed_split: int | None = None


class NextInputSplit(Message):
    split: InputSplit | None = None


class ScheduleOrUpdateConsumers(FencedMessage):
    job_id: str
    # The producing attempt: only the current attempt of the partition's producer may
    # declare it finished.
    execution_id: str
    partition_id: str
    location: str  # where the committed partition can be read
    # The producing TaskManager's RPC address: where consumers on other TaskManagers fetch it.
    data_address: str = ""


class ReleasePartitions(Message):
    """The job ended (or a continuous job's round did): its result partitions may be deleted."""

    job_id: str
    # Only this namespace (`<job id>/run-<8 hex>`, `<job id>/round-<n>`); empty: everything
    # of the job. Never a path: the TaskManager refuses anything else.
    data_namespace: str = ""
    jobmanager_id: str = ""  # the sender's fencing token, as CancelTask's


# -- logs (flink_runtime/logs/; the TaskManager's side is taskmanager/log_service.py) --------


class LogFileInfo(Message):
    name: str
    size: int
    mtime: int  # epoch milliseconds, as Flink's LogInfo


class RequestLogFiles(Message):
    """JM -> TM: which log files do you write (the REST API's /taskmanagers/:id/logs)?"""


class LogFiles(Message):
    files: list[LogFileInfo] = []
    # The current log and the stdout copy among them ("" when the process writes none).
    log_name: str = ""
    out_name: str = ""


class RequestLogFile(Message):
    """JM -> TM: bytes of one of its log files, at most `max_bytes`.

    `first`/`last` are an HTTP byte range, resolved by the TaskManager against the file
    as it reads it (logs/ranges.py): first-last inclusive; first- to the end; last
    alone (first None) the file's last `last` bytes; neither: its tail.
    """

    name: str
    first: int | None = None
    last: int | None = None
    max_bytes: int = 1 << 20


class LogFileChunk(Message):
    name: str
    offset: int
    file_size: int
    partial: bool
    data: bytes = b""


class LogFileRefused(Message):
    name: str
    # "invalid-name", "not-found" or "range" (outside the file of `file_size` bytes).
    kind: str
    reason: str
    file_size: int = 0


class RequestTaskLog(Message):
    """JM -> TM: the job's task-tagged log records, of one vertex and subtask if given."""

    job_id: str
    vertex_id: str | None = None
    subtask_index: int | None = None
    # Only records stamped at or after this ("YYYY-MM-DD HH:MM:SS,mmm", the log's own stamp).
    since: str = ""
    max_bytes: int = 1 << 20


class TaskLogLines(Message):
    records: list[str] = []  # oldest first; a record is a line and its traceback lines
    truncated: bool = False  # older records were left out (max_bytes)


class RequestThreadDump(Message):
    """JM -> TM: the stacks of your Python threads (/taskmanagers/:id/thread-dump)."""


class ThreadDump(Message):
    threads: list[tuple[str, str]] = []  # (name, stack as Java's ThreadInfo prints it)


# -- partitions served by their producer's TaskManager (taskmanager/partition_service.py) --


class RequestSubpartitionFiles(Message):
    """TM -> TM: the files a consumer of one subpartition needs (names and sizes)."""

    data_namespace: str
    result_id: str
    partition_number: int
    subpartition_index: int
    broadcast: bool = False


class SubpartitionFiles(Message):
    files: dict[str, int] = {}  # name inside the partition -> size in bytes


class RequestPartitionFiles(Message):
    """JM -> TM: every committed file of one partition (a savepoint copies them)."""

    data_namespace: str
    result_id: str
    partition_number: int


class PartitionFiles(Message):
    files: dict[str, int] = {}  # name inside the partition -> size in bytes


class RequestPartitionFile(Message):
    """TM/JM -> TM: at most `max_bytes` of one file that SubpartitionFiles or
    PartitionFiles named, from `offset`."""

    data_namespace: str
    result_id: str
    partition_number: int
    name: str
    offset: int = 0
    max_bytes: int = 4 << 20


class PartitionFileChunk(Message):
    name: str
    offset: int
    file_size: int
    data: bytes = b""


class PartitionRequestRefused(Message):
    # "not-found" (this TaskManager does not have it, or not completely) or "invalid".
    kind: str
    reason: str


WireMessage = (
    RegisterTaskManager
    | AcknowledgeRegistration
    | AlreadyRegistered
    | RefuseRegistration
    | DisconnectTaskManager
    | Heartbeat
    | HeartbeatResponse
    | Acknowledge
    | RpcError
    | SubmitJob
    | Success
    | JobSubmissionFailure
    | CancelJob
    | CancellationSuccess
    | CancellationFailure
    | JobStatusChanged
    | SubmitTask
    | CancelTask
    | TaskOperationResult
    | UpdateTaskExecutionState
    | RequestNextInputSplit
    | NextInputSplit
    | ScheduleOrUpdateConsumers
    | ReleasePartitions
    | TriggerCheckpoint
    | AcknowledgeCheckpoint
    | DeclineCheckpoint
    | RequestLogFiles
    | LogFiles
    | RequestLogFile
    | LogFileChunk
    | LogFileRefused
    | RequestTaskLog
    | TaskLogLines
    | RequestThreadDump
    | ThreadDump
    | RequestSubpartitionFiles
    | RequestPartitionFiles
    | PartitionFiles
    | SubpartitionFiles
    | RequestPartitionFile
    | PartitionFileChunk
    | PartitionRequestRefused
)
