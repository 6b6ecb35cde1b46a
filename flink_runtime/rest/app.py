"""The REST API (FastAPI), with Flink REST API v1 paths and field names.

One router per concept: the cluster (cluster_routes), jobs (job_routes), savepoints
and checkpoints (operation_routes), metrics (metric_routes) and job libraries
(blob_routes), each reaching the JobManager only through its RestfulGateway
(jobmanager/restful_gateway.py) and shaping the JSON itself (job_views.py). Every
error answers `{"errors": [...]}` with a 4xx/5xx status, as Flink's REST API does
(rest/errors.py maps the JobManager's typed refusals, in one place). The guard in
front (rest/guard.py) authenticates, bounds requests and strips Flink's `/v1` prefix
before routing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from flink_runtime import __version__
from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.rest.blob_routes import blob_routes
from flink_runtime.rest.cluster_routes import cluster_routes
from flink_runtime.rest.docs_routes import docs_routes
from flink_runtime.rest.errors import install_error_handlers
from flink_runtime.rest.flink_ui_routes import flink_ui_routes
from flink_runtime.rest.jar_routes import jar_routes
from flink_runtime.rest.job_routes import job_routes
from flink_runtime.rest.jobmanager_views import jobmanager_routes
from flink_runtime.rest.log_routes import log_routes
from flink_runtime.rest.metric_routes import metric_routes
from flink_runtime.rest.operation_routes import operation_routes
from flink_runtime.rest.vertex_routes import vertex_routes
from flink_runtime.rest.web_routes import web_routes

if TYPE_CHECKING:
    from flink_runtime.jobmanager.restful_gateway import RestfulGateway


def create_app(gateway: RestfulGateway, config: Configuration, rest_url: str = "") -> FastAPI:
    """The REST API over the JobManager's one door (jobmanager/restful_gateway.py)."""
    app = FastAPI(
        title="flink-runtime REST API",
        version=__version__,
        description="Flink REST API v1 paths and fields for a Python JobManager.",
        # FastAPI's own pages load Swagger UI and ReDoc from CDNs; docs_routes serves /docs offline.
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    # First: its literal /jobs/metrics and /taskmanagers/metrics before /jobs/{job_id}, ...
    app.include_router(flink_ui_routes(gateway, rest_url))
    app.include_router(cluster_routes(gateway))
    app.include_router(job_routes(gateway, config.get_seconds(cfg.REST_SUBMIT_WAIT), rest_url))
    app.include_router(operation_routes(gateway))
    app.include_router(metric_routes(gateway))
    app.include_router(blob_routes(gateway, rest_url))
    app.include_router(log_routes(gateway))
    app.include_router(jobmanager_routes())
    app.include_router(jar_routes())
    app.include_router(vertex_routes(gateway))
    app.include_router(web_routes())
    app.include_router(docs_routes(app.title))

    # OpenAPI: the JobGraph schema is published as a component.
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            (_,), components = msgspec.json.schema_components([JobGraph], ref_template="#/components/schemas/{name}")
            schema.setdefault("components", {}).setdefault("schemas", {}).update(components)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
