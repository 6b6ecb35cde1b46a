"""REST: the cluster-level paths Flink 2.3's web UI calls that the other routers do not serve.

- `/applications/overview`: Flink 2.3's applications (a program that submits jobs and
  is tracked as one). Jobs here are submitted as JobGraphs, never by an application:
  Flink's answer for none, `{"applications": []}`.
- `/datasets`: cluster data sets (intermediate results kept across jobs). Result
  partitions here belong to one job and end with it: none.
- `/jobs/:id/jobmanager/config|environment|log-url` and
  `/jobs/:id/taskmanagers/:tm/log-url`: the JobManager as a job's page shows it: the
  JobManager's configuration (secrets masked), its Python process's environment in
  Flink's EnvironmentInfo shape, and where its (or a TaskManager's) log is served.
- `/taskmanagers/:id/thread-dump`: the TaskManager's Python threads (asked over RPC,
  logs/thread_dump.py), in Flink's ThreadDumpInfo shape.
- `/taskmanagers/metrics`, `/jobs/metrics`: a metric aggregated over the TaskManagers or
  jobs (`get`, `agg`, and `taskmanagers` / `jobs` to narrow), as Flink's aggregating
  handlers answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query

from flink_runtime.rest.errors import RestError
from flink_runtime.rest.jobmanager_views import environment_info, thread_dump_info
from flink_runtime.rest.metric_routes import aggregated_list
from flink_runtime.rpc.messages import RequestThreadDump, ThreadDump
from flink_runtime.rpc.service import AskTimeoutError, RpcException

if TYPE_CHECKING:
    from flink_runtime.jobmanager.restful_gateway import RestfulGateway

_GET = Query(None, description="Comma-separated metric names; without it, the names available.")
_AGG = Query(None, description="Comma-separated: min, max, avg, sum (default all).")


def _selected(values: dict[str, dict[str, float]], wanted: str | None, what: str) -> list[dict[str, float]]:
    """The metrics of the ids in `wanted` (comma-separated; all when None), each with every
    name any of them has (0 for one it lacks), so aggregation sees one set of names."""
    ids = list(values) if wanted is None else [part.strip() for part in wanted.split(",") if part.strip()]
    unknown = [item for item in ids if item not in values]
    if unknown:
        raise RestError(404, f"Unknown {what}: {', '.join(unknown)}.")
    names = dict.fromkeys(name for item in ids for name in values[item])
    return [{name: values[item].get(name, 0.0) for name in names} for item in ids]


def flink_ui_routes(gateway: RestfulGateway, rest_url: str) -> APIRouter:
    router = APIRouter()

    @router.get("/applications/overview", summary="Flink 2.3 applications: none (jobs here are JobGraphs)")
    async def applications_overview() -> dict[str, Any]:
        return {"applications": []}

    @router.get("/datasets", summary="Cluster data sets: none (result partitions end with their job)")
    async def datasets() -> dict[str, Any]:
        return {"dataSets": []}

    @router.get("/jobs/{job_id}/jobmanager/config", summary="The configuration of the JobManager running the job")
    async def job_jobmanager_config(job_id: str) -> list[dict[str, str]]:
        gateway.job_state(job_id)  # 404 for an unknown job
        return [{"key": key, "value": value} for key, value in sorted(gateway.configuration().items())]

    @router.get("/jobs/{job_id}/jobmanager/environment", summary="The environment of the JobManager running the job")
    async def job_jobmanager_environment(job_id: str) -> dict[str, Any]:
        gateway.job_state(job_id)
        return environment_info()

    @router.get("/jobs/{job_id}/jobmanager/log-url", summary="Where the JobManager's log is served")
    async def job_jobmanager_log_url(job_id: str) -> dict[str, str]:
        gateway.job_state(job_id)
        return {"url": f"{rest_url}/jobmanager/log"}

    @router.get("/jobs/{job_id}/taskmanagers/{taskmanager_id}/log-url", summary="Where a TaskManager's log is served")
    async def job_taskmanager_log_url(job_id: str, taskmanager_id: str) -> dict[str, str]:
        gateway.job_state(job_id)
        gateway.task_manager(taskmanager_id)  # 404 for an unknown TaskManager
        return {"url": f"{rest_url}/taskmanagers/{taskmanager_id}/log"}

    @router.get("/taskmanagers/metrics", summary="TaskManager metrics aggregated over TaskManagers")
    async def taskmanagers_metrics(
        get: str | None = _GET,
        agg: str | None = _AGG,
        taskmanagers: str | None = Query(None, description="Comma-separated TaskManager ids (default all)."),
    ) -> list[dict[str, Any]]:
        values = {tm.task_manager_id: tm.metrics for tm in gateway.task_manager_list()}
        return aggregated_list(_selected(values, taskmanagers, "TaskManager"), get, agg)

    @router.get("/jobs/metrics", summary="Job metrics aggregated over jobs")
    async def jobs_metrics(
        get: str | None = _GET,
        agg: str | None = _AGG,
        jobs: str | None = Query(None, description="Comma-separated job ids (default all running here)."),
    ) -> list[dict[str, Any]]:
        values = {job.job_id: job.metrics for job in gateway.all_job_metrics()}
        return aggregated_list(_selected(values, jobs, "job"), get, agg)

    @router.get("/taskmanagers/{taskmanager_id}/thread-dump", summary="A TaskManager's Python threads (Flink's shape)")
    async def taskmanager_thread_dump(taskmanager_id: str) -> dict[str, Any]:
        registration = gateway.task_manager(taskmanager_id)
        who = f"TaskManager {taskmanager_id}"
        try:
            answer = await gateway.ask_task_manager(registration, RequestThreadDump())
        except AskTimeoutError:
            raise RestError(504, f"{who} did not answer within {gateway.ask_timeout:g} s.") from None
        except RpcException as exc:
            raise RestError(503, f"{who} could not be asked for a thread dump: {exc}") from None
        if not isinstance(answer, ThreadDump):
            raise RestError(503, f"{who} answered {type(answer).__name__} (an older version without thread dumps?).")
        return thread_dump_info(answer.threads)

    return router
