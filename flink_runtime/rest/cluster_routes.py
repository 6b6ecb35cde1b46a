"""REST: the cluster (overview, web configuration, JobManager configuration, TaskManagers)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter

from flink_runtime import __version__
from flink_runtime.rest import taskmanager_views

if TYPE_CHECKING:
    from flink_runtime.jobmanager.leadership import LeaderInfo
    from flink_runtime.jobmanager.restful_gateway import ClusterOverview, RestfulGateway


def overview_json(overview: ClusterOverview) -> dict[str, Any]:
    """Flink's ClusterOverviewWithVersion."""
    return {
        "taskmanagers": overview.task_managers,
        "slots-total": overview.slots_total,
        "slots-available": overview.slots_available,
        "jobs-running": overview.jobs_running,
        "jobs-finished": overview.jobs_finished,
        "jobs-cancelled": overview.jobs_cancelled,
        "jobs-failed": overview.jobs_failed,
        "flink-version": __version__,
        "flink-commit": "",
    }


def leader_json(info: LeaderInfo) -> dict[str, Any]:
    """GET /leader: who leads the cluster, and whether this JobManager does."""
    leader = info.leader
    return {
        "cluster-id": info.cluster_id,
        "high-availability": "database" if info.high_availability else "NONE",
        "is-leader": info.is_leader,
        "leader": None
        if leader is None
        else {"id": leader.leader_id, "fencing-token": leader.token, "rest-url": leader.rest_url},
    }


def cluster_routes(gateway: RestfulGateway) -> APIRouter:
    router = APIRouter()

    @router.get("/overview", summary="Cluster overview")
    async def overview() -> dict[str, Any]:
        return overview_json(gateway.cluster_overview())

    @router.get("/leader", summary="Who leads the cluster (high availability), and whether this JobManager does")
    async def leader() -> dict[str, Any]:
        return leader_json(gateway.leader_info())

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
        return [{"key": key, "value": value} for key, value in sorted(gateway.configuration().items())]

    @router.get("/taskmanagers", summary="Registered TaskManagers")
    async def taskmanagers() -> dict[str, Any]:
        snapshots = [gateway.task_manager_snapshot(tm) for tm in gateway.task_manager_list()]
        return {"taskmanagers": [taskmanager_views.taskmanager_info(snapshot) for snapshot in snapshots]}

    @router.get("/taskmanagers/{taskmanager_id}", summary="One TaskManager")
    async def taskmanager(taskmanager_id: str) -> dict[str, Any]:
        snapshot = gateway.task_manager_snapshot(gateway.task_manager(taskmanager_id))
        return taskmanager_views.taskmanager_details(snapshot)

    return router
