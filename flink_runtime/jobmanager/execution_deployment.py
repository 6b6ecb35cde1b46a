"""Getting a job's subtasks into slots and onto TaskManagers.

Flink's ExecutionDeployer: a subtask the scheduling strategy picks is SCHEDULED and
asks for a (shared) slot; once the slot pool offers one it is DEPLOYING, and a
SubmitTask carrying its deployment descriptor goes to the TaskManager that holds the
slot. A slot request that times out, an allocation whose TaskManager is lost or a
TaskManager refusing the task fails the attempt, and the failover handling decides
what then.

`ExecutionDeployment` is part of the JobMaster (a mixin: it shares the job's state and
runs in the JobManager's mailbox like the rest of it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flink_runtime.checkpoint.progress import STATE_CONFIG_KEY
from flink_runtime.deployment import task_deployment_descriptor
from flink_runtime.executiongraph import Execution, ExecutionState, ExecutionVertex
from flink_runtime.invokable import COMPLETED_SPLITS_KEY
from flink_runtime.jobmanager.gateway import supervised
from flink_runtime.rpc.messages import CancelTask, SubmitTask, TaskDeploymentDescriptor, TaskOperationResult
from flink_runtime.security.paths import allowed_directories

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster
    from flink_runtime.scheduler.slotpool import PhysicalSlot

_E = ExecutionState


class ExecutionDeployment:
    """Slots and deployment of a job's executions."""

    def _declare_slot_usage(self: JobMaster) -> None:
        assert self.graph is not None
        self._slots.declare_usage(self.graph.all_execution_vertices())

    def _schedule(self: JobMaster, vertex: ExecutionVertex) -> None:
        execution = vertex.current_execution
        if not execution.transition_state(_E.SCHEDULED):
            return
        allocation_id = self._slots.allocate(vertex, execution.attempt_id)
        if allocation_id is not None:
            self._deploy(execution, allocation_id)

    @supervised
    def on_slot_allocated(self: JobMaster, request_id: str, slot: PhysicalSlot) -> None:
        waiting = self._slots.slot_allocated(request_id, slot) if not self.status.is_terminal else None
        if waiting is None:
            self.gateway.release_slot(slot.allocation_id or request_id)
            return
        assert slot.allocation_id is not None and self.graph is not None
        for attempt_id in waiting:
            execution = self.graph.execution(attempt_id)
            if execution is not None and execution.state is _E.SCHEDULED:
                self._deploy(execution, slot.allocation_id)

    @supervised
    def on_slot_request_timeout(self: JobMaster, request_id: str, timeout: float) -> None:
        reason = (
            f"NoResourceAvailableException: no TaskManager offered a slot within slot.request.timeout "
            f"({timeout:g} s). Start TaskManagers (flink-runtime taskmanager) and check that they "
            f"reach the JobManager at jobmanager.rpc.address:jobmanager.rpc.port."
        )
        self._fail_attempts(self._slots.request_timed_out(request_id), reason)

    @supervised
    def on_allocation_lost(self: JobMaster, allocation_id: str, reason: str) -> None:
        """The TaskManager holding this allocation is gone: fail what ran in it."""
        self._fail_attempts(self._slots.allocation_lost(allocation_id), reason)

    def _fail_attempts(self: JobMaster, attempt_ids: list[str], reason: str) -> None:
        assert self.graph is not None
        for attempt_id in attempt_ids:
            execution = self.graph.execution(attempt_id)
            if execution is not None:
                self._fail_execution(execution, reason)

    def _deploy(self: JobMaster, execution: Execution, allocation_id: str) -> None:
        slot = self.gateway.slot_of(allocation_id)
        address = self.gateway.task_manager_address(slot.task_manager_id) if slot is not None else None
        if slot is None or address is None:
            self._fail_execution(execution, f"slot {allocation_id} vanished before deployment")
            return
        execution.assigned_resource = allocation_id
        execution.task_manager_id = slot.task_manager_id
        self._set_execution_state(execution, _E.DEPLOYING)
        descriptor = self._deployment_descriptor(execution, allocation_id, slot.slot_index)
        self.gateway.ask_task_manager(
            address,
            SubmitTask(descriptor=descriptor),
            lambda answer, error: self._on_task_submitted(execution, answer, error),
        )

    def _on_task_submitted(self: JobMaster, execution: Execution, answer: Any, error: BaseException | None) -> None:
        if error is not None:
            self._fail_execution(execution, f"could not deploy {execution.vertex.task_name_with_subtask}: {error}")
        elif isinstance(answer, TaskOperationResult) and not answer.success:
            self._fail_execution(
                execution, f"TaskManager refused {execution.vertex.task_name_with_subtask}: {answer.reason}"
            )

    def _deployment_descriptor(
        self, execution: Execution, allocation_id: str, slot_index: int
    ) -> TaskDeploymentDescriptor:
        vertex = execution.vertex
        vertex_id = vertex.job_vertex.id
        return task_deployment_descriptor(
            execution,
            job_id=self.job_id,
            job_name=self.name,
            jobmanager_id=self.gateway.jobmanager_id,
            allocation_id=allocation_id,
            slot_index=slot_index,
            data_namespace=self.data_namespace,
            vertex_config={
                **self._vertex_config(vertex_id, vertex.subtask_index),
                STATE_CONFIG_KEY: self.tracker.state_config(vertex_id, vertex.subtask_index, execution.attempt_id),
            },
            job_config=self.job_graph.config,
            libraries=self.job_graph.libraries,
            partition_locations=self._partition_locations,
            partition_addresses=self._partition_addresses,
            chunk_locations=self.tracker.chunks_for,
            allowed_directories=allowed_directories(self.config),
        )

    def _vertex_config(self: JobMaster, vertex_id: str, subtask_index: int) -> dict[str, Any]:
        base = self.graph.vertices[vertex_id].job_vertex.config if self.graph is not None else {}
        extra = dict(self._prepared[vertex_id].config) if vertex_id in self._prepared else {}
        completed = self.splits.completed_by(vertex_id, subtask_index)
        if completed:
            # The chunks a new attempt of this subtask keeps; any other split chunk in its
            # partition was committed by an attempt that died before reporting it, and
            # that split is being (or was) redone elsewhere.
            extra[COMPLETED_SPLITS_KEY] = completed
        return {**base, **extra} if extra else base

    # -- cancelling ---------------------------------------------------------------------------------

    def _cancel_all_executions(self: JobMaster) -> None:
        assert self.graph is not None
        for vertex in self.graph.all_execution_vertices():
            execution = vertex.current_execution
            if execution.state.is_deployed:
                self._set_execution_state(execution, _E.CANCELING)
                address = self.gateway.task_manager_address(execution.task_manager_id or "")
                if address is None:
                    self._set_execution_state(execution, _E.CANCELED)
                    continue
                self.gateway.ask_task_manager(
                    address,
                    self._cancel_task(execution),
                    lambda answer, error, execution=execution: self._on_cancel_answer(execution, answer, error),
                )
            elif not execution.is_terminal and execution.state is not _E.CANCELING:
                self._set_execution_state(execution, _E.CANCELED)

    def _on_cancel_answer(self: JobMaster, execution: Execution, answer: Any, error: BaseException | None) -> None:
        # A TaskManager that is gone or no longer knows the task cannot report it
        # CANCELED, so the JobManager concludes it here.
        if error is not None or (isinstance(answer, TaskOperationResult) and not answer.success):
            self._set_execution_state(execution, _E.CANCELED)

    def _tell_deployed_to_cancel(self: JobMaster) -> None:
        """Tell every deployed task to cancel, expecting no answer: this JobManager stops
        working on the job (lost leadership); what the tasks report after is refused."""
        assert self.graph is not None
        for vertex in self.graph.all_execution_vertices():
            execution = vertex.current_execution
            address = self.gateway.task_manager_address(execution.task_manager_id or "")
            if execution.state.is_deployed and address is not None:
                self.gateway.tell_task_manager(address, self._cancel_task(execution))

    def _cancel_task(self: JobMaster, execution: Execution) -> CancelTask:
        # Fenced: a TaskManager registered with another JobManager ignores it.
        return CancelTask(execution_id=execution.attempt_id, jobmanager_id=self.gateway.jobmanager_id)
