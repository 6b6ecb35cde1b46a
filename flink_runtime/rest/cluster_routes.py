"""REST: the cluster (overview, web configuration, JobManager configuration, TaskManagers)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter

from flink_runtime import __version__
from flink_runtime.jobmanager import taskmanager_snapshots
from flink_runtime.rest.errors import RestError
from flink_runtime.security import masked_config

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmanager import JobManager


def cluster_routes(jobmanager: JobManager) -> APIRouter:
    router = APIRouter()

    @router.get("/overview", summary="Cluster overview")
    async def overview() -> dict[str, Any]:
        return jobmanager.cluster_overview()

    @router.get("/leader", summary="Who leads the cluster (high availability), and whether this JobManager does")
    async def leader() -> dict[str, Any]:
        return jobmanager.leader_view()

    @router.get("/config", summary="Web UI configuration")
    async def web_config() -> dict[str, Any]:
        offset = datetime.datetime.now().astimezone().utcoffset() or datetime.timedelta()
        return {
            "refresh-interval": 3000,
            "timezone-name": str(datetime.datetime.now().astimezone().tzinfo),
            "timezone-offset": int(offset.total_seconds() * 1000),
            "flink-version": __version__,
            "flink-revision": "",
            "features": {"web-submit": False, "web-cancel": True, "web-rescale": False, "web-history": False},
        }

    @router.get("/jobmanager/config", summary="The JobManager's configuration")
    async def jobmanager_config() -> list[dict[str, str]]:
        masked = masked_config(jobmanager.config.to_dict())
        return [{"key": key, "value": value} for key, value in sorted(masked.items())]

    @router.get("/taskmanagers", summary="Registered TaskManagers")
    async def taskmanagers() -> dict[str, Any]:
        return {
            "taskmanagers": [
                taskmanager_snapshots.taskmanager_info(jobmanager, registration)
                for registration in jobmanager.task_managers.values()
            ]
        }

    @router.get("/taskmanagers/{taskmanager_id}", summary="One TaskManager")
    async def taskmanager(taskmanager_id: str) -> dict[str, Any]:
        registration = jobmanager.task_managers.get(taskmanager_id)
        if registration is None:
            raise RestError(404, f"TaskManager {taskmanager_id} not found.")
        return taskmanager_snapshots.taskmanager_details(jobmanager, registration)

    return router
