"""plugins/flink_runtime_plugin.py: Airflow loads it, and its page shows a real cluster.

The views run against the session's MiniCluster (tests/conftest.py), reached through an
Airflow connection as in production; one test goes through Airflow's own API app, with
its auth manager, to check that the plugin is mounted and protected.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from flink_runtime.client import JobClient
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster

pytestmark = pytest.mark.xdist_group("airflow-db")  # one worker makes the in-process metadata DB (make test: -n 2)

ROOT = Path(__file__).resolve().parents[2]
PLUGINS_FOLDER = ROOT / "plugins"


def connection_env(rest_url: str) -> str:
    url = httpx.URL(rest_url)
    return json.dumps({"conn_type": "flink_runtime", "host": url.host, "port": url.port})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def loaded_plugins(airflow_db: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Airflow's plugin manager, reading plugins/ (its caches cleared before and after)."""
    from airflow import plugins_manager, settings

    caches = [
        plugins_manager._get_plugins,
        plugins_manager._get_ui_plugins,
        plugins_manager.get_fastapi_plugins,
        plugins_manager._get_extra_operators_links_plugins,
        plugins_manager.get_flask_plugins,
    ]
    monkeypatch.setattr(settings, "PLUGINS_FOLDER", str(PLUGINS_FOLDER))
    for cache in caches:
        cache.cache_clear()
    yield plugins_manager
    for cache in caches:
        cache.cache_clear()


def test_plugin_loads_from_the_plugins_folder(loaded_plugins: Any) -> None:
    from airflow.api_fastapi.core_api.datamodels.plugins import PluginResponse
    from fastapi import FastAPI

    from flink_runtime.airflow.links import FlinkRuntimeJobLink

    plugins, import_errors = loaded_plugins._get_plugins()
    ours = [plugin for plugin in plugins if plugin.name == "flink_runtime"]
    assert len(ours) == 1, "loaded exactly once"
    assert not [source for source in import_errors if "flink_runtime" in str(source)], import_errors
    plugin = ours[0]
    assert str(plugin.source) == "$PLUGINS_FOLDER/flink_runtime_plugin.py"

    apps, _ = loaded_plugins.get_fastapi_plugins()
    (app,) = [entry for entry in apps if entry["url_prefix"] == "/flink-runtime"]
    assert isinstance(app["app"], FastAPI) and app["name"] == "Flink Runtime"

    views, _ = loaded_plugins._get_ui_plugins()
    (view,) = [view for view in views if view["name"] == "Flink Runtime"]
    assert view["category"].lower() == "browse" and view["url_route"] == "flink-runtime"
    assert view["href"] == "flink-runtime/"  # relative: resolved against Airflow's base URL

    links = loaded_plugins.get_operator_extra_links()
    assert any(isinstance(link, FlinkRuntimeJobLink) for link in links)

    # What GET /api/v2/plugins answers for it validates against Airflow's own response model.
    (info,) = [entry for entry in loaded_plugins.get_plugin_info() if entry["name"] == "flink_runtime"]
    PluginResponse.model_validate(info)


def test_airflow_api_serves_the_page_to_authorized_users_only(
    loaded_plugins: Any, minicluster: MiniCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    monkeypatch.setenv("AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT", connection_env(minicluster.rest_url))
    # Long enough for HS512 (a shorter generated one makes PyJWT warn).
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "s" * 64)
    client = TestClient(create_app())

    assert client.get("/flink-runtime/").status_code == 401

    def bearer(role: str | None) -> dict[str, str]:
        token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="someone", role=role))
        return {"Authorization": f"Bearer {token}"}

    assert client.get("/flink-runtime/", headers=bearer(None)).status_code == 403
    page = client.get("/flink-runtime/", headers=bearer("admin"))
    assert page.status_code == 200, page.text
    assert "TaskManagers" in page.text and minicluster.rest_url in page.text
    overview = client.get("/flink-runtime/api/overview", headers=bearer("admin")).json()
    assert overview["overview"]["taskmanagers"] == 2


# -- the views against a live cluster -------------------------------------------------------------------


@pytest.fixture
def views(airflow_db: Any) -> TestClient:
    from flink_runtime.airflow.plugin_views import create_app

    # Airflow's auth is covered above; these tests look at what the pages show.
    return TestClient(create_app(require_auth=False))


def test_cluster_page_and_json_show_taskmanagers_slots_and_jobs(
    views: TestClient, minicluster: MiniCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT", connection_env(minicluster.rest_url))
    with JobClient(minicluster.rest_url) as client:
        finished = client.submit(JobGraph(name="quick <job>", vertices=[JobVertex(id="a", name="A", invokable="noop")]))
        assert client.wait(finished, timeout=60).value == "FINISHED"
        running = client.submit(
            JobGraph(
                name="sleepy job",
                vertices=[JobVertex(id="s", name="Sleep", invokable="sleep", parallelism=2, config={"seconds": 60})],
            )
        )
        try:
            deadline = time.monotonic() + 30
            while client.details(running)["vertices"][0]["tasks"]["RUNNING"] < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)

            data = views.get("/api/overview").json()
            page = views.get("/")
            job_page = views.get(f"/api/jobs/{running}")
        finally:
            client.cancel(running)

    assert data["conn_id"] == "flink_runtime_default" and data["rest_url"] == minicluster.rest_url
    assert data["overview"]["taskmanagers"] == 2
    assert data["overview"]["slots-total"] == 4
    assert data["overview"]["slots-available"] <= 2, "the sleeping job holds two slots"
    assert {tm["id"] for tm in data["taskmanagers"]} == {tm.resource_id for tm in minicluster.taskmanagers}
    jobs = {job["jid"]: job for job in data["jobs"]}
    assert jobs[running]["state"] == "RUNNING" and data["jobs"][0]["jid"] == running, "running jobs come first"
    assert jobs[finished]["state"] == "FINISHED" and jobs[finished]["tasks"]["finished"] == 1

    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    for tm in minicluster.taskmanagers:
        assert tm.resource_id in html
    assert "s ago" in html, "the last heartbeat"
    assert "quick &lt;job&gt;" in html and "<job>" not in html, "names are escaped"
    assert f'href="jobs/{finished}?conn_id=flink_runtime_default"' in html, "links to the dashboard's job page"
    assert f'href="api/jobs/{running}?conn_id=flink_runtime_default"' in html, "and to the JSON"
    assert '<td class="state RUNNING">RUNNING</td>' in html
    assert "1 / 1" in html, "tasks finished / total of the finished job"

    assert job_page.status_code == 200 and job_page.json()["name"] == "sleepy job"
    assert views.get("/api/jobs/" + "0" * 32).status_code == 404


def test_other_connections_are_chosen_with_conn_id(
    views: TestClient, minicluster: MiniCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_MY_CLUSTER", connection_env(minicluster.rest_url))
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT", connection_env(f"http://127.0.0.1:{free_port()}"))
    assert views.get("/api/overview", params={"conn_id": "my_cluster"}).json()["rest_url"] == minicluster.rest_url
    page = views.get("/", params={"conn_id": "my_cluster"})
    assert page.status_code == 200 and 'value="my_cluster"' in page.text


def test_unreachable_cluster_gets_a_clear_error_page(views: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT", connection_env(dead))
    started = time.monotonic()
    page = views.get("/")
    assert time.monotonic() - started < 5, "no retries: the page answers at once"
    assert page.status_code == 503
    assert "Cluster unreachable" in page.text and dead in page.text and "cannot reach" in page.text
    assert "-m host:port" not in page.text, "no advice meant for the CLI"
    answer = views.get("/api/overview")
    assert answer.status_code == 503
    assert answer.json()["rest_url"] == dead and "cannot reach" in answer.json()["errors"][0]


def test_connections_the_page_cannot_use(views: TestClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Not a flink_runtime connection: the page must not send requests to any host a user names.
    monkeypatch.setenv("AIRFLOW_CONN_SOME_DB", json.dumps({"conn_type": "postgres", "host": "db.internal"}))
    answer = views.get("/api/overview", params={"conn_id": "some_db"})
    assert answer.status_code == 503 and "not 'flink_runtime'" in answer.json()["errors"][0]

    answer = views.get("/api/overview", params={"conn_id": "no_such_connection"})
    assert answer.status_code == 503 and "no connection 'no_such_connection'" in answer.json()["errors"][0]

    # An embedded cluster is looked up, never started by looking at the page.
    embedded = {"conn_type": "flink_runtime", "extra": {"embedded": True, "state_dir": str(tmp_path)}}
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT", json.dumps(embedded))
    page = views.get("/")
    assert page.status_code == 503 and "embedded cluster, which is not running" in page.text
    assert list(tmp_path.iterdir()) == []


def test_the_standalone_app_requires_airflow_credentials(airflow_db: Any) -> None:
    from flink_runtime.airflow.plugin_views import create_app

    client = TestClient(create_app())
    assert client.get("/").status_code == 401
    assert client.get("/api/overview").status_code == 401


# -- a cluster behind a REST token ---------------------------------------------------------------------

REST_TOKEN = "plugin-test-token-5f2c"


@pytest.fixture(scope="module")
def guarded_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    from tests.conftest import fast_config

    config = fast_config(**{"io.tmp.dirs": str(tmp_path_factory.mktemp("guarded")), "security.rest.token": REST_TOKEN})
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=1) as cluster:
        yield cluster


def guarded_connection(rest_url: str, token: str | None) -> str:
    url = httpx.URL(rest_url)
    return json.dumps({"conn_type": "flink_runtime", "host": url.host, "port": url.port, "password": token})


def test_the_page_uses_the_connections_token_and_says_when_it_is_refused(
    views: TestClient, guarded_cluster: MiniCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT", guarded_connection(guarded_cluster.rest_url, REST_TOKEN))
    page = views.get("/")
    assert page.status_code == 200, page.text
    assert guarded_cluster.taskmanagers[0].resource_id in page.text
    assert REST_TOKEN not in page.text
    assert views.get("/api/overview").json()["overview"]["taskmanagers"] == 1

    # No token, or a wrong one: the cluster answered, so not "unreachable, start it".
    for token, says in ((None, "wants a token, and there is none in"), ("wrong", "refused the token of")):
        monkeypatch.setenv("AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT", guarded_connection(guarded_cluster.rest_url, token))
        page = views.get("/")
        assert page.status_code == 503
        assert "Cluster refused the connection's credentials" in page.text
        assert says in page.text and "security.rest.token" in page.text
        assert "Start the cluster" not in page.text


def test_the_job_redirect_hands_the_token_in_the_fragment_only_to_who_may_read_the_connection(
    loaded_plugins: Any, guarded_cluster: MiniCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    monkeypatch.setenv("AIRFLOW_CONN_GUARDED", guarded_connection(guarded_cluster.rest_url, REST_TOKEN))
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "s" * 64)
    client = TestClient(create_app())
    with JobClient(guarded_cluster.rest_url, token=REST_TOKEN) as cluster:
        job_id = cluster.submit(JobGraph(name="quick", vertices=[JobVertex(id="a", name="A", invokable="noop")]))

    def redirect(role: str | None) -> httpx.Response:
        token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="someone", role=role))
        return client.get(
            f"/flink-runtime/jobs/{job_id}",
            params={"conn_id": "guarded"},
            headers={"Authorization": f"Bearer {token}"},
            follow_redirects=False,
        )

    # An admin may read the connection (and its token on the Connections page): the
    # dashboard gets it in the fragment, which the browser never sends to a server.
    answer = redirect("admin")
    assert answer.status_code == 302
    assert answer.headers["location"] == f"{guarded_cluster.rest_url}/#token={REST_TOKEN}&/jobs/{job_id}"
    assert answer.headers["cache-control"] == "no-store" and answer.headers["referrer-policy"] == "no-referrer"
    # A viewer may see cluster activity but not connections: the dashboard will ask.
    answer = redirect("viewer")
    assert answer.status_code == 302
    assert answer.headers["location"] == f"{guarded_cluster.rest_url}/#/jobs/{job_id}"
    assert redirect(None).status_code == 403
    # The dashboard page the admin is sent to loads; its data needs the token (the fragment's).
    assert httpx.get(f"{guarded_cluster.rest_url}/").status_code == 200
    assert httpx.get(f"{guarded_cluster.rest_url}/jobs/{job_id}").status_code == 401
