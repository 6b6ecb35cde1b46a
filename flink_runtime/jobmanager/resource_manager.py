"""The JobManager's ResourceManager part: which TaskManagers are registered, whether
they are alive, what runs on them, and their slots (Flink splits this off as the
ResourceManager with its SlotManager; here it is a component of the JobManager's actor,
driven from its mailbox).

Registration: a TaskManager asks RegisterTaskManager (registration/ retries it) and is
answered AcknowledgeRegistration, AlreadyRegistered (same id, same address: nothing
changes) or RefuseRegistration (wrong protocol version or cluster secret). Its slots
join the slot pool at once, except those it reports occupied by tasks of an earlier
registration: each HeartbeatResponse lists the slots still held, and those it no
longer lists become free (Flink's SlotReport).

Liveness: every `heartbeat.interval` each TaskManager is asked for a Heartbeat
(heartbeat/manager.py). One not heard from for `heartbeat.timeout` is lost: its slots
leave the pool and whatever ran on it fails with that reason. One whose connection
drops is asked at once with a short timeout instead (a killed process cannot answer,
a network blip can). One that shuts down cleanly says so (DisconnectTaskManager) and
is removed at once.

Reconciliation: each HeartbeatResponse lists the executions its TaskManager runs; one
the JobManager believes running there but the TaskManager no longer has is failed (its
job's restart strategy decides what follows), one the TaskManager runs but the
JobManager does not track there is cancelled. heartbeat/reconciliation.py decides, with
the grace that keeps in-flight deployments and final states from tripping it.

Messages to the TaskManagers (deployments, cancellations, heartbeats, asks from worker
threads) go through task_manager_messages.py, which asks this registry whether an address
is still registered and tells it when a TaskManager accepted a deployment.
"""

from __future__ import annotations

import hmac
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.heartbeat import (
    ExecutionDeploymentReconciler,
    ExecutionDeploymentReport,
    HeartbeatManagerSender,
    HeartbeatMonitor,
)
from flink_runtime.jobmanager.metrics import reported_taskmanager_metrics
from flink_runtime.jobmanager.task_manager_messages import TaskManagerMessages
from flink_runtime.rpc.messages import (
    PROTOCOL_VERSION,
    AcknowledgeRegistration,
    AlreadyRegistered,
    CancelTask,
    Heartbeat,
    HeartbeatResponse,
    Message,
    RefuseRegistration,
    RegisterTaskManager,
)
from flink_runtime.rpc.service import RpcService
from flink_runtime.scheduler.resource_profile import ResourceProfile
from flink_runtime.scheduler.slotpool import PhysicalSlot, SlotPool, UnfulfillableSlotRequest

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster

log = logging.getLogger(__name__)

Callback = Callable[[Any, BaseException | None], None]


@dataclass
class RegisteredTaskManager:
    task_manager_id: str
    address: str
    host: str
    slots: int
    resources: dict[str, float]
    registration_id: str
    heartbeat: HeartbeatMonitor
    registered_at: float = field(default_factory=time.time)
    deployments: ExecutionDeploymentReconciler = field(default_factory=ExecutionDeploymentReconciler)
    # Its latest CPU, memory and JVM figures (Flink's names), as its heartbeats report them.
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def last_heartbeat(self) -> float:
        """time.monotonic() of the last sign of life (REST shows it as an epoch time)."""
        return self.heartbeat.last_heartbeat


class ResourceManagerHost(Protocol):
    """What the ResourceManager uses of the JobManager that hosts it."""

    rpc: RpcService
    jobmanager_id: str
    rest_url: str
    jobs: dict[str, JobMaster]

    def run_async(self, awaitable: Any, on_done: Callback | None = None) -> Any: ...
    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> Any: ...
    def at_end_of_turn(self, function: Callable[[], None]) -> None: ...


class ResourceManager:
    def __init__(self, host: ResourceManagerHost, config: Configuration, cluster_secret: str) -> None:
        """cluster_secret: what a registering TaskManager must present (the RPC's keys
        already prove it holds it; this refuses it with a reason it can log)."""
        self.host = host
        self._cluster_secret = cluster_secret
        self.config = config
        self.ask_timeout = config.get_seconds(cfg.ASK_TIMEOUT)
        self.heartbeat_timeout = config.get_seconds(cfg.HEARTBEAT_TIMEOUT)
        self.slot_request_timeout = config.get_seconds(cfg.SLOT_REQUEST_TIMEOUT)
        self.task_managers: dict[str, RegisteredTaskManager] = {}
        self.slot_pool = SlotPool()
        # Slots carved from a TaskManager's free resources per request (true), or its
        # numberOfTaskSlots fixed slots of total / slots (false).
        self.dynamic_slots = config.get(cfg.FINE_GRAINED_RESOURCE_MANAGEMENT)
        self.heartbeats: HeartbeatManagerSender[ExecutionDeploymentReport] = HeartbeatManagerSender(
            self.heartbeat_timeout, self, self._request_heartbeat
        )
        self._job_of_request: dict[str, JobMaster] = {}
        self._job_of_allocation: dict[str, JobMaster] = {}
        self._idle_release_queued = False
        self.messages = TaskManagerMessages(
            host, self.ask_timeout, lambda address: self._registration_at(address) is not None, self._deployed
        )

    @property
    def rpc(self) -> RpcService:
        return self.host.rpc

    # -- registration ----------------------------------------------------------------------------

    def register_task_manager(self, message: RegisterTaskManager) -> Message:
        if message.protocol_version != PROTOCOL_VERSION:
            return RefuseRegistration(
                reason=f"incompatible protocol version {message.protocol_version}: this JobManager "
                f"speaks version {PROTOCOL_VERSION}; run the same flink-runtime version everywhere"
            )
        if not hmac.compare_digest(message.secret.encode(), self._cluster_secret.encode()):
            return RefuseRegistration(
                reason="wrong cluster secret: set security.cluster.secret to the JobManager's value"
            )
        known = self.task_managers.get(message.task_manager_id)
        if known is not None and known.address == message.address:
            self.heartbeats.receive_heartbeat(known.task_manager_id, None, time.monotonic())
            return AlreadyRegistered(
                registration_id=known.registration_id,
                jobmanager_id=self.host.jobmanager_id,
                rest_url=self.host.rest_url,
            )
        if known is not None:
            # Same id at a new address: the old process is gone.
            self.remove_task_manager(known.task_manager_id, "TaskManager restarted at a new address")
        registration = RegisteredTaskManager(
            task_manager_id=message.task_manager_id,
            address=message.address,
            host=message.host,
            slots=message.slots,
            resources=message.resources,
            registration_id=uuid.uuid4().hex,
            heartbeat=self.heartbeats.monitor_target(message.task_manager_id, time.monotonic()),
        )
        self.task_managers[message.task_manager_id] = registration
        log.info(
            "Registered TaskManager %s at %s with %d slots", message.task_manager_id, message.address, message.slots
        )
        # Slots its earlier registration's tasks still hold stay unavailable until its
        # heartbeats stop listing them (reconciliation cancels those tasks meanwhile).
        for request_id, slot in self.slot_pool.add_task_manager(
            message.task_manager_id,
            message.host,
            message.slots,
            occupied=message.occupied_slots,
            total_resource=ResourceProfile.from_dict(message.total_resource),
            dynamic=self.dynamic_slots,
        ):
            self._slot_allocated(request_id, slot)
        # Connect now: the connection is how a killed TaskManager is noticed at once.
        self._request_heartbeat(registration.task_manager_id, time.monotonic())
        return AcknowledgeRegistration(
            registration_id=registration.registration_id,
            jobmanager_id=self.host.jobmanager_id,
            rest_url=self.host.rest_url,
        )

    def remove_task_manager(self, task_manager_id: str, reason: str, expected: bool = False) -> None:
        """Unregister a TaskManager: its slots leave the pool, and every execution it held
        fails with `reason` (a clean shutdown is `expected`, logged at INFO)."""
        registration = self.task_managers.pop(task_manager_id, None)
        if registration is None:
            return
        self.heartbeats.unmonitor_target(task_manager_id)
        log.log(logging.INFO if expected else logging.WARNING, "TaskManager %s removed: %s", task_manager_id, reason)
        cause = f"TaskManagerLostException: TaskManager {task_manager_id} ({registration.address}) lost: {reason}"
        for allocation_id in self.slot_pool.remove_task_manager(task_manager_id):
            job = self._job_of_allocation.pop(allocation_id, None)
            if job is not None:
                job.on_allocation_lost(allocation_id, cause)
        # Tasks of this TaskManager that were still DEPLOYING (no slot member yet) fail too.
        for job in list(self.host.jobs.values()):
            if not job.status.is_terminal:
                for execution_id in job.executions_on(task_manager_id):
                    job.fail_execution(execution_id, cause)
        self.rpc.disconnect(registration.address)

    # -- heartbeats ------------------------------------------------------------------------------

    def send_heartbeats(self) -> None:
        """Every heartbeat.interval (the JobManager's timer)."""
        self.heartbeats.request_heartbeats(time.monotonic())

    def check_timeouts(self) -> None:
        """Every second or heartbeat.interval (the JobManager's timer): lost TaskManagers
        (notify_heartbeat_timeout) and slot requests nobody could serve."""
        now = time.monotonic()
        self.heartbeats.check_timeouts(now)
        for request_id in self.slot_pool.expire_requests(now, self.slot_request_timeout):
            job = self._job_of_request.pop(request_id, None)
            if job is not None:
                job.on_slot_request_timeout(request_id, self.slot_request_timeout)
        # Requests whose only big enough TaskManager left fail as an impossible one does.
        for request_id, reason in self.slot_pool.take_unfulfillable():
            job = self._job_of_request.pop(request_id, None)
            if job is not None:
                job.on_slot_request_failed(request_id, reason)
        for request_id, slot in self.slot_pool.serve_pending():
            self._slot_allocated(request_id, slot)
        self._release_idle_slots(now)

    def _release_idle_slots(self, now: float | None = None) -> None:
        """Slots jobs keep idle (execution_slots.py) go back after slot.idle.timeout, or at
        once while a slot request waits: one job's idle slot never stalls another job."""
        self._idle_release_queued = False
        everything = self.slot_pool.pending_requests > 0
        for job in list(self.host.jobs.values()):
            job.release_idle_slots(time.monotonic() if now is None else now, everything)

    def _request_heartbeat(self, task_manager_id: str, requested_at: float) -> None:
        registration = self.task_managers.get(task_manager_id)
        if registration is not None:
            self._ask_heartbeat(registration, requested_at, self.heartbeat_timeout)

    def _ask_heartbeat(
        self,
        registration: RegisteredTaskManager,
        requested_at: float,
        timeout: float,
        on_no_answer: Callable[[], None] | None = None,
    ) -> None:
        def answered(answer: Any, error: BaseException | None) -> None:
            if error is not None and on_no_answer is not None:
                on_no_answer()
            elif isinstance(answer, HeartbeatResponse):
                self._receive_heartbeat(answer, requested_at)

        heartbeat = Heartbeat(jobmanager_id=self.host.jobmanager_id)
        self.messages.ask_with_timeout(registration.address, heartbeat, timeout, answered)

    def _receive_heartbeat(self, answer: HeartbeatResponse, requested_at: float) -> None:
        registration = self.task_managers.get(answer.task_manager_id)
        if registration is not None and answer.metrics:
            registration.metrics = reported_taskmanager_metrics(answer.metrics)
        # Slots that tasks of its earlier registration held and no longer hold are free now.
        for request_id, slot in self.slot_pool.slots_vacated(answer.task_manager_id, answer.occupied_slots):
            self._slot_allocated(request_id, slot)
        report = ExecutionDeploymentReport.of(answer.running_executions, requested_at)
        self.heartbeats.receive_heartbeat(answer.task_manager_id, report, time.monotonic())

    def notify_heartbeat_timeout(self, resource_id: str) -> None:
        """HeartbeatListener: a TaskManager was silent for heartbeat.timeout."""
        registration = self.task_managers.get(resource_id)
        if registration is not None:
            silent_for = registration.heartbeat.silent_for(time.monotonic())
            self.remove_task_manager(
                resource_id,
                f"no heartbeat for {silent_for:.1f} s (heartbeat.timeout is {self.heartbeat_timeout:g} s)",
            )

    def report_payload(self, resource_id: str, payload: ExecutionDeploymentReport) -> None:
        """HeartbeatListener: a TaskManager's heartbeat listed the executions it runs."""
        self._reconcile(resource_id, payload)

    def on_connection_lost(self, address: str) -> None:
        """A TaskManager's connection dropped: ask it at once instead of waiting out the
        heartbeat timeout; a killed process cannot answer, a network blip can."""
        registration = self._registration_at(address)
        if registration is None:
            return
        probe_timeout = min(self.heartbeat_timeout, 1.0)

        def no_answer() -> None:
            if self.task_managers.get(registration.task_manager_id) is registration:
                self.remove_task_manager(
                    registration.task_manager_id, f"connection closed and no answer within {probe_timeout:g} s"
                )

        self._ask_heartbeat(registration, time.monotonic(), probe_timeout, on_no_answer=no_answer)

    def _registration_at(self, address: str) -> RegisteredTaskManager | None:
        return next((r for r in self.task_managers.values() if r.address == address), None)

    # -- reconciliation ----------------------------------------------------------------------------

    def _reconcile(self, task_manager_id: str, report: ExecutionDeploymentReport) -> None:
        registration = self.task_managers.get(task_manager_id)
        if registration is None:
            return
        expected: list[str] = []
        tracked: list[str] = []
        job_of: dict[str, JobMaster] = {}
        for job in list(self.host.jobs.values()):
            for execution_id, state in job.executions_on(task_manager_id).items():
                (expected if state.is_deployed else tracked).append(execution_id)
                job_of[execution_id] = job
        decision = registration.deployments.reconcile(report, expected, tracked)
        for execution_id in decision.missing:
            reason = (
                f"ExecutionLostException: execution {execution_id} is unexpectedly no longer running on "
                f"TaskManager {task_manager_id} ({registration.address}): its heartbeat report does not list it"
            )
            log.warning("%s", reason)
            job_of[execution_id].fail_execution(execution_id, reason)
        for execution_id in decision.unknown:
            log.warning(
                "TaskManager %s runs execution %s, which the JobManager does not run there; cancelling it",
                task_manager_id,
                execution_id,
            )
            self.messages.tell(
                registration.address, CancelTask(execution_id=execution_id, jobmanager_id=self.host.jobmanager_id)
            )

    # -- slots and TaskManagers, as the JobMasters use them (JobMasterGateway) ---------------------

    def request_slot(
        self,
        job: JobMaster,
        request_id: str,
        preferred_hosts: list[str],
        profile: ResourceProfile = ResourceProfile.UNKNOWN,
    ) -> PhysicalSlot | None:
        try:
            slot = self.slot_pool.request_slot(
                request_id, time.monotonic(), preferred_hosts=preferred_hosts, profile=profile
            )
        except UnfulfillableSlotRequest as refused:
            # No registered TaskManager could ever hold it: fail its executions now, but
            # from the mailbox, not inside the scheduling pass that is asking.
            self._job_of_request[request_id] = job
            self.host.schedule_once(0.0, self._fail_request, request_id, str(refused))
            return None
        if slot is None:
            self._job_of_request[request_id] = job
            if not self._idle_release_queued:  # once per batch of requests, from the mailbox
                self._idle_release_queued = True
                self.host.schedule_once(0.0, self._release_idle_slots)
        else:
            self._job_of_allocation[request_id] = job
        return slot

    def _fail_request(self, request_id: str, reason: str) -> None:
        job = self._job_of_request.pop(request_id, None)
        if job is not None:
            job.on_slot_request_failed(request_id, reason)

    def _slot_allocated(self, request_id: str, slot: PhysicalSlot) -> None:
        job = self._job_of_request.pop(request_id, None)
        if job is None:
            self.slot_pool.release_slot(request_id)
            return
        self._job_of_allocation[request_id] = job
        job.on_slot_allocated(request_id, slot)

    def release_slot(self, allocation_id: str) -> None:
        self._job_of_allocation.pop(allocation_id, None)
        for request_id, slot in self.slot_pool.release_slot(allocation_id):
            self._slot_allocated(request_id, slot)

    def cancel_slot_request(self, request_id: str) -> None:
        self._job_of_request.pop(request_id, None)
        self.slot_pool.cancel_request(request_id)

    def slot_of(self, allocation_id: str) -> PhysicalSlot | None:
        return self.slot_pool.slot_of(allocation_id)

    def allocated_slots_of(self, task_manager_id: str) -> list[tuple[PhysicalSlot, str | None]]:
        """A TaskManager's slots in use, each with the id of the job holding it (None for a
        slot an earlier registration's task still holds): REST's ``allocatedSlots``."""
        if not self.slot_pool.has_task_manager(task_manager_id):
            return []
        allocated: list[tuple[PhysicalSlot, str | None]] = []
        for slot in self.slot_pool.slots_of(task_manager_id):
            if slot.allocation_id is not None:
                job = self._job_of_allocation.get(slot.allocation_id)
                allocated.append((slot, job.job_id if job is not None else None))
        return allocated

    # -- what the active resource manager reads and asks (resourcemanager/active.py) ---------------

    def free_slot_count(self) -> int:
        return self.slot_pool.free_slots

    def slots_of_task_manager(self, task_manager_id: str) -> int:
        registration = self.task_managers.get(task_manager_id)
        return registration.slots if registration is not None else 0

    def busy_task_managers(self) -> set[str]:
        """TaskManagers with a slot allocated or still held by an earlier registration's task."""
        return {tm for tm, r in self.task_managers.items() if self.slot_pool.free_slots_of(tm) < r.slots}

    def slot_demand_by_job(self) -> dict[str, int]:
        """Per job: the slots it holds plus those it waits for."""
        demand: dict[str, int] = {}
        for job in [*self._job_of_request.values(), *self._job_of_allocation.values()]:
            demand[job.job_id] = demand.get(job.job_id, 0) + 1
        return demand

    def fail_slot_requests_of(self, job_id: str, reason: str) -> None:
        """No slot will ever come for this job's waiting requests: they fail with `reason`."""
        for request_id, job in list(self._job_of_request.items()):
            if job.job_id == job_id:
                self.cancel_slot_request(request_id)
                job.on_slot_request_failed(request_id, reason)

    def task_manager_address(self, task_manager_id: str) -> str | None:
        registration = self.task_managers.get(task_manager_id)
        return registration.address if registration is not None else None

    def release_partitions(self, job_id: str, data_namespace: str = "") -> None:
        addresses = [registration.address for registration in self.task_managers.values()]
        self.messages.release_partitions(addresses, job_id, data_namespace)

    def _deployed(self, address: str, execution_id: str, at: float) -> None:
        """TaskManagerMessages: the TaskManager at `address` accepted the execution."""
        registration = self._registration_at(address)
        if registration is not None:
            registration.deployments.complete_deployment_of(execution_id, at)
