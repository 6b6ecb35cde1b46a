"""The registered TaskManagers as Flink's REST API v1 JSON (GET /taskmanagers,
/taskmanagers/:id), from the JobManager's TaskManagerSnapshot: what each reported when it
registered (slots, cores, memory of the machine, of its process and of its Spark JVM),
the slots and tasks it holds now, and the JVM metrics its heartbeats carry
(taskmanager/system_metrics.py).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flink_runtime.jobmanager.restful_gateway import TaskManagerSnapshot
    from flink_runtime.scheduler.resource_profile import ResourceProfile


def _resource(cpu: float, heap_mb: float, managed_mb: float = 0.0) -> dict[str, Any]:
    """Flink's ResourceProfileInfo: memory in MiB; the kinds Flink splits memory into
    that a TaskManager here does not have are 0."""
    return {
        "cpuCores": cpu,
        "taskHeapMemory": int(heap_mb),
        "taskOffHeapMemory": 0,
        "managedMemory": int(managed_mb),
        "networkMemory": 0,
        "extendedResources": {},
    }


def _profile(profile: ResourceProfile) -> dict[str, Any]:
    return _resource(profile.cpu_cores, profile.task_heap_memory_mb, profile.managed_memory_mb)


def _known(profile: ResourceProfile) -> bool:
    """Whether a profile has numbers (a TaskManager of an older version reports none)."""
    return not (profile.is_unknown or profile.is_any)


def _memory_configuration(resources: dict[str, float], total: ResourceProfile) -> dict[str, int]:
    """Flink's TaskExecutorMemoryConfiguration in bytes: the Python process is the
    framework's heap, the task heap its slots share (its Spark JVM's heap by default) the
    tasks' heap."""
    framework = int(resources.get("process_mb", 0) * 2**20)
    task_heap = int(resources.get("spark_heap_mb", 0) * 2**20)
    managed = 0
    if _known(total):
        task_heap = int(total.task_heap_memory_mb * 2**20)
        managed = int(total.managed_memory_mb * 2**20)
    return {
        "frameworkHeap": framework,
        "taskHeap": task_heap,
        "frameworkOffHeap": 0,
        "taskOffHeap": 0,
        "networkMemory": 0,
        "managedMemory": managed,
        "jvmMetaspace": 0,
        "jvmOverhead": 0,
        "totalFlinkMemory": framework + task_heap + managed,
        "totalProcessMemory": framework + task_heap + managed,
    }


def taskmanager_info(snapshot: TaskManagerSnapshot) -> dict[str, Any]:
    """GET /taskmanagers (each) with Flink's TaskManagerInfo fields: what a TaskManager
    reports when it registers (slots, cores, memory of the machine, of its process and of
    its Spark JVM), the slots in use and the tasks it runs."""
    registration = snapshot.registration
    tm_id = registration.task_manager_id
    free = snapshot.free_slots
    resources = registration.resources
    total = snapshot.total_resource
    cpu = float(resources.get("cpu_cores", registration.slots))
    if _known(total):
        total_resource, free_resource = _profile(total), _profile(snapshot.free_resource)
        managed = total.managed_memory_mb
    else:  # counted slots only: shares of what it reported of its machine and Spark heap
        heap_mb = float(resources.get("spark_heap_mb", 0))
        slots = max(1, registration.slots)
        total_resource = _resource(cpu, heap_mb)
        free_resource = _resource(cpu * free / slots, heap_mb * free / slots)
        managed = 0.0
    return {
        "id": tm_id,
        "path": registration.address,
        "host": registration.host,
        "dataPort": -1,
        "jmxPort": -1,
        "timeSinceLastHeartbeat": int((time.time() - (time.monotonic() - registration.last_heartbeat)) * 1000),
        "slotsNumber": registration.slots,
        "freeSlots": free,
        "assignedTasks": len(snapshot.task_jobs),
        "totalResource": total_resource,
        "freeResource": free_resource,
        "hardware": {
            "cpuCores": int(cpu),
            "physicalMemory": int(resources.get("memory_mb", 0) * 2**20),
            "freeMemory": -1,
            "managedMemory": int(managed * 2**20),
        },
        "memoryConfiguration": _memory_configuration(resources, total),
    }


def taskmanager_details(snapshot: TaskManagerSnapshot) -> dict[str, Any]:
    """GET /taskmanagers/:id: the TaskManagerInfo, the slots its jobs hold, and Flink's
    JVM metrics from what its heartbeats reported."""
    registration = snapshot.registration
    if _known(snapshot.total_resource):
        # Flink's SlotInfo: one entry per slot in use, with what the slot holds.
        allocated = [{"resource": _profile(profile), "jobId": job_id} for profile, job_id in snapshot.allocated_slots]
    else:
        resource = _resource(1.0, float(registration.resources.get("spark_heap_mb", 0)) / max(1, registration.slots))
        # The slots its jobs hold (a continuous job's between rounds too), else its tasks'.
        jobs = [job_id for _profile, job_id in snapshot.allocated_slots] or snapshot.task_jobs
        allocated = [{"resource": resource, "jobId": job_id} for job_id in jobs]
    return taskmanager_info(snapshot) | {
        "allocatedSlots": allocated,
        "metrics": taskmanager_jvm_metrics(registration.metrics),
    }


def taskmanager_jvm_metrics(reported: dict[str, float]) -> dict[str, Any]:
    """Flink's TaskManagerMetricsInfo from what the TaskManager's heartbeats reported of
    its Spark JVM (0 for what it did not report: no session started yet, Spark Connect,
    or Flink's network memory, which Spark has no counterpart of)."""
    values: dict[str, Any] = dict.fromkeys(_JVM_METRICS, 0)
    for field, name in _JVM_METRIC_NAMES.items():
        values[field] = int(reported.get(name, 0))
    collectors: dict[str, dict[str, Any]] = {}
    for name, value in reported.items():
        prefix, _, kind = name.rpartition(".")
        if prefix.startswith(_GC_PREFIX) and kind in ("Count", "Time"):
            collector = collectors.setdefault(prefix[len(_GC_PREFIX) :], {"count": 0, "time": 0})
            collector[kind.lower()] = int(value)
    values["garbageCollectors"] = [{"name": name, **figures} for name, figures in sorted(collectors.items())]
    return values


_GC_PREFIX = "Status.JVM.GarbageCollector."
_JVM_METRIC_NAMES = {
    "heapUsed": "Status.JVM.Memory.Heap.Used",
    "heapCommitted": "Status.JVM.Memory.Heap.Committed",
    "heapMax": "Status.JVM.Memory.Heap.Max",
    "nonHeapUsed": "Status.JVM.Memory.NonHeap.Used",
    "nonHeapCommitted": "Status.JVM.Memory.NonHeap.Committed",
    "nonHeapMax": "Status.JVM.Memory.NonHeap.Max",
}
_JVM_METRICS = (
    "heapUsed heapCommitted heapMax nonHeapUsed nonHeapCommitted nonHeapMax directCount directUsed directMax "
    "mappedCount mappedUsed mappedMax nettyShuffleMemorySegmentsAvailable nettyShuffleMemorySegmentsUsed "
    "nettyShuffleMemorySegmentsTotal nettyShuffleMemoryAvailable nettyShuffleMemoryUsed nettyShuffleMemoryTotal"
).split()
