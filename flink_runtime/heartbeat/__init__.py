"""Heartbeats between the JobManager and its TaskManagers: who is still alive
(manager.py) and whether both sides agree on what runs where (reconciliation.py)."""

from flink_runtime.heartbeat.manager import (
    HeartbeatListener,
    HeartbeatManager,
    HeartbeatManagerSender,
    HeartbeatMonitor,
)
from flink_runtime.heartbeat.reconciliation import (
    DeploymentReconciliation,
    ExecutionDeploymentReconciler,
    ExecutionDeploymentReport,
)

__all__ = [
    "DeploymentReconciliation",
    "ExecutionDeploymentReconciler",
    "ExecutionDeploymentReport",
    "HeartbeatListener",
    "HeartbeatManager",
    "HeartbeatManagerSender",
    "HeartbeatMonitor",
]
