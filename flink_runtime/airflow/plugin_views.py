"""The cluster page the Airflow plugin adds to the Airflow UI (Browse -> Flink Runtime).

`create_app()` builds a small FastAPI app that plugins/flink_runtime_plugin.py mounts at
/flink-runtime on Airflow's API server:

    GET /flink-runtime/                 an HTML page (server-rendered, no JS build) of the
                                        cluster behind a connection: TaskManagers, slots, jobs
    GET /flink-runtime/api/overview     the same as JSON
    GET /flink-runtime/api/jobs/{id}    one job's details, proxied from the JobManager
    GET /flink-runtime/jobs/{id}        a redirect to the job's page on the cluster's own
                                        dashboard (what the "Flink Runtime Job" link opens)

Every route takes `?conn_id=` (default `flink_runtime_default`) and talks to the cluster
with that connection's token (its password), TLS verification and scheme. The page links
each job to the dashboard and to the proxied details: the REST address an Airflow worker
uses (http://jobmanager:8081 in docker/) is often not one the browser can reach.

The token and the browser: the dashboard takes a token from the URL fragment
(`#token=...&/jobs/<id>`), which browsers never send to any server nor write to its logs.
The redirect adds it at click time, and only for a user whom Airflow's auth manager lets
read that connection (who could read the token on the Connections page anyway); anyone
else lands on the dashboard without it, and the dashboard asks for the token. So the
token is never stored by Airflow (the link in its database holds the job id and the
connection id), and never leaves the API server for a user who may not see it.

The routes ask Airflow's auth manager whether the user may see cluster activity, with the
same JWT (header or cookie) the Airflow UI sends; the iframe the UI embeds the page in
carries the cookie. Airflow's security module is imported on the first request only: the
plugin is loaded by every Airflow component, and only the API server serves it.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from fastapi import Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from flink_runtime.client.job_client import ClusterUnreachable, JobClient, JobNotFound, RestClientError

DEFAULT_CONN_ID = "flink_runtime_default"
CONN_TYPE = "flink_runtime"
# The page must answer quickly even when the JobManager is gone: one try, short timeout.
REQUEST_TIMEOUT_SECONDS = 5.0


class ClusterUnavailable(Exception):
    """The connection cannot be used, or the JobManager did not answer; `reason` says which."""

    def __init__(self, conn_id: str, reason: str, rest_url: str | None = None, refused: bool = False) -> None:
        super().__init__(reason)
        self.conn_id = conn_id
        self.reason = reason
        self.rest_url = rest_url
        self.refused = refused  # it answered, but refused the connection's credentials (401/403)


@dataclasses.dataclass(frozen=True)
class ClusterAccess:
    """How the API server reaches the cluster behind a connection."""

    rest_url: str
    token: str | None = dataclasses.field(default=None, repr=False)
    verify: bool = True

    def client(self) -> JobClient:
        # The page must answer quickly even when the JobManager is gone: one try.
        return JobClient(
            self.rest_url, timeout=REQUEST_TIMEOUT_SECONDS, retries=0, token=self.token or "", verify=self.verify
        )

    def dashboard_url(self, job_id: str, with_token: bool = False) -> str:
        """The job's page on the cluster's dashboard; with the token in the fragment if asked."""
        route = f"/jobs/{quote(job_id, safe='')}"
        if with_token and self.token:
            return f"{self.rest_url}/#token={quote(self.token, safe='')}&{route}"
        return f"{self.rest_url}/#{route}"


@dataclasses.dataclass(frozen=True)
class ClusterSnapshot:
    conn_id: str
    rest_url: str
    overview: dict[str, Any]
    taskmanagers: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    fetched_at: float  # epoch seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "conn_id": self.conn_id,
            "rest_url": self.rest_url,
            "fetched_at": int(self.fetched_at * 1000),
            "overview": self.overview,
            "taskmanagers": self.taskmanagers,
            "jobs": self.jobs,
        }


def cluster_for(conn_id: str) -> ClusterAccess:
    """The REST URL, token and TLS verification behind an Airflow connection of type flink_runtime.

    Only flink_runtime connections are used: the page must not become a way to make the
    API server send requests to the host of any connection a user can name.
    """
    from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook

    try:
        connection = FlinkRuntimeHook.get_connection(conn_id)
    except Exception as exc:  # Airflow raises its own not-found type, which differs by version
        raise ClusterUnavailable(conn_id, f"no connection {conn_id!r}: {exc}") from None
    if connection.conn_type != CONN_TYPE:
        raise ClusterUnavailable(
            conn_id, f"connection {conn_id!r} has type {connection.conn_type!r}, not {CONN_TYPE!r}"
        )
    extra = connection.extra_dejson
    if (connection.host or "").strip().lower() == "embedded" or str(extra.get("embedded", "")).lower() in _TRUE:
        # The embedded cluster listens on 127.0.0.1 and has no token of its own.
        return ClusterAccess(_running_embedded_cluster(conn_id, extra.get("state_dir") or None))
    from flink_runtime.airflow.hooks.connection import cluster_settings

    try:
        settings = cluster_settings(connection)
    except Exception as exc:
        raise ClusterUnavailable(conn_id, f"connection {conn_id!r}: {exc}") from None
    return ClusterAccess(settings.rest_url, settings.token, settings.verify)


_TRUE = ("1", "true", "yes", "on")


def _running_embedded_cluster(conn_id: str, state_dir: str | None) -> str:
    """The embedded cluster's REST URL from its state file, without starting one: the hook
    would start a cluster for a task, but looking at a page must not."""
    from flink_runtime.airflow import embedded

    state_file = Path(state_dir or embedded.default_state_dir()) / embedded.STATE_FILE
    try:
        return str(json.loads(state_file.read_text())["rest_url"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ClusterUnavailable(
            conn_id,
            f"connection {conn_id!r} uses the embedded cluster, which is not running (no {state_file}); "
            "the first task that uses the connection starts it",
        ) from None


def fetch_snapshot(conn_id: str, cluster: ClusterAccess) -> ClusterSnapshot:
    rest_url = cluster.rest_url
    try:
        with cluster.client() as client:
            overview = client.overview()
            taskmanagers = client.taskmanagers()
            jobs = client.list_jobs()
    except ClusterUnreachable as exc:
        raise ClusterUnavailable(conn_id, _unreachable_reason(exc), rest_url) from None
    except RestClientError as exc:
        reason = _refusal_reason(conn_id, cluster, exc)
        raise ClusterUnavailable(conn_id, reason, rest_url, refused=exc.status_code in (401, 403)) from None
    # Running jobs first, then the most recent.
    jobs.sort(key=lambda job: (job.get("state") != "RUNNING", -(job.get("start-time") or 0)))
    taskmanagers.sort(key=lambda tm: str(tm.get("id")))
    return ClusterSnapshot(conn_id, rest_url, overview, taskmanagers, jobs, time.time())


def _unreachable_reason(exc: ClusterUnreachable) -> str:
    # The client's own message ends with advice for the CLI (-m host:port); not for this page.
    cause = exc.__cause__
    detail = f" ({type(cause).__name__}: {cause})" if cause is not None and str(cause) else ""
    return f"cannot reach the JobManager's REST API at {exc.rest_url}{detail}"


def _refusal_reason(conn_id: str, cluster: ClusterAccess, exc: RestClientError) -> str:
    if exc.status_code in (401, 403):
        given = "refused the token of" if cluster.token else "wants a token, and there is none in"
        return (
            f"the JobManager at {cluster.rest_url} {given} connection {conn_id!r} ({exc.status_code}: {exc}); "
            "set the connection's password to the cluster's security.rest.token"
        )
    return f"the JobManager at {cluster.rest_url} answered {exc.status_code}: {exc}"


async def may_read_connection(request: Request, conn_id: str) -> bool:
    """Whether Airflow's auth manager lets the requesting user read connection ``conn_id``."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    user = await get_user(request, None, await bearer_scheme(request))
    return bool(
        get_auth_manager().is_authorized_connection(method="GET", details=ConnectionDetails(conn_id=conn_id), user=user)
    )


async def _anyone(request: Request, conn_id: str) -> bool:
    return True


async def require_cluster_activity_access(request: Request) -> None:
    """Airflow's own check, as its REST API does for the cluster activity view."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user, requires_access_view

    # get_user(request, oauth_token, bearer_credentials): the oauth token is only there for
    # the OpenAPI form; the bearer credentials (or, without them, the cookie) decide.
    user = await get_user(request, None, await bearer_scheme(request))
    requires_access_view(AccessView.CLUSTER_ACTIVITY)(request, user)


# -- rendering ------------------------------------------------------------------------------------


def _datetime(epoch_ms: Any) -> str:
    if not isinstance(epoch_ms, int | float) or epoch_ms <= 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(ms: Any) -> str:
    if not isinstance(ms, int | float) or ms < 0:
        return "-"
    seconds = int(ms // 1000)
    if seconds < 60:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {seconds:02d}s" if hours else f"{minutes}m {seconds:02d}s"


def _ago(epoch_ms: Any, now: float) -> str:
    # Flink's `timeSinceLastHeartbeat` is, despite its name, the heartbeat's epoch time.
    if not isinstance(epoch_ms, int | float) or epoch_ms <= 0:
        return "-"
    return f"{max(0.0, now - epoch_ms / 1000):.1f} s ago"


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Flink Runtime{% if snapshot %} - {{ snapshot.rest_url }}{% endif %}</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1f2937; }
  h1 { font-size: 1.4rem; margin-bottom: .2rem; }
  h2 { font-size: 1.1rem; margin-top: 1.6rem; }
  .meta { color: #6b7280; font-size: .9rem; }
  table { border-collapse: collapse; width: 100%; font-size: .9rem; }
  th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #e5e7eb; }
  th { background: #f3f4f6; }
  code { font-size: .85rem; }
  .cards { display: flex; gap: 1rem; flex-wrap: wrap; }
  .card { border: 1px solid #e5e7eb; border-radius: .4rem; padding: .6rem 1rem; min-width: 8rem; }
  .card b { display: block; font-size: 1.3rem; }
  .state { font-weight: 600; }
  .RUNNING { color: #2563eb; } .FINISHED { color: #16a34a; }
  .FAILED { color: #dc2626; } .CANCELED, .CANCELLING { color: #6b7280; }
  .error { border: 1px solid #fca5a5; background: #fef2f2; padding: 1rem; border-radius: .4rem; }
</style>
</head>
<body>
<h1>Flink Runtime</h1>
<form class="meta" method="get" action="">
  Connection <input name="conn_id" value="{{ conn_id }}" size="28"> <button type="submit">Show</button>
  {% if snapshot %}&middot; REST API <code>{{ snapshot.rest_url }}</code>
  &middot; as of {{ fetched_at }}
  &middot; <a href="api/overview?conn_id={{ conn_id | urlencode }}">JSON</a>{% endif %}
</form>
{% if error %}
<div class="error" role="alert">
  {% if error.refused %}
  <h2>Cluster refused the connection's credentials</h2>
  <p>{{ error.reason }}</p>
  {% else %}
  <h2>Cluster unreachable</h2>
  <p>{{ error.reason }}</p>
  {% if error.rest_url %}<p>REST API: <code>{{ error.rest_url }}</code></p>{% endif %}
  <p>Start the cluster (<code>flink-runtime minicluster</code>, or the services in docker/), or check the
  Airflow connection <code>{{ conn_id }}</code>.</p>
  {% endif %}
</div>
{% else %}
<div class="cards">
  <div class="card">TaskManagers<b>{{ snapshot.overview.get("taskmanagers", 0) }}</b></div>
  <div class="card">Slots available<b>{{ snapshot.overview.get("slots-available", 0) }}
    / {{ snapshot.overview.get("slots-total", 0) }}</b></div>
  <div class="card">Jobs running<b>{{ snapshot.overview.get("jobs-running", 0) }}</b></div>
  <div class="card">Finished<b>{{ snapshot.overview.get("jobs-finished", 0) }}</b></div>
  <div class="card">Failed<b>{{ snapshot.overview.get("jobs-failed", 0) }}</b></div>
  <div class="card">Canceled<b>{{ snapshot.overview.get("jobs-cancelled", 0) }}</b></div>
</div>

<h2>TaskManagers</h2>
<table>
  <tr><th>ID</th><th>Host</th><th>Address</th><th>Slots</th><th>Free slots</th><th>Last heartbeat</th></tr>
  {% for tm in snapshot.taskmanagers %}
  <tr><td><code>{{ tm.get("id") }}</code></td><td>{{ tm.get("host", "-") }}</td>
      <td><code>{{ tm.get("path", "-") }}</code></td>
      <td>{{ tm.get("slotsNumber", "-") }}</td><td>{{ tm.get("freeSlots", "-") }}</td>
      <td>{{ ago(tm.get("timeSinceLastHeartbeat")) }}</td></tr>
  {% else %}
  <tr><td colspan="6">No TaskManager is registered.</td></tr>
  {% endfor %}
</table>

<h2>Jobs</h2>
<table>
  <tr><th>Job ID</th><th>Name</th><th>State</th><th>Start</th><th>Duration</th><th>Tasks finished / total</th></tr>
  {% for job in snapshot.jobs %}
  {% set tasks = job.get("tasks") or {} %}
  {% set jid = job.get("jid", "") | urlencode %}
  <tr><td><a href="jobs/{{ jid }}?conn_id={{ conn_id | urlencode }}" target="_blank" rel="noopener noreferrer"
        ><code>{{ job.get("jid") }}</code></a>
        (<a href="api/jobs/{{ jid }}?conn_id={{ conn_id | urlencode }}">JSON</a>)</td>
      <td>{{ job.get("name", "") }}</td>
      <td class="state {{ job.get('state', '') }}">{{ job.get("state", "") }}</td>
      <td>{{ when(job.get("start-time")) }}</td><td>{{ duration(job.get("duration")) }}</td>
      <td>{{ tasks.get("finished", 0) }} / {{ tasks.get("total", 0) }}</td></tr>
  {% else %}
  <tr><td colspan="6">No jobs.</td></tr>
  {% endfor %}
</table>
{% endif %}
</body>
</html>
"""

_TEMPLATES = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_PAGE_TEMPLATE = _TEMPLATES.from_string(_PAGE)


def render_page(conn_id: str, snapshot: ClusterSnapshot | None, error: ClusterUnavailable | None) -> str:
    now = time.time()
    return _PAGE_TEMPLATE.render(
        conn_id=conn_id,
        snapshot=snapshot,
        error=error,
        fetched_at=_datetime(snapshot.fetched_at * 1000) if snapshot else "",
        when=_datetime,
        duration=_duration,
        ago=lambda epoch_ms: _ago(epoch_ms, now),
    )


# -- the app --------------------------------------------------------------------------------------


def create_app(
    *,
    require_auth: bool = True,
    resolve_cluster: Callable[[str], ClusterAccess] = cluster_for,
) -> FastAPI:
    """The FastAPI app the plugin mounts.

    require_auth: check Airflow's auth manager (off only for a standalone app, e.g. tests:
        then the job redirect hands the token to anyone, as there is no one to check).
    resolve_cluster: conn_id -> ClusterAccess; raises ClusterUnavailable when it cannot.
    """
    may_see_token: Callable[[Request, str], Awaitable[bool]] = may_read_connection if require_auth else _anyone
    app = FastAPI(
        title="Flink Runtime",
        description="The flink-runtime cluster behind an Airflow connection.",
        dependencies=[Depends(require_cluster_activity_access)] if require_auth else [],
        docs_url=None,
        redoc_url=None,
    )

    def snapshot_of(conn_id: str) -> ClusterSnapshot:
        return fetch_snapshot(conn_id, resolve_cluster(conn_id))

    # Plain `def` routes: FastAPI runs them in its thread pool, so the blocking HTTP calls
    # to the JobManager never hold up the API server's event loop.
    @app.get("/", response_class=HTMLResponse)
    def cluster_page(conn_id: str = Query(DEFAULT_CONN_ID, max_length=250)) -> HTMLResponse:
        try:
            snapshot = snapshot_of(conn_id)
        except ClusterUnavailable as error:
            return HTMLResponse(render_page(conn_id, None, error), status_code=503)
        return HTMLResponse(render_page(conn_id, snapshot, None))

    @app.get("/api/overview")
    def overview(conn_id: str = Query(DEFAULT_CONN_ID, max_length=250)) -> JSONResponse:
        try:
            return JSONResponse(snapshot_of(conn_id).to_json())
        except ClusterUnavailable as error:
            return _unavailable(error)

    @app.get("/api/jobs/{job_id}")
    def job(job_id: str, conn_id: str = Query(DEFAULT_CONN_ID, max_length=250)) -> JSONResponse:
        try:
            cluster = resolve_cluster(conn_id)
            with cluster.client() as client:
                return JSONResponse(client.details(job_id))
        except ClusterUnavailable as error:
            return _unavailable(error)
        except JobNotFound as exc:
            return JSONResponse({"errors": exc.errors}, status_code=404)
        except ClusterUnreachable as exc:
            return _unavailable(ClusterUnavailable(conn_id, _unreachable_reason(exc), cluster.rest_url))
        except RestClientError as exc:
            return _unavailable(ClusterUnavailable(conn_id, _refusal_reason(conn_id, cluster, exc), cluster.rest_url))

    @app.get("/jobs/{job_id}", response_model=None)
    async def job_dashboard(
        request: Request, job_id: str, conn_id: str = Query(DEFAULT_CONN_ID, max_length=250)
    ) -> RedirectResponse | HTMLResponse:
        """The "Flink Runtime Job" link: off to the job's page on the cluster's dashboard."""
        try:
            cluster = await run_in_threadpool(resolve_cluster, conn_id)
        except ClusterUnavailable as error:
            return HTMLResponse(render_page(conn_id, None, error), status_code=503)
        with_token = bool(cluster.token) and await may_see_token(request, conn_id)
        return RedirectResponse(
            cluster.dashboard_url(job_id, with_token),
            status_code=302,
            # Neither kept by a cache nor passed on as a Referer.
            headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
        )

    return app


def _unavailable(error: ClusterUnavailable) -> JSONResponse:
    return JSONResponse(
        {"errors": [error.reason], "conn_id": error.conn_id, "rest_url": error.rest_url},
        status_code=503,
    )
