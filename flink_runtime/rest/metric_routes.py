"""REST: metrics (jobmanager/metrics.py) as Flink's metric endpoints and as Prometheus text.

Flink's metric endpoints answer a list: without `get`, the names there are
(`[{"id": "numRunningJobs"}, ...]`); with `get=a,b`, those metrics' values as text
(`[{"id": "a", "value": "3"}]`). Per-vertex metrics are named `<subtask>.<metric>`;
`/subtasks/metrics` aggregates a metric over the subtasks (`min`, `max`, `avg`, `sum`,
narrowed with `agg=`). An unknown name is left out of the answer, as Flink does.

A TaskManager's own metrics (CPU, memory, its Spark JVM's heap: taskmanager/system_metrics.py)
come with its heartbeats; `/taskmanagers/:id/metrics` serves the latest.

`GET /metrics` is the Prometheus exposition of the same values (prometheus_client), with
the names and labels of Flink's Prometheus reporter: `flink_jobmanager_<metric>`,
`flink_taskmanager_<metric>{host, tm_id}` (dots as underscores: `..._Status_JVM_CPU_Load`),
`flink_jobmanager_job_<metric>{job_id, job_name}` and
`flink_taskmanager_job_task_<metric>{job_id, job_name, task_id, task_name, subtask_index}`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from flink_runtime.rest.errors import RestError

if TYPE_CHECKING:
    from flink_runtime.jobmanager.restful_gateway import RestfulGateway

AGGREGATIONS = ("min", "max", "avg", "sum")
_GET = Query(None, description="Comma-separated metric names; without it, the names available.")


def metric_list(values: dict[str, float], get: str | None) -> list[dict[str, str]]:
    """Flink's MetricCollectionResponseBody."""
    if get is None:
        return [{"id": name} for name in values]
    wanted = [name.strip() for name in get.split(",") if name.strip()]
    return [{"id": name, "value": _text(values[name])} for name in wanted if name in values]


def aggregated_list(per_subtask: list[dict[str, float]], get: str | None, agg: str | None) -> list[dict[str, Any]]:
    """Flink's AggregatedMetricsResponseBody: each metric over the subtasks."""
    names = list(per_subtask[0]) if per_subtask else []
    if get is None:
        return [{"id": name} for name in names]
    kinds = [kind.strip() for kind in (agg or ",".join(AGGREGATIONS)).split(",") if kind.strip()]
    unknown = [kind for kind in kinds if kind not in AGGREGATIONS]
    if unknown:
        raise RestError(400, f"agg may name {', '.join(AGGREGATIONS)}; got {', '.join(unknown)}.")
    answer = []
    for name in (name.strip() for name in get.split(",")):
        if name not in names:
            continue
        values = [float(subtask[name]) for subtask in per_subtask]
        figures = {"min": min(values), "max": max(values), "avg": sum(values) / len(values), "sum": sum(values)}
        answer.append({"id": name, **{kind: figures[kind] for kind in kinds}})
    return answer


def _text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def metric_routes(gateway: RestfulGateway) -> APIRouter:
    router = APIRouter()

    @router.get("/jobmanager/metrics", summary="The JobManager's metrics (Flink's names)")
    async def jobmanager_metrics(get: str | None = _GET) -> list[dict[str, str]]:
        return metric_list(gateway.jobmanager_metrics(), get)

    @router.get("/taskmanagers/{taskmanager_id}/metrics", summary="A TaskManager's CPU and memory and its Spark JVM's")
    async def taskmanager_metrics(taskmanager_id: str, get: str | None = _GET) -> list[dict[str, str]]:
        return metric_list(gateway.task_manager(taskmanager_id).metrics, get)

    @router.get("/jobs/{job_id}/metrics", summary="A job's metrics: uptime, restarts, checkpoints")
    async def job_metrics(job_id: str, get: str | None = _GET) -> list[dict[str, str]]:
        return metric_list(gateway.job_metrics(job_id), get)

    @router.get("/jobs/{job_id}/vertices/{vertex_id}/metrics", summary="A vertex's metrics, <subtask>.<name>")
    async def vertex_metrics(job_id: str, vertex_id: str, get: str | None = _GET) -> list[dict[str, str]]:
        per_subtask = gateway.vertex_metrics(job_id, vertex_id).subtasks
        values = {f"{index}.{name}": value for index, m in enumerate(per_subtask) for name, value in m.items()}
        return metric_list(values, get)

    @router.get(
        "/jobs/{job_id}/vertices/{vertex_id}/subtasks/metrics",
        summary="A vertex's metrics aggregated over its subtasks (min, max, avg, sum)",
    )
    async def subtasks_metrics(
        job_id: str,
        vertex_id: str,
        get: str | None = _GET,
        agg: str | None = Query(None, description="Comma-separated: min, max, avg, sum (default all)."),
    ) -> list[dict[str, Any]]:
        return aggregated_list(gateway.vertex_metrics(job_id, vertex_id).subtasks, get, agg)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ClusterCollector(gateway))

    @router.get("/metrics", summary="Every metric as Prometheus text", response_class=Response)
    async def prometheus() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router


class _ClusterCollector:
    """Reads the metrics on each scrape, so a scrape sees the JobManager as it is."""

    def __init__(self, gateway: RestfulGateway) -> None:
        self.gateway = gateway

    def collect(self) -> Iterator[Metric]:
        for name, value in self.gateway.jobmanager_metrics().items():
            yield GaugeMetricFamily(f"flink_jobmanager_{name}", f"Flink's jobmanager {name}", value=value)
        families: dict[str, GaugeMetricFamily] = {}

        def add(scope: str, name: str, labels: dict[str, str], value: float) -> None:
            family = families.get(f"{scope}_{name}")
            if family is None:
                family = families[f"{scope}_{name}"] = GaugeMetricFamily(
                    f"{scope}_{name}", f"Flink's {scope} {name}", labels=list(labels)
                )
            family.add_metric(list(labels.values()), value)

        for registration in self.gateway.task_manager_list():
            tm_labels = {"host": registration.host, "tm_id": registration.task_manager_id}
            for name, value in registration.metrics.items():
                add("flink_taskmanager", name.replace(".", "_"), tm_labels, value)
        for job in self.gateway.all_job_metrics():
            job_labels = {"job_id": job.job_id, "job_name": job.name}
            for name, value in job.metrics.items():
                add("flink_jobmanager_job", name, job_labels, value)
            for vertex in job.vertices:
                for index, subtask in enumerate(vertex.subtasks):
                    labels = {**job_labels, "task_id": vertex.id, "task_name": vertex.name, "subtask_index": str(index)}
                    for name, value in subtask.items():
                        add("flink_taskmanager_job_task", name, labels, value)
        yield from families.values()
