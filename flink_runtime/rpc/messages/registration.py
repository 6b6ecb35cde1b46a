"""Registration and liveness: a TaskManager registers with the JobManager, which
watches it with heartbeats (registration/, heartbeat/, jobmanager/resource_manager.py).
"""

from __future__ import annotations

from flink_runtime.rpc.messages.base import PROTOCOL_VERSION, Message


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
