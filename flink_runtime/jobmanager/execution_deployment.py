"""Getting a job's subtasks into slots and onto TaskManagers, and off them again.

Flink's ExecutionDeployer: a subtask the scheduling strategy picks is SCHEDULED and
asks for a (shared) slot; once the slot pool offers one it is DEPLOYING, and a
SubmitTask carrying its deployment descriptor goes to the TaskManager that holds the
slot. A slot request that times out, an allocation whose TaskManager is lost or a
TaskManager refusing the task fails the attempt, and the failover handling decides
what then. Cancelling sends CancelTask and concludes CANCELED when no TaskManager
can report it.

`ExecutionDeployer` owns the job's ExecutionSlotAllocator and answers the slot pool's
events for the job (a slot offered, a request timed out, an allocation lost). It reaches
the cluster through `DeploymentGateway`, finds attempts through the `execution` callable
and changes execution states only through the `set_state` callable it is given (the
JobMaster's, which accounts for every change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime.checkpoint.progress import STATE_CONFIG_KEY
from flink_runtime.deployment import task_deployment_descriptor
from flink_runtime.executiongraph import Execution, ExecutionState, ExecutionVertex
from flink_runtime.invokable import COMPLETED_SPLITS_KEY
from flink_runtime.rpc.messages import CancelTask, SubmitTask, TaskDeploymentDescriptor, TaskOperationResult
from flink_runtime.scheduler.execution_slots import ExecutionSlotAllocator

if TYPE_CHECKING:
    from flink_runtime.checkpoint.progress import ProgressTracker
    from flink_runtime.invokable import Prepared
    from flink_runtime.jobgraph.jobgraph import JobGraph
    from flink_runtime.jobmanager.task_reports import PartitionRegistry
    from flink_runtime.rpc.messages import Message
    from flink_runtime.scheduler.resource_profile import ResourceProfile
    from flink_runtime.scheduler.slot_sharing import SlotProfiles
    from flink_runtime.scheduler.slotpool import PhysicalSlot

log = logging.getLogger(__name__)

_E = ExecutionState

# (execution, state, error) -> whether the state changed
SetState = Callable[[Execution, ExecutionState, "str | None"], bool]
# (execution, allocation id, slot index) -> what the TaskManager needs to run it
DescriptorFactory = Callable[[Execution, str, int], TaskDeploymentDescriptor]


class DeploymentGateway(Protocol):
    """The cluster, as deploying and cancelling tasks needs it (callbacks run supervised)."""

    jobmanager_id: str  # the fencing token deployed tasks carry back

    def slot_of(self, allocation_id: str) -> PhysicalSlot | None: ...
    def task_manager_address(self, task_manager_id: str) -> str | None: ...
    def ask_task_manager(
        self, address: str, message: Message, on_done: Callable[[Any, BaseException | None], None]
    ) -> None: ...
    def tell_task_manager(self, address: str, message: Message) -> None: ...
    def release_slot(self, allocation_id: str) -> None: ...
    def cancel_slot_request(self, request_id: str) -> None: ...


@dataclass(frozen=True)
class IdleSlotSettings:
    """How long a job keeps a slot its subtasks finished with (slot.idle.timeout, seconds;
    0: not at all), and whether a slot request waits in the pool (then it goes back)."""

    timeout: float = 0.0
    requests_waiting: Callable[[], bool] | None = None


class ExecutionDeployer:
    """Slots, SubmitTask and CancelTask for one job's executions."""

    def __init__(
        self,
        job_id: str,
        gateway: DeploymentGateway,
        request_slot: Callable[[str, ResourceProfile], PhysicalSlot | None],
        descriptor: DescriptorFactory,
        set_state: SetState,
        execution: Callable[[str], Execution | None],
        profiles: SlotProfiles | None = None,
        idle_slots: IdleSlotSettings | None = None,
    ) -> None:
        """request_slot(request_id, profile) asks the slot pool: a slot now, or None and the pool
        calls back later (`slot_allocated`); execution(attempt_id): the job's attempt of
        that id, None if it has none; idle_slots: how long the job keeps a slot its
        subtasks finished with (None: not at all)."""
        self._gateway = gateway
        self._descriptor = descriptor
        self._set_state = set_state
        self._execution = execution
        idle = idle_slots or IdleSlotSettings()
        self.slots = ExecutionSlotAllocator(
            job_id,
            request_slot,
            gateway.release_slot,
            gateway.cancel_slot_request,
            profiles,
            idle_timeout=idle.timeout,
            requests_waiting=idle.requests_waiting,
        )

    def declare_usage(self, vertices: Iterable[ExecutionVertex]) -> None:
        self.slots.declare_usage(vertices)

    def schedule(self, vertex: ExecutionVertex) -> str | None:
        """SCHEDULED, with a slot asked for: the allocation to deploy into now, or None
        (it waits for a slot, or it was not in a state to be scheduled)."""
        execution = vertex.current_execution
        if not execution.transition_state(_E.SCHEDULED):
            return None
        return self.slots.allocate(vertex, execution.attempt_id)

    def schedule_all(self, vertices: Iterable[ExecutionVertex]) -> None:
        """Schedule each; deploy it at once into a slot that is free now (the others are
        deployed when the slot pool offers theirs: `slot_allocated`)."""
        for vertex in vertices:
            allocation_id = self.schedule(vertex)
            if allocation_id is not None:
                self.deploy(vertex.current_execution, allocation_id)

    def slot_allocated(self, request_id: str, slot: PhysicalSlot, accept: bool) -> list[str]:
        """The attempts waiting on this request, now bound to the slot, are deployed into
        it (those still SCHEDULED); a slot nobody of this job waits for (or `accept`
        False: the job ended) goes back to the pool. Returns the waiting attempts' ids."""
        waiting = self.slots.slot_allocated(request_id, slot) if accept else None
        if waiting is None:
            self._gateway.release_slot(slot.allocation_id or request_id)
            return []
        assert slot.allocation_id is not None
        for attempt_id in waiting:
            execution = self._execution(attempt_id)
            if execution is not None and execution.state is _E.SCHEDULED:
                self.deploy(execution, slot.allocation_id)
        return waiting

    def request_timed_out(self, request_id: str, timeout: float) -> None:
        """No slot came for this request in time: the attempts waiting on it fail."""
        self.request_failed(request_id, no_slot_reason(timeout))

    def request_failed(self, request_id: str, reason: str) -> None:
        """No slot will come for this request (it timed out, no TaskManager could ever hold
        it, or the resource manager's bounds never allow one): the attempts waiting fail."""
        self._fail(self.slots.request_timed_out(request_id), reason)

    def allocation_lost(self, allocation_id: str, reason: str) -> None:
        """The TaskManager holding this allocation is gone: what ran in it fails."""
        self._fail(self.slots.allocation_lost(allocation_id), reason)

    def _fail(self, attempt_ids: list[str], reason: str) -> None:
        for attempt_id in attempt_ids:
            execution = self._execution(attempt_id)
            if execution is not None:
                self._set_state(execution, _E.FAILED, reason)

    def fail_and_cancel(self, execution: Execution, reason: str) -> None:
        """Fail an attempt this JobManager gave up on and, if its task was sent, cancel it
        there (as Flink's Execution.markFailed does), so it stops reading what it must not."""
        deployed = execution.state.is_deployed
        if self._set_state(execution, _E.FAILED, reason) and deployed:
            address = self._gateway.task_manager_address(execution.task_manager_id or "")
            if address is not None:
                self._gateway.tell_task_manager(address, self._cancel_task(execution))

    def release(self, vertex: ExecutionVertex, attempt_id: str) -> None:
        # Only a FINISHED attempt's slot may stay with the job (execution_slots.py).
        execution = vertex.current_execution
        finished = execution.attempt_id == attempt_id and execution.state is _E.FINISHED
        self.slots.release(vertex, attempt_id, finished)

    def release_all(self, vertices: Iterable[ExecutionVertex]) -> None:
        self.slots.release_all(vertices)

    # -- deploying ------------------------------------------------------------------------------

    def deploy(self, execution: Execution, allocation_id: str) -> None:
        """DEPLOYING into the slot, and SubmitTask to its TaskManager."""
        slot = self._gateway.slot_of(allocation_id)
        address = self._gateway.task_manager_address(slot.task_manager_id) if slot is not None else None
        if slot is None or address is None:
            self._set_state(execution, _E.FAILED, f"slot {allocation_id} vanished before deployment")
            return
        execution.assigned_resource = allocation_id
        execution.task_manager_id = slot.task_manager_id
        self._set_state(execution, _E.DEPLOYING, None)
        descriptor = self._descriptor(execution, allocation_id, slot.slot_index)
        profile = slot.resource_profile
        if not (profile.is_unknown or profile.is_any):
            descriptor.slot_resource = profile.to_dict()
        self._gateway.ask_task_manager(
            address,
            SubmitTask(descriptor=descriptor),
            lambda answer, error: self._on_task_submitted(execution, answer, error),
        )

    def _on_task_submitted(self, execution: Execution, answer: Any, error: BaseException | None) -> None:
        if error is not None:
            name = execution.vertex.task_name_with_subtask
            self._set_state(execution, _E.FAILED, f"could not deploy {name}: {error}")
            # The SubmitTask may still arrive (a slow one, not a lost one): as Flink's
            # Execution does for an attempt it fails itself, cancel it there, so the task
            # does not run on, unaccounted for, in a slot this JobManager gives to another.
            address = self._gateway.task_manager_address(execution.task_manager_id or "")
            if address is not None:
                self._gateway.tell_task_manager(address, self._cancel_task(execution))
        elif isinstance(answer, TaskOperationResult) and not answer.success:
            name = execution.vertex.task_name_with_subtask
            self._set_state(execution, _E.FAILED, f"TaskManager refused {name}: {answer.reason}")

    # -- cancelling -----------------------------------------------------------------------------

    def cancel_all(self, vertices: Iterable[ExecutionVertex]) -> None:
        """CANCELING what is deployed (CancelTask), CANCELED what is not yet."""
        for vertex in vertices:
            execution = vertex.current_execution
            if execution.state.is_deployed:
                self._set_state(execution, _E.CANCELING, None)
                address = self._gateway.task_manager_address(execution.task_manager_id or "")
                if address is None:
                    self._set_state(execution, _E.CANCELED, None)
                    continue
                self._gateway.ask_task_manager(
                    address,
                    self._cancel_task(execution),
                    lambda answer, error, execution=execution: self._on_cancel_answer(execution, answer, error),
                )
            elif not execution.is_terminal and execution.state is not _E.CANCELING:
                self._set_state(execution, _E.CANCELED, None)

    def _on_cancel_answer(self, execution: Execution, answer: Any, error: BaseException | None) -> None:
        # A TaskManager that is gone or no longer knows the task cannot report it
        # CANCELED, so the JobManager concludes it here.
        if error is not None or (isinstance(answer, TaskOperationResult) and not answer.success):
            self._set_state(execution, _E.CANCELED, None)

    def tell_deployed_to_cancel(self, vertices: Iterable[ExecutionVertex]) -> None:
        """Tell every deployed task to cancel, expecting no answer: this JobManager stops
        working on the job (lost leadership); what the tasks report after is refused."""
        for vertex in vertices:
            execution = vertex.current_execution
            address = self._gateway.task_manager_address(execution.task_manager_id or "")
            if execution.state.is_deployed and address is not None:
                self._gateway.tell_task_manager(address, self._cancel_task(execution))

    def _cancel_task(self, execution: Execution) -> CancelTask:
        # Fenced: a TaskManager registered with another JobManager ignores it.
        return CancelTask(execution_id=execution.attempt_id, jobmanager_id=self._gateway.jobmanager_id)


def deployment_descriptor(
    execution: Execution,
    allocation_id: str,
    slot_index: int,
    job_graph: JobGraph,
    *,
    jobmanager_id: str,
    data_namespace: str,
    prepared: Prepared | None,
    completed_splits: list[int],
    tracker: ProgressTracker,
    partitions: PartitionRegistry,
    allowed: list[str],
) -> TaskDeploymentDescriptor:
    """What the TaskManager needs to run this attempt: the vertex's config with what its
    preparation added (and the splits earlier attempts of the subtask completed), its
    state, and where its inputs are. `allowed`: the JobManager's security.allowed-directories
    (security/paths.py `allowed_directories`, read once per job)."""
    vertex = execution.vertex
    vertex_id = vertex.job_vertex.id
    vertex_config = dict(vertex.job_vertex.job_vertex.config)
    if prepared is not None:
        vertex_config.update(prepared.config)
    if completed_splits:
        # The chunks a new attempt of this subtask keeps; any other split chunk in its
        # partition was committed by an attempt that died before reporting it, and that
        # split is being (or was) redone elsewhere.
        vertex_config[COMPLETED_SPLITS_KEY] = completed_splits
    vertex_config[STATE_CONFIG_KEY] = tracker.state_config(vertex_id, vertex.subtask_index, execution.attempt_id)
    assert job_graph.job_id is not None
    return task_deployment_descriptor(
        execution,
        job_id=job_graph.job_id,
        job_name=job_graph.name,
        jobmanager_id=jobmanager_id,
        allocation_id=allocation_id,
        slot_index=slot_index,
        data_namespace=data_namespace,
        vertex_config=vertex_config,
        job_config=job_graph.config,
        libraries=job_graph.libraries,
        partition_locations=partitions.locations,
        partition_addresses=partitions.addresses,
        chunk_locations=tracker.chunks_for,
        allowed_directories=allowed,
    )


def log_transition(execution: Execution, old: ExecutionState, error: str | None) -> None:
    """As Flink's Execution logs it: every transition at debug, a failure with its cause
    (the one line that tells why a job restarted or failed) as a warning."""
    new = execution.state
    if new is not _E.FAILED and not log.isEnabledFor(logging.DEBUG):
        return  # five transitions a deployment: no line built for nobody
    where = f" on {execution.task_manager_id}" if execution.task_manager_id else ""
    line = f"{execution.vertex.task_name_with_subtask} ({execution.attempt_id}) switched from {old.value}"
    line += f" to {new.value}{where}"
    if new is _E.FAILED:
        log.warning("%s with failure cause: %s", line, error or "unknown failure")
    else:
        log.debug("%s.", line)


def no_slot_reason(timeout: float) -> str:
    """Why an attempt failed whose slot request timed out, and what to do about it."""
    return (
        f"NoResourceAvailableException: no TaskManager offered a slot within slot.request.timeout "
        f"({timeout:g} s). Start TaskManagers (flink-runtime taskmanager) and check that they "
        f"reach the JobManager at jobmanager.rpc.address:jobmanager.rpc.port."
    )
