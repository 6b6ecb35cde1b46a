"""The typed, versioned messages of the runtime's protocol, named as in Flink's design.

Every message is a msgspec Struct tagged with its class name (not its module: which
module of this package defines it is no part of the wire format), so a message on the
wire says what it is and the decoder refuses anything it does not know. The envelope
carries PROTOCOL_VERSION; RegisterTaskManager repeats it so an incompatible
TaskManager is refused by name rather than misunderstood.

| from -> to   | message                    | answer                                       |
|--------------|----------------------------|----------------------------------------------|
| TM -> JM     | RegisterTaskManager        | AcknowledgeRegistration / AlreadyRegistered / RefuseRegistration |
| client -> JM | SubmitJob                  | Success / JobSubmissionFailure               |
| client -> JM | CancelJob                  | CancellationSuccess / CancellationFailure    |
| JM -> TM     | SubmitTask                 | TaskOperationResult                          |
| JM -> TM     | SubmitTasks                | TaskOperationResults (a batch of the above)  |
| JM -> TM     | CancelTask                 | TaskOperationResult                          |
| TM -> JM     | UpdateTaskExecutionState   | Acknowledge                                  |
| TM -> JM     | UpdateTaskExecutionStates  | AcknowledgeTaskExecutionStates (a batch of the above) |
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
| planner -> TM | ResolvePlan               | PlanResolved / PlanRefused                   |

The messages live in one module per concept; every user imports them from here:

  base.py          Message, FencedMessage, Acknowledge, RpcError, PROTOCOL_VERSION
  registration.py  registration and heartbeats
  jobs.py          job submission, cancellation, JobStatusChanged
  deployment.py    deployment descriptors, SubmitTask, CancelTask
  task_reports.py  what tasks report: state updates, split requests, finished partitions
  checkpoints.py   TriggerCheckpoint and the tasks' answers
  logs.py          log files, task logs and thread dumps of a TaskManager
  partitions.py    partitions served by their producer's TaskManager, and their release
  planning.py      a Spark plan resolved by a TaskManager for the JobManager's planner
"""

from __future__ import annotations

from flink_runtime.rpc.messages.base import (
    PROTOCOL_VERSION,
    Acknowledge,
    FencedMessage,
    Message,
    RpcError,
)
from flink_runtime.rpc.messages.checkpoints import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    TriggerCheckpoint,
)
from flink_runtime.rpc.messages.deployment import (
    CancelTask,
    InputGateDeploymentDescriptor,
    ResultPartitionDeploymentDescriptor,
    SubmitTask,
    SubmitTasks,
    TaskDeploymentDescriptor,
    TaskOperationResult,
    TaskOperationResults,
)
from flink_runtime.rpc.messages.jobs import (
    CancelJob,
    CancellationFailure,
    CancellationSuccess,
    JobStatusChanged,
    JobSubmissionFailure,
    SubmitJob,
    Success,
)
from flink_runtime.rpc.messages.logs import (
    LogFileChunk,
    LogFileInfo,
    LogFileRefused,
    LogFiles,
    RequestLogFile,
    RequestLogFiles,
    RequestTaskLog,
    RequestThreadDump,
    TaskLogLines,
    ThreadDump,
)
from flink_runtime.rpc.messages.partitions import (
    PartitionFileChunk,
    PartitionFiles,
    PartitionRequestRefused,
    ReleasePartitions,
    RequestPartitionFile,
    RequestPartitionFiles,
    RequestSubpartitionFiles,
    SubpartitionFiles,
)
from flink_runtime.rpc.messages.planning import PlanRefused, PlanResolved, ResolvePlan
from flink_runtime.rpc.messages.registration import (
    AcknowledgeRegistration,
    AlreadyRegistered,
    DisconnectTaskManager,
    Heartbeat,
    HeartbeatResponse,
    RefuseRegistration,
    RegisterTaskManager,
)
from flink_runtime.rpc.messages.task_reports import (
    AcknowledgeTaskExecutionStates,
    NextInputSplit,
    RequestNextInputSplit,
    ScheduleOrUpdateConsumers,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
)

__all__ = [
    "Acknowledge",
    "AcknowledgeCheckpoint",
    "AcknowledgeRegistration",
    "AcknowledgeTaskExecutionStates",
    "AlreadyRegistered",
    "CancelJob",
    "CancelTask",
    "CancellationFailure",
    "CancellationSuccess",
    "DeclineCheckpoint",
    "DisconnectTaskManager",
    "FencedMessage",
    "Heartbeat",
    "HeartbeatResponse",
    "InputGateDeploymentDescriptor",
    "JobStatusChanged",
    "JobSubmissionFailure",
    "LogFileChunk",
    "LogFileInfo",
    "LogFileRefused",
    "LogFiles",
    "Message",
    "NextInputSplit",
    "PROTOCOL_VERSION",
    "PartitionFileChunk",
    "PartitionFiles",
    "PartitionRequestRefused",
    "PlanRefused",
    "PlanResolved",
    "RefuseRegistration",
    "RegisterTaskManager",
    "ReleasePartitions",
    "RequestLogFile",
    "RequestLogFiles",
    "RequestNextInputSplit",
    "RequestPartitionFile",
    "RequestPartitionFiles",
    "RequestSubpartitionFiles",
    "RequestTaskLog",
    "RequestThreadDump",
    "ResolvePlan",
    "ResultPartitionDeploymentDescriptor",
    "RpcError",
    "ScheduleOrUpdateConsumers",
    "SubmitJob",
    "SubmitTask",
    "SubmitTasks",
    "SubpartitionFiles",
    "Success",
    "TaskDeploymentDescriptor",
    "TaskLogLines",
    "TaskOperationResult",
    "TaskOperationResults",
    "ThreadDump",
    "TriggerCheckpoint",
    "UpdateTaskExecutionState",
    "UpdateTaskExecutionStates",
    "WireMessage",
]

# Every message that may travel in an envelope (rpc/service.py decodes into this union).
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
    | SubmitTasks
    | CancelTask
    | TaskOperationResult
    | TaskOperationResults
    | UpdateTaskExecutionState
    | UpdateTaskExecutionStates
    | AcknowledgeTaskExecutionStates
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
    | ResolvePlan
    | PlanResolved
    | PlanRefused
)
