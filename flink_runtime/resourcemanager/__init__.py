"""The active resource manager: TaskManagers started when slot requests wait and stopped
when idle (Flink's ActiveResourceManager with its ResourceManagerDriver).

  policy.py         ResourceAllocationPolicy: the decisions, pure (time passed in)
  active.py         ActiveResourceManager: the shell the JobManager owns; feeds the policy
                    and runs its actions on the driver's thread
  driver.py         ResourceManagerDriver (the interface) and ProcessDriver (processes)
  docker_driver.py  DockerDriver: containers through the Docker Engine API
"""

from flink_runtime.resourcemanager.active import (
    ActiveResourceManager,
    CountedPendingRequests,
    PendingSlotRequests,
    create_driver,
)
from flink_runtime.resourcemanager.driver import ProcessDriver, ResourceManagerDriver, WorkerLaunch
from flink_runtime.resourcemanager.policy import (
    Bounds,
    ClusterView,
    FailJob,
    ResourceAllocationPolicy,
    SlotProfile,
    StartWorker,
    StopWorker,
    WorkerSpec,
)

__all__ = [
    "ActiveResourceManager",
    "Bounds",
    "ClusterView",
    "CountedPendingRequests",
    "FailJob",
    "PendingSlotRequests",
    "ProcessDriver",
    "ResourceAllocationPolicy",
    "ResourceManagerDriver",
    "SlotProfile",
    "StartWorker",
    "StopWorker",
    "WorkerLaunch",
    "WorkerSpec",
    "create_driver",
]
