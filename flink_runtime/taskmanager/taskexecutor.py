"""The TaskManager: runs the tasks the JobManager deploys and reports their states.

It registers with the JobManager and watches it (taskmanager/jobmanager_connection.py),
answers its heartbeats with the executions it runs (the JobManager reconciles them
with what it believes), and runs each task in its own thread (taskmanager/task.py),
sending every state change back in the order it happened.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flink_runtime import configuration as cfg
from flink_runtime.blob import BlobServer
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.heartbeat import HeartbeatManager
from flink_runtime.highavailability.leader_retrieval import LeaderRetriever, high_availability_enabled
from flink_runtime.io.partition_files import NETWORK, serving_mode
from flink_runtime.io.partitions import InvalidDataNamespace, release_job_partitions, validate_namespace
from flink_runtime.registration import RetryingRegistration, RetryingRegistrationConfiguration
from flink_runtime.rpc.endpoint import RpcEndpoint, handles
from flink_runtime.rpc.messages import (
    Acknowledge,
    AcknowledgeCheckpoint,
    CancelTask,
    DisconnectTaskManager,
    Heartbeat,
    HeartbeatResponse,
    Message,
    NextInputSplit,
    ReleasePartitions,
    RequestNextInputSplit,
    ScheduleOrUpdateConsumers,
    SubmitTask,
    TaskDeploymentDescriptor,
    TaskOperationResult,
    TriggerCheckpoint,
    UpdateTaskExecutionState,
)
from flink_runtime.rpc.service import RpcException, RpcService
from flink_runtime.security import bearer, client_verify, rest_token
from flink_runtime.security.cluster_secret import cluster_secret as resolve_cluster_secret
from flink_runtime.security.paths import allowed_directories
from flink_runtime.spark.session import acquire_session, release_session
from flink_runtime.taskmanager.jobmanager_connection import JobManagerConnection, JobManagerHeartbeatListener
from flink_runtime.taskmanager.log_service import LogService
from flink_runtime.taskmanager.partition_service import PartitionService, fetch_remote_inputs
from flink_runtime.taskmanager.shared_data_folder import DataFolderNotShared, check_data_folder_shared
from flink_runtime.taskmanager.system_metrics import SystemMetricsSampler
from flink_runtime.taskmanager.task import Task

if TYPE_CHECKING:
    from flink_runtime.scheduler.split_assigner import InputSplit

log = logging.getLogger(__name__)

# How often a task's final state is sent before giving up on the JobManager answering
# (each send waits pekko.ask.timeout).
FINAL_STATE_ATTEMPTS = 5


def default_data_dir() -> str:
    return os.path.join(tempfile.gettempdir(), "flink-runtime-data")


@dataclass
class _TaskStateChanged:
    task: Task
    state: ExecutionState
    error: str | None


class TaskExecutor(JobManagerConnection, LogService, PartitionService, RpcEndpoint):
    def __init__(self, config: Configuration, jobmanager_address: str | None = None, cluster_secret: str = "") -> None:
        """cluster_secret: the RPC's (a MiniCluster's own); by default the configured one, or
        on loopback this user's (security/cluster_secret.py). RPC is never unauthenticated."""
        self.jobmanager_address = jobmanager_address or (
            f"tcp://{config.get(cfg.JOBMANAGER_RPC_ADDRESS)}:{config.get(cfg.JOBMANAGER_RPC_PORT)}"
        )
        host = config.get(cfg.TASKMANAGER_HOST)
        jobmanager_host = self.jobmanager_address.removeprefix("tcp://").rsplit(":", 1)[0]
        self.cluster_secret = cluster_secret or resolve_cluster_secret(
            config,
            "TaskManager",
            {cfg.TASKMANAGER_HOST.key: host, cfg.JOBMANAGER_RPC_ADDRESS.key: jobmanager_host},
        )
        rpc = RpcService(
            host,
            config.get(cfg.TASKMANAGER_RPC_PORT),
            framesize=config.get(cfg.FRAMESIZE),
            cluster_secret=self.cluster_secret,
        )
        self.resource_id = config.get(cfg.TASKMANAGER_RESOURCE_ID) or f"tm-{uuid.uuid4().hex[:12]}"
        super().__init__(f"TaskExecutor {self.resource_id}", rpc)
        self.config = config
        self.host = config.get(cfg.TASKMANAGER_HOST)
        self.slots = config.get(cfg.TASKMANAGER_SLOTS) or (os.cpu_count() or 1)
        self.data_dir = config.get(cfg.IO_TMP_DIRS) or default_data_dir()
        # Its own security.allowed-directories, enforced beside the JobManager's (sent with
        # each task): a TaskManager without the key still confines tasks to the cluster's list.
        self.allowed_directories = allowed_directories(config)
        self._data_folder_checked = False
        self._data_folder_error: DataFolderNotShared | None = None
        try:
            # network: this TaskManager serves the partitions it produces, and fetches
            # those produced elsewhere (taskmanager/partition_service.py).
            self.partition_serving = serving_mode(config.get(cfg.PARTITION_SERVING), self.data_dir)
        except ValueError as exc:
            raise cfg.ConfigurationError(str(exc)) from None
        self.ask_timeout = config.get_seconds(cfg.ASK_TIMEOUT)
        self.heartbeat_timeout = config.get_seconds(cfg.HEARTBEAT_TIMEOUT)
        self.tasks: dict[str, Task] = {}
        self.jobmanager_id: str | None = None
        # The JobManager's REST URL (from its registration answer): where job libraries come
        # from, asked with the REST API's token and TLS trust if it has them.
        self.jobmanager_rest_url = ""
        self._rest_headers = bearer(rest_token(config))
        self._rest_verify = client_verify(config)
        self.registration_config = RetryingRegistrationConfiguration.from_configuration(config)
        self.registered = asyncio.Event()
        self._registration: RetryingRegistration | None = None
        self._probe: RetryingRegistration | None = None
        # Standby JobManagers: the leader is read from the job store's database, not configured.
        self._leader_retriever = (
            LeaderRetriever.from_configuration(config) if high_availability_enabled(config) else None
        )
        self.leader_token_and_address: tuple[int, str] | None = None
        self._looking_for_leader = False
        # Watches the JobManager this TaskManager is registered with (its id is the target).
        self.jobmanager_heartbeats: HeartbeatManager[None] = HeartbeatManager(
            self.heartbeat_timeout, JobManagerHeartbeatListener(self)
        )
        # Tasks that ended and whose final state the JobManager has not answered yet: still
        # reported in heartbeats, so the JobManager never takes them for missing meanwhile.
        self._final_states_in_flight: set[str] = set()
        # Called by the RPC layer outside the mailbox; handled inside it.
        rpc.on_disconnect = lambda address: self.run_in_mailbox(self._on_connection_lost, address)
        self._spark_lock = threading.Lock()
        self._spark_session: Any = None
        self.system_metrics = SystemMetricsSampler(
            config.get_seconds(cfg.METRICS_PROBING_INTERVAL), lambda: self._spark_session
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def on_start(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        self.system_metrics.start()
        if self._leader_retriever is not None:
            self._start_leader_retrieval(self._leader_retriever)
        else:
            self._start_registration()
        self.schedule_every(
            self.config.get_seconds(cfg.HEARTBEAT_INTERVAL) / 2,
            lambda: self.jobmanager_heartbeats.check_timeouts(time.monotonic()),
        )

    def on_stop(self) -> None:
        self.system_metrics.stop()
        if self._leader_retriever is not None:
            self._leader_retriever.close()
        for task in self.tasks.values():
            task.cancel()
        if self._spark_session is not None:
            self._spark_session = None
            release_session()
        if self.jobmanager_id is not None:
            # Tell the JobManager at once instead of letting it wait for a heartbeat timeout.
            self.rpc.tell(
                self.jobmanager_address,
                DisconnectTaskManager(task_manager_id=self.resource_id, reason="TaskManager shut down"),
            )

    def spark(self) -> Any:
        """The process's SparkSession, started by the first task that needs it (any thread)."""
        with self._spark_lock:
            if self._spark_session is None:
                self._spark_session = acquire_session(
                    self.config.to_dict(),
                    default_cores=self.slots,
                    resource_wait_timeout=self.config.get_seconds(cfg.SPARK_RESOURCE_WAIT_TIMEOUT),
                )
            if not self._data_folder_checked:
                # On a Spark cluster the executors must see io.tmp.dirs: every task fails
                # with the reason rather than lose its partitions. Checked once, when the
                # check comes to a verdict (a cluster without free cores gives none).
                remote = self.config.to_dict().get("spark.remote")
                try:
                    check_data_folder_shared(self._spark_session, self.data_dir, remote)
                except DataFolderNotShared as error:
                    self._data_folder_error = error
                self._data_folder_checked = True
            if self._data_folder_error is not None:
                raise DataFolderNotShared(str(self._data_folder_error))
            return self._spark_session

    @handles(Heartbeat)
    def on_heartbeat(self, message: Heartbeat) -> HeartbeatResponse:
        if message.jobmanager_id == self.jobmanager_id:
            self.jobmanager_heartbeats.receive_heartbeat(message.jobmanager_id, None, time.monotonic())
        running = [*self.tasks, *self._final_states_in_flight]
        return HeartbeatResponse(
            task_manager_id=self.resource_id, running_executions=running, metrics=self.system_metrics.latest
        )

    # -- tasks ---------------------------------------------------------------------------------------

    @handles(SubmitTask)
    def on_submit_task(self, message: SubmitTask) -> TaskOperationResult:
        descriptor = message.descriptor
        if self.jobmanager_id is None:
            return TaskOperationResult(
                execution_id=descriptor.execution_id,
                success=False,
                reason=f"TaskManager {self.resource_id} is not registered with a JobManager",
            )
        if descriptor.jobmanager_id != self.jobmanager_id:
            return TaskOperationResult(
                execution_id=descriptor.execution_id,
                success=False,
                reason=f"TaskManager {self.resource_id} is registered with JobManager {self.jobmanager_id}, "
                f"not with {descriptor.jobmanager_id or '<none>'}",
            )
        if descriptor.execution_id in self.tasks:
            return TaskOperationResult(
                execution_id=descriptor.execution_id, success=False, reason="execution already deployed here"
            )
        task = Task(
            descriptor,
            self.data_dir,
            report=self._report_from_task_thread,
            request_split=self._split_requester(descriptor),
            notify_partition_ready=self._partition_notifier(descriptor),
            spark=self.spark,
            blob_server=BlobServer(self.jobmanager_rest_url, self._rest_headers, self._rest_verify),
            fetch_inputs=self._input_fetcher() if self.partition_serving == NETWORK else None,
            allowed_directories=self.allowed_directories,
        )
        self.tasks[task.execution_id] = task
        task.start()
        return TaskOperationResult(execution_id=task.execution_id, success=True)

    def _from_other_jobmanager(self, message: CancelTask | TriggerCheckpoint | ReleasePartitions) -> str | None:
        """Why a JobManager's command is ignored: its sender is not the JobManager this
        TaskManager is registered with (a deposed leader, or one it left)."""
        if not message.jobmanager_id or message.jobmanager_id == self.jobmanager_id:
            return None
        reason = (
            f"FencingTokenException: {type(message).__name__} from JobManager {message.jobmanager_id}, but "
            f"TaskManager {self.resource_id} is registered with {self.jobmanager_id or 'none'}"
        )
        log.warning("%s: ignored", reason)
        return reason

    @handles(CancelTask)
    def on_cancel_task(self, message: CancelTask) -> TaskOperationResult:
        fenced = self._from_other_jobmanager(message)
        if fenced is not None:
            return TaskOperationResult(execution_id=message.execution_id, success=False, reason=fenced)
        task = self.tasks.get(message.execution_id)
        if task is None:
            return TaskOperationResult(execution_id=message.execution_id, success=False, reason="unknown execution")
        task.cancel()
        interval = self.config.get_seconds(cfg.TASK_CANCELLATION_INTERVAL)
        deadline = time.monotonic() + self.config.get_seconds(cfg.TASK_CANCELLATION_TIMEOUT)
        self.schedule_once(interval, self._interrupt_until_dead, task, interval, deadline)
        return TaskOperationResult(execution_id=message.execution_id, success=True)

    def _interrupt_until_dead(self, task: Task, interval: float, deadline: float) -> None:
        if not task.thread.is_alive() or self.tasks.get(task.execution_id) is not task:
            return
        if time.monotonic() >= deadline:
            log.error(
                "%s ignored cancellation past task.cancellation.timeout; its thread is abandoned",
                task.descriptor.task_name,
            )
            self._on_task_state(_TaskStateChanged(task, ExecutionState.CANCELED, None))
            return
        task.interrupt()
        self.schedule_once(interval, self._interrupt_until_dead, task, interval, deadline)

    @handles(TriggerCheckpoint)
    def on_trigger_checkpoint(self, message: TriggerCheckpoint) -> None:
        # Tasks commit their output as they go (split chunks) and report keyed state when
        # they finish, so a running task has nothing more to snapshot: acknowledge at once.
        # A task that already ended acknowledges too; its FINISHED report carries its output.
        if self._from_other_jobmanager(message) is not None:
            return
        task = self.tasks.get(message.execution_id)
        self.rpc.tell(
            self.jobmanager_address,
            AcknowledgeCheckpoint(
                job_id=message.job_id,
                execution_id=message.execution_id,
                checkpoint_id=message.checkpoint_id,
                jobmanager_id=task.descriptor.jobmanager_id if task is not None else self.jobmanager_id or "",
            ),
        )

    @handles(ReleasePartitions)
    def on_release_partitions(self, message: ReleasePartitions) -> None:
        if self._from_other_jobmanager(message) is not None:
            return
        namespace = message.data_namespace or message.job_id
        try:
            validate_namespace(namespace)
        except InvalidDataNamespace as exc:
            log.warning("%s: ReleasePartitions ignored: %s", self.resource_id, exc)
            return
        self.run_async(asyncio.to_thread(release_job_partitions, self.data_dir, namespace))

    def _report_from_task_thread(self, task: Task, state: ExecutionState, error: str | None) -> None:
        self.tell_self_threadsafe(_TaskStateChanged(task, state, error))

    @handles(_TaskStateChanged)
    def _on_task_state(self, change: _TaskStateChanged) -> None:
        task = change.task
        if self.tasks.get(task.execution_id) is not task:
            return  # already reported terminal (abandoned after a cancellation timeout)
        final = change.state.is_terminal
        if final:
            del self.tasks[task.execution_id]
            self._final_states_in_flight.add(task.execution_id)
        update = UpdateTaskExecutionState(
            job_id=task.job_id,
            execution_id=task.execution_id,
            jobmanager_id=task.descriptor.jobmanager_id,
            state=change.state.value,
            error=change.error,
            state_handle=getattr(task.invokable, "final_state_handle", None)
            if change.state is ExecutionState.FINISHED
            else None,
            io_metrics=task.io_metrics if final else None,
            missing_partitions=task.missing_partitions if change.state is ExecutionState.FAILED else [],
        )
        # Updates leave in mailbox order over one connection, so the JobManager sees
        # them in the order they happened. A final state is sent up to
        # FINAL_STATE_ATTEMPTS times; if none is answered, the task drops out of the
        # heartbeat reports and the JobManager fails it (reconciliation) rather than
        # waiting for it for ever.
        self.run_async(
            self._send_update(task, update, final),
            (lambda result, error: self._final_states_in_flight.discard(task.execution_id)) if final else None,
        )

    async def _send_update(self, task: Task, update: UpdateTaskExecutionState, final: bool) -> None:
        attempts = FINAL_STATE_ATTEMPTS if final else 1
        for attempt in range(1, attempts + 1):
            try:
                answer = await self.rpc.ask(self.jobmanager_address, update, self.ask_timeout)
            except RpcException as exc:
                if attempt == attempts:
                    log.warning("state update %s %s not delivered: %s", update.execution_id, update.state, exc)
                continue
            if isinstance(answer, Acknowledge) and not answer.ok and not final:
                # The JobManager does not run this attempt (any more): nobody would use its output.
                log.warning("%s: cancelling %s: %s", self.resource_id, task.descriptor.task_name, answer.reason)
                task.cancel()
            return

    def _split_requester(self, descriptor: TaskDeploymentDescriptor) -> Callable[[int | None], InputSplit | None]:
        loop = asyncio.get_running_loop()

        def next_split(completed_split: int | None = None) -> InputSplit | None:
            request = RequestNextInputSplit(
                job_id=descriptor.job_id,
                execution_id=descriptor.execution_id,
                jobmanager_id=descriptor.jobmanager_id,
                host=self.host,
                completed_split=completed_split,
            )
            future = asyncio.run_coroutine_threadsafe(
                self.rpc.ask(self.jobmanager_address, request, self.ask_timeout), loop
            )
            answer = future.result()  # an RpcException if the JobManager refuses: the task fails
            assert isinstance(answer, NextInputSplit)
            return answer.split

        return next_split

    def _input_fetcher(self) -> Callable[[TaskDeploymentDescriptor], Any]:
        """Fetches a task's inputs from the TaskManagers that produced them (in its thread)."""
        loop = asyncio.get_running_loop()

        def ask(address: str, message: Message) -> Message:
            return asyncio.run_coroutine_threadsafe(self.rpc.ask(address, message, self.ask_timeout), loop).result()

        return lambda descriptor: fetch_remote_inputs(descriptor, self.address, self.data_dir, ask)

    def _partition_notifier(self, descriptor: TaskDeploymentDescriptor) -> Callable[[str, str], None]:
        loop = asyncio.get_running_loop()

        def notify(partition_id: str, location: str) -> None:
            message = ScheduleOrUpdateConsumers(
                job_id=descriptor.job_id,
                execution_id=descriptor.execution_id,
                jobmanager_id=descriptor.jobmanager_id,
                partition_id=partition_id,
                location=location,
                data_address=self.address,
            )
            answer = asyncio.run_coroutine_threadsafe(
                self.rpc.ask(self.jobmanager_address, message, self.ask_timeout), loop
            ).result()
            if isinstance(answer, Acknowledge) and not answer.ok:
                raise RuntimeError(f"JobManager refused partition {partition_id}: {answer.reason}")

        return notify
