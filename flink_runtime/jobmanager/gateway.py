"""What a JobMaster needs from the JobManager that hosts it, and the supervised view of
it each JobMaster gets: a callback the job scheduled (a timer, the result of work in a
thread or of an RPC) that raises is reported as the job's failure, never lost."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from flink_runtime.rpc.supervision import Supervised, Supervisor, guarded, supervise

if TYPE_CHECKING:
    from flink_runtime.planner import Planner
    from flink_runtime.rpc.messages import JobStatusChanged, Message
    from flink_runtime.scheduler.resource_profile import ResourceProfile
    from flink_runtime.scheduler.slotpool import PhysicalSlot

Callback = Callable[[Any, BaseException | None], None]

# The job the JobManager hosts (jobmaster.JobMaster), as the gateway's calls name it:
# a type parameter, so this module needs no import of the JobMaster it serves.
J_contra = TypeVar("J_contra", contravariant=True)


class JobMasterGateway(Supervisor, Protocol[J_contra]):
    """The JobManager, as its JobMasters use it (it supervises them too)."""

    ask_timeout: float
    blob_dir: str  # where uploaded libraries live on the JobManager
    planner: Planner  # runs the job's own code (planner/)
    planner_timeout: float  # seconds
    jobmanager_id: str  # the fencing token deployed tasks carry back
    task_managers: Mapping[str, Any]  # registered (RegisteredTaskManager): one resolves Spark plans
    cluster_secret: str  # the RPC's, for the planner's ask of that TaskManager

    def run_async(self, awaitable: Any, on_done: Callback | None = None) -> Any: ...
    def request_slot(
        self, job: J_contra, request_id: str, preferred_hosts: list[str], profile: ResourceProfile = ...
    ) -> PhysicalSlot | None: ...
    def release_slot(self, allocation_id: str) -> None: ...
    def cancel_slot_request(self, request_id: str) -> None: ...
    def slot_requests_waiting(self) -> bool: ...  # a request (any job's) queued in the slot pool
    def slot_of(self, allocation_id: str) -> PhysicalSlot | None: ...
    def task_manager_address(self, task_manager_id: str) -> str | None: ...
    def ask_task_manager(self, address: str, message: Message, on_done: Callback) -> None: ...
    def job_status_changed(self, job: J_contra, event: JobStatusChanged) -> None: ...
    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> Any: ...
    def tell_task_manager(self, address: str, message: Message) -> None: ...
    def blocking_ask(self) -> Callable[[str, Message], Message]: ...
    def release_partitions(self, job_id: str, data_namespace: str) -> None: ...
    def savepoint_request_changed(self, job: J_contra, request_id: str, status: dict[str, Any]) -> None: ...
    def checkpoint_completed(
        self, job: J_contra, checkpoint_id: int, location: str, is_savepoint: bool, size: int, subsumed: list[str]
    ) -> None: ...


class SupervisedGateway:
    """The gateway as one job sees it: the callbacks it hands over run guarded, so what
    they raise goes to the JobManager's supervision of that job. Everything else is the
    JobManager's own."""

    def __init__(self, gateway: JobMasterGateway[Any], job: Supervised) -> None:
        self._gateway = gateway
        self._job = job

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._gateway, name)
        if inspect.ismethod(value) and value.__self__ is self._gateway:
            # One of the JobManager's methods: kept here, so that the next call finds it
            # without a failed look-up and this (several per deployment). Its fields (the
            # fencing token...) are read through each time.
            self.__dict__[name] = value
        return value

    def _guard(self, function: Callable[..., Any]) -> Callable[..., Any]:
        return guarded(self._gateway, self._job, function)

    def run_async(self, awaitable: Any, on_done: Callback | None = None) -> Any:
        return self._gateway.run_async(awaitable, self._guard(on_done) if on_done is not None else None)

    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> Any:
        return self._gateway.schedule_once(delay, self._guard(function), *args)

    def ask_task_manager(self, address: str, message: Message, on_done: Callback) -> None:
        self._gateway.ask_task_manager(address, message, self._guard(on_done))


def supervised(method: Callable[..., None]) -> Callable[..., None]:
    """A JobMaster entry point the JobManager calls outside a message about the job (slot
    pool events, start): what it raises is this job's failure (see JobMaster.restart)."""

    @functools.wraps(method)
    def call(job: Any, *args: Any) -> None:
        try:
            method(job, *args)
        except Exception as error:
            supervise(job.supervisor, job, error)

    return call
