"""The TaskManager: runs the tasks the JobManager deploys and reports their states.

The TaskExecutor is an actor shell composed, through its constructor, of components
that own their state and run in its mailbox:

- `connection` (jobmanager_connection.py): registration with the JobManager, its
  heartbeats, the leader retrieval with standby JobManagers; it tells the TaskExecutor
  when it registered with a JobManager and when it lost one;
- `task_table` (task_table.py): the running tasks, their state updates in the order
  they happened, the final states the JobManager has not answered yet, cancellation;
- `partitions` (partition_service.py): the partitions this TaskManager produced,
  served to consumers, released, and the fetching of a task's remote inputs;
- `logs` (log_service.py): the process's log files for the REST API;
- `plans` (plan_resolution.py): Spark plans resolved for the JobManager's planner;
- `spark_session` (spark_session.py) and `channels` (task_channels.py): what a task's
  thread uses (the SparkSession; blocking asks through the event loop).

Its handlers check what concerns the whole TaskManager (registered? fenced?) and
delegate. A task (taskmanager/task.py) is made from its deployment descriptor in one
place, `create_task`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime.blob import BlobServer
from flink_runtime.configuration import Configuration
from flink_runtime.highavailability.leader_retrieval import LeaderRetriever, high_availability_enabled
from flink_runtime.logs.thread_dump import thread_dump
from flink_runtime.rpc.endpoint import RpcEndpoint, handles
from flink_runtime.rpc.messages import (
    AcknowledgeCheckpoint,
    CancelTask,
    Heartbeat,
    HeartbeatResponse,
    LogFileChunk,
    LogFileRefused,
    LogFiles,
    Message,
    PartitionFileChunk,
    PartitionFiles,
    PartitionRequestRefused,
    PlanRefused,
    PlanResolved,
    RegisterTaskManager,
    ReleasePartitions,
    RequestLogFile,
    RequestLogFiles,
    RequestPartitionFile,
    RequestPartitionFiles,
    RequestSubpartitionFiles,
    RequestTaskLog,
    RequestThreadDump,
    ResolvePlan,
    SubmitTask,
    SubmitTasks,
    SubpartitionFiles,
    TaskDeploymentDescriptor,
    TaskLogLines,
    TaskOperationResult,
    TaskOperationResults,
    ThreadDump,
    TriggerCheckpoint,
)
from flink_runtime.rpc.service import RpcService
from flink_runtime.rpc.transport import RpcTransport
from flink_runtime.security import bearer, client_verify, rest_token
from flink_runtime.security.cluster_secret import cluster_secret as resolve_cluster_secret
from flink_runtime.security.paths import allowed_directories
from flink_runtime.security.secret_store import SecretStore
from flink_runtime.taskmanager.errors import CommandRefused
from flink_runtime.taskmanager.jobmanager_connection import JobManagerConnection
from flink_runtime.taskmanager.log_service import LogService
from flink_runtime.taskmanager.partition_service import PartitionService
from flink_runtime.taskmanager.plan_resolution import PlanResolution
from flink_runtime.taskmanager.resources import task_manager_resources, task_manager_total_resource
from flink_runtime.taskmanager.spark_session import TaskManagerSpark
from flink_runtime.taskmanager.system_metrics import SystemMetricsSampler
from flink_runtime.taskmanager.task import FetchInputs, Task, blob_cache_dir_for
from flink_runtime.taskmanager.task_channels import TaskChannels
from flink_runtime.taskmanager.task_table import FINAL_STATE_ATTEMPTS, RunningTask, TaskStateChanged, TaskTable

log = logging.getLogger(__name__)
# How long a SubmitTask that arrived before the registration's acknowledgement waits for it.
REGISTRATION_ANSWER_GRACE = 2.0

__all__ = ["FINAL_STATE_ATTEMPTS", "TaskExecutor", "default_data_dir"]


def default_data_dir() -> str:
    return Configuration().get(cfg.IO_TMP_DIRS)


class TaskExecutor(RpcEndpoint):
    def __init__(
        self,
        config: Configuration,
        jobmanager_address: str | None = None,
        cluster_secret: str = "",
        *,
        rpc: RpcTransport | None = None,
    ) -> None:
        """cluster_secret: the RPC's (a MiniCluster's own); by default the configured one, or
        on loopback this user's (security/cluster_secret.py). RPC is never unauthenticated.
        rpc: injected by the deterministic simulator (tests/simulation/), an in-memory
        transport instead of ZeroMQ (it replaces the tasks through `create_task`)."""
        jobmanager_address = jobmanager_address or (
            f"tcp://{config.get(cfg.JOBMANAGER_RPC_ADDRESS)}:{config.get(cfg.JOBMANAGER_RPC_PORT)}"
        )
        host = config.get(cfg.TASKMANAGER_HOST)
        jobmanager_host = jobmanager_address.removeprefix("tcp://").rsplit(":", 1)[0]
        self.cluster_secret = cluster_secret or resolve_cluster_secret(
            config,
            "TaskManager",
            {cfg.TASKMANAGER_HOST.key: host, cfg.JOBMANAGER_RPC_ADDRESS.key: jobmanager_host},
        )
        rpc = rpc or RpcService(
            host,
            config.get(cfg.TASKMANAGER_RPC_PORT),
            framesize=config.get(cfg.FRAMESIZE),
            cluster_secret=self.cluster_secret,
        )
        self.resource_id = config.get(cfg.TASKMANAGER_RESOURCE_ID) or f"tm-{uuid.uuid4().hex[:12]}"
        super().__init__(f"TaskExecutor {self.resource_id}", rpc)
        self.config = config
        self.host = host
        self.slots = config.get(cfg.TASKMANAGER_SLOTS) or (os.cpu_count() or 1)
        self.data_dir = config.get(cfg.IO_TMP_DIRS)
        # Its own security.allowed-directories, enforced beside the JobManager's (sent with
        # each task): a TaskManager without the key still confines tasks to the cluster's list.
        self.allowed_directories = allowed_directories(config)
        # secret://<name> references of the jobs' sources and sinks resolve here, on the TaskManager.
        self.secrets = SecretStore.of(config)
        self.ask_timeout = config.get_seconds(cfg.ASK_TIMEOUT)
        # Job libraries come from the JobManager's REST API, asked with its token and TLS trust.
        self._rest_headers = bearer(rest_token(config))
        self._rest_verify = client_verify(config)
        self.partitions = PartitionService.from_configuration(config, self.data_dir)
        self.logs = LogService()
        self.connection = JobManagerConnection(
            config,
            jobmanager_address,
            mailbox=self,
            transport=rpc,
            supervisor=self,
            registration_request=self._registration_request,
            listener=self,
            name=self.resource_id,
            # Standby JobManagers: the leader is read from the job store's database, not configured.
            leader_source=LeaderRetriever.from_configuration(config) if high_availability_enabled(config) else None,
        )
        self.task_table = TaskTable(
            self,
            lambda message: self.rpc.ask(self.connection.jobmanager_address, message, self.ask_timeout),
            self.tell_self_threadsafe,
            cancellation_interval=config.get_seconds(cfg.TASK_CANCELLATION_INTERVAL),
            cancellation_timeout=config.get_seconds(cfg.TASK_CANCELLATION_TIMEOUT),
            name=self.resource_id,
        )
        self.channels = TaskChannels(
            rpc, lambda: self.address, host, lambda: self.connection.jobmanager_address, self.ask_timeout
        )
        self.spark_session = TaskManagerSpark(config, self.slots, self.data_dir)
        self.plans = PlanResolution(
            self.spark, self._blob_server, blob_cache_dir_for(self.data_dir), self.allowed_directories, self.resource_id
        )
        # What every task is given, made once rather than per task (create_task).
        self._blob_server_of: BlobServer | None = None
        self._input_fetcher_of: tuple[tuple[str, Any], FetchInputs | None] | None = None
        # Called by the RPC layer outside the mailbox; handled inside it.
        rpc.on_disconnect = lambda address: self.run_in_mailbox(self.connection.connection_lost, address)
        self.system_metrics = SystemMetricsSampler(
            config.get_seconds(cfg.METRICS_PROBING_INTERVAL), lambda: self.spark_session.session
        )

    # -- what the components own, as the MiniCluster, the entrypoints and tests read it -------------

    @property
    def tasks(self) -> dict[str, RunningTask]:
        return self.task_table.tasks

    @property
    def jobmanager_address(self) -> str:
        return self.connection.jobmanager_address

    @property
    def jobmanager_id(self) -> str | None:
        return self.connection.jobmanager_id

    @property
    def jobmanager_rest_url(self) -> str:
        return self.connection.jobmanager_rest_url

    @property
    def registered(self) -> asyncio.Event:
        """Set while registered with a JobManager."""
        return self.connection.registered

    def spark(self) -> Any:
        """The process's SparkSession, started by the first task that needs it (any thread)."""
        return self.spark_session.get()

    # -- lifecycle ---------------------------------------------------------------------------

    def on_start(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        self.system_metrics.start()
        self.connection.start()
        if self.config.get(cfg.SPARK_WARM_UP):
            # Off the mailbox: a JVM start takes seconds; the first task waits only for what is left.
            threading.Thread(
                target=self.spark_session.warm_up, name=f"spark-warm-up-{self.resource_id}", daemon=True
            ).start()
        else:
            self.spark_session.warmed.set()

    def on_stop(self) -> None:
        self.system_metrics.stop()
        self.task_table.cancel_all(f"TaskManager {self.resource_id} shut down")
        self.spark_session.release()
        self.connection.stop("TaskManager shut down")

    # -- the JobManager connection's news (JobManagerListener) ---------------------------------------

    def jobmanager_registered(self, jobmanager_id: str) -> None:
        self.task_table.cancel_not_deployed_by(jobmanager_id)

    def jobmanager_lost(self, jobmanager_id: str) -> None:
        log.warning("%s: cancelling %d tasks of JobManager %s", self.resource_id, len(self.tasks), jobmanager_id)
        self.task_table.cancel_all(f"TaskManager {self.resource_id} lost JobManager {jobmanager_id}")

    def _registration_request(self) -> RegisterTaskManager:
        return RegisterTaskManager(
            task_manager_id=self.resource_id,
            address=self.address,
            host=self.host,
            slots=self.slots,
            resources=task_manager_resources(self.config, self.slots),
            total_resource=task_manager_total_resource(self.config, self.slots),
            secret=self.cluster_secret,
            # Tasks of an earlier registration may still wind down: the JobManager must not
            # deploy into their slots (this TaskManager would refuse, see _check_slot).
            occupied_slots=self.task_table.occupied_slots(),
        )

    @handles(Heartbeat)
    def on_heartbeat(self, message: Heartbeat) -> HeartbeatResponse:
        self.connection.heartbeat_received(message.jobmanager_id)
        return HeartbeatResponse(
            task_manager_id=self.resource_id,
            running_executions=self.task_table.running_executions(),
            metrics=self.system_metrics.latest,
            occupied_slots=self.task_table.occupied_slots(),
        )

    # -- tasks ---------------------------------------------------------------------------------------

    @handles(SubmitTask)
    def on_submit_task(self, message: SubmitTask) -> TaskOperationResult | Awaitable[TaskOperationResult]:
        if self.connection.jobmanager_id is None:
            return self._submit_once_registered(message)
        return self._submit_task(message)

    @handles(SubmitTasks)
    def on_submit_tasks(self, message: SubmitTasks) -> TaskOperationResults | Awaitable[TaskOperationResults]:
        if self.connection.jobmanager_id is None:
            return self._submit_all_once_registered(message)
        return self._submit_each(message)

    async def _submit_all_once_registered(self, message: SubmitTasks) -> TaskOperationResults:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.registered.wait(), REGISTRATION_ANSWER_GRACE)
        return await self.call_in_mailbox(self._submit_each, message)

    def _submit_each(self, message: SubmitTasks) -> TaskOperationResults:
        """A JobManager's deployments of one turn: each entry fenced, checked, started and
        answered as if it had come alone (one refused fails only its own task)."""
        results = self.answer_each(message.tasks, self._submit_task)
        return TaskOperationResults(results=results)  # type: ignore[arg-type]

    async def _submit_once_registered(self, message: SubmitTask) -> TaskOperationResult:
        """A JobManager offers a new TaskManager's slots in the handler that acknowledges its
        registration, so the SubmitTask may arrive (on another socket) before the
        acknowledgement: wait for it a little before answering "not registered"."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.registered.wait(), REGISTRATION_ANSWER_GRACE)
        return await self.call_in_mailbox(self._submit_task, message)

    def _submit_task(self, message: SubmitTask) -> TaskOperationResult:
        descriptor = message.descriptor
        jobmanager_id = self.connection.jobmanager_id
        if jobmanager_id is None:
            return TaskOperationResult(
                execution_id=descriptor.execution_id,
                success=False,
                reason=f"TaskManager {self.resource_id} is not registered with a JobManager",
            )
        if descriptor.jobmanager_id != jobmanager_id:
            return TaskOperationResult(
                execution_id=descriptor.execution_id,
                success=False,
                reason=f"TaskManager {self.resource_id} is registered with JobManager {jobmanager_id}, "
                f"not with {descriptor.jobmanager_id or '<none>'}",
            )
        if descriptor.execution_id in self.task_table:
            return TaskOperationResult(
                execution_id=descriptor.execution_id, success=False, reason="execution already deployed here"
            )
        try:
            self._check_slot(descriptor)
        except CommandRefused as refused:
            log.warning("%s: refusing %s: %s", self.resource_id, descriptor.task_name, refused.reason)
            return TaskOperationResult(execution_id=descriptor.execution_id, success=False, reason=refused.reason)
        self.task_table.start(self.create_task(descriptor))
        return TaskOperationResult(execution_id=descriptor.execution_id, success=True)

    def _check_slot(self, descriptor: TaskDeploymentDescriptor) -> None:
        """CommandRefused when the slot a task is deployed into cannot take it. A SubmitTask
        can arrive after the JobManager gave up on it (its ask timed out), freed the slot and
        deployed another task there: running both would oversubscribe this TaskManager."""
        # Indices from numberOfTaskSlots up are dynamic slots, carved by the JobManager from
        # this TaskManager's resources for requests with a resource profile, which it sends
        # along (Flink's TaskSlotTable likewise accepts dynamic slots beyond its static ones).
        dynamic = descriptor.slot_index >= self.slots and bool(descriptor.slot_resource)
        if not (0 <= descriptor.slot_index < self.slots or dynamic):
            raise CommandRefused(
                f"slot {descriptor.slot_index} does not exist on TaskManager {self.resource_id} ({self.slots} slots)"
            )
        occupant = self.task_table.slot_occupant(descriptor.slot_index, descriptor.allocation_id)
        if occupant is None:
            return
        raise CommandRefused(
            f"slot {descriptor.slot_index} of TaskManager {self.resource_id} is occupied by "
            f"{occupant.descriptor.task_name} ({occupant.execution_id}, allocation "
            f"{occupant.descriptor.allocation_id}), not free for allocation {descriptor.allocation_id}"
        )

    def create_task(self, descriptor: TaskDeploymentDescriptor) -> RunningTask:
        """The task a descriptor deploys, not started yet (runs in the mailbox)."""
        ask = self.channels.blocking_ask()
        return Task(
            descriptor,
            self.data_dir,
            report=self.task_table.report_from_task_thread,
            request_split=self.channels.split_requester(descriptor, ask),
            notify_partition_ready=self.channels.partition_notifier(descriptor, ask),
            spark=self.spark,
            blob_server=self._blob_server(),
            fetch_inputs=self._input_fetcher(ask),
            allowed_directories=self.allowed_directories,
            secrets=self.secrets,
        )

    def _blob_server(self) -> BlobServer:
        """The current JobManager's REST API for job libraries (one while it stays the same)."""
        url = self.jobmanager_rest_url
        if self._blob_server_of is None or self._blob_server_of.url != url:
            self._blob_server_of = BlobServer(url, self._rest_headers, self._rest_verify)
        return self._blob_server_of

    def _input_fetcher(self, ask: Callable[[str, Message], Message]) -> FetchInputs | None:
        """How tasks fetch remote inputs: made once for this address and event loop's ask."""
        key = (self.address, ask)
        if self._input_fetcher_of is None or self._input_fetcher_of[0] != key:
            self._input_fetcher_of = (key, self.partitions.input_fetcher(self.address, ask))
        return self._input_fetcher_of[1]

    @handles(TaskStateChanged)
    def _on_task_state(self, change: TaskStateChanged) -> None:
        self.task_table.state_changed(change)

    def _fenced(self, message: CancelTask | TriggerCheckpoint | ReleasePartitions) -> bool:
        """True (and logged) when the message is of a JobManager this TaskManager does not obey."""
        try:
            self.connection.check_fencing(type(message).__name__, message.jobmanager_id)
        except CommandRefused:
            return True
        return False

    @handles(CancelTask)
    def on_cancel_task(self, message: CancelTask) -> TaskOperationResult:
        try:
            self.connection.check_fencing(type(message).__name__, message.jobmanager_id)
        except CommandRefused as fenced:
            return TaskOperationResult(execution_id=message.execution_id, success=False, reason=fenced.reason)
        if not self.task_table.cancel(message.execution_id):
            return TaskOperationResult(execution_id=message.execution_id, success=False, reason="unknown execution")
        return TaskOperationResult(execution_id=message.execution_id, success=True)

    @handles(TriggerCheckpoint)
    def on_trigger_checkpoint(self, message: TriggerCheckpoint) -> None:
        # Tasks commit their output as they go (split chunks) and report keyed state when
        # they finish, so a running task has nothing more to snapshot: acknowledge at once.
        # A task that already ended acknowledges too; its FINISHED report carries its output.
        if self._fenced(message):
            return
        task = self.task_table.get(message.execution_id)
        self.rpc.tell(
            self.jobmanager_address,
            AcknowledgeCheckpoint(
                job_id=message.job_id,
                execution_id=message.execution_id,
                checkpoint_id=message.checkpoint_id,
                jobmanager_id=task.descriptor.jobmanager_id if task is not None else self.jobmanager_id or "",
            ),
        )

    # -- partitions and logs (answered off the mailbox by their components) --------------------------

    @handles(ReleasePartitions)
    def on_release_partitions(self, message: ReleasePartitions) -> None:
        if self._fenced(message):
            return
        release = self.partitions.release(message)
        if release is not None:
            self.run_async(release)

    @handles(RequestSubpartitionFiles)
    def _on_request_subpartition_files(
        self, message: RequestSubpartitionFiles
    ) -> Awaitable[SubpartitionFiles | PartitionRequestRefused]:
        return self.partitions.subpartition_files(message)

    @handles(RequestPartitionFiles)
    def _on_request_partition_files(
        self, message: RequestPartitionFiles
    ) -> Awaitable[PartitionFiles | PartitionRequestRefused]:
        return self.partitions.partition_files(message)

    @handles(RequestPartitionFile)
    def _on_request_partition_file(
        self, message: RequestPartitionFile
    ) -> Awaitable[PartitionFileChunk | PartitionRequestRefused]:
        return self.partitions.partition_file(message)

    @handles(RequestLogFiles)
    def _on_request_log_files(self, message: RequestLogFiles) -> Awaitable[LogFiles]:
        return self.logs.log_files()

    @handles(RequestLogFile)
    def _on_request_log_file(self, message: RequestLogFile) -> Awaitable[LogFileChunk | LogFileRefused]:
        return self.logs.log_file(message)

    @handles(RequestTaskLog)
    def _on_request_task_log(self, message: RequestTaskLog) -> Awaitable[TaskLogLines]:
        return self.logs.task_log(message)

    @handles(ResolvePlan)
    def _on_resolve_plan(self, message: ResolvePlan) -> Awaitable[PlanResolved | PlanRefused]:
        return self.plans.resolve(message)

    @handles(RequestThreadDump)
    def _on_request_thread_dump(self, message: RequestThreadDump) -> ThreadDump:
        # A snapshot of frames, no I/O: cheap enough for the mailbox.
        return ThreadDump(threads=thread_dump())
