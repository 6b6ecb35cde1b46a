"""RestGuard: bearer token, cross-site refusal, content types, JSON for every error.

Against the real FastAPI app and the stub JobManager of test_rest_savepoints (only
the HTTP layer is under test here; tests/integration/test_rest_security.py runs a
real cluster with a token and TLS).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flink_runtime.configuration import Configuration
from flink_runtime.rest.app import create_app
from flink_runtime.rest.guard import RestGuard
from flink_runtime.security import (
    RestSecurityError,
    check_rest_exposure,
    is_secret_key,
    masked_config,
    rest_token,
)
from flink_runtime.security.hosts import AllowedHosts
from tests.unit.test_rest_savepoints import JOB_ID, StubJobManager

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# The name TestClient sends as Host; a real server answers the names it is reachable as.
TESTSERVER = AllowedHosts.of(["testserver"])


@pytest.fixture
def jobmanager(tmp_path: Path) -> StubJobManager:
    return StubJobManager(str(tmp_path / "blobs"))


@pytest.fixture
def guarded(jobmanager: StubJobManager) -> Iterator[TestClient]:
    app = RestGuard(create_app(jobmanager, Configuration()), token=TOKEN, hosts=TESTSERVER)  # type: ignore[arg-type]
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def open_api(jobmanager: StubJobManager) -> Iterator[TestClient]:
    app = RestGuard(create_app(jobmanager, Configuration()), hosts=TESTSERVER)  # type: ignore[arg-type]
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


# -- authentication ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"}],
    ids=["none", "wrong", "no-scheme", "basic"],
)
@pytest.mark.parametrize("method,path", [("GET", "/overview"), ("GET", "/no/such/path"), ("POST", "/jobs")])
def test_every_path_needs_the_token(guarded: TestClient, headers: dict, method: str, path: str) -> None:
    answer = guarded.request(method, path, headers={**headers, "Content-Type": "application/json"}, content=b"{}")
    assert answer.status_code == 401
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["www-authenticate"].startswith("Bearer")
    assert "security.rest.token" in answer.json()["errors"][0]


def test_the_token_opens_every_path(guarded: TestClient) -> None:
    assert guarded.get(f"/jobs/{JOB_ID}/checkpoints", headers=AUTH).status_code == 200
    assert guarded.get("/no/such/path", headers=AUTH).status_code == 404


def test_without_a_token_configured_nothing_is_asked(open_api: TestClient) -> None:
    assert open_api.get(f"/jobs/{JOB_ID}/checkpoints").status_code == 200


# -- the web dashboard: its files load without the token, its data does not -----------------------


@pytest.mark.parametrize(
    ("path", "media_type"),
    [("/", "text/html"), ("/web/js/app.js", "text/javascript"), ("/web/vendor/dagre.min.js", "text/javascript")],
)
def test_the_dashboards_files_load_without_a_token(guarded: TestClient, path: str, media_type: str) -> None:
    answer = guarded.get(path)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith(media_type)
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert guarded.head(path).status_code == 200


def test_the_dashboard_page_is_the_shell_that_asks_for_data(guarded: TestClient) -> None:
    page = guarded.get("/").text
    assert "<title>flink-runtime</title>" in page
    assert 'src="web/js/app.js"' in page


@pytest.mark.parametrize(
    "path", ["/jobs/overview", "/v1/jobs/overview", "/overview", f"/jobs/{JOB_ID}/checkpoints", "/web", "/webx/a.js"]
)
def test_the_dashboards_data_still_needs_the_token(guarded: TestClient, path: str) -> None:
    answer = guarded.get(path)
    assert answer.status_code == 401
    assert "security.rest.token" in answer.json()["errors"][0]


def test_only_reads_of_the_dashboards_files_are_let_through(guarded: TestClient, jobmanager: StubJobManager) -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        answer = guarded.request(method, "/", headers={"Content-Type": "application/json"}, content=b"{}")
        assert answer.status_code == 401, method
    assert guarded.post("/web/js/app.js", headers={"Content-Type": "application/json"}).status_code == 401
    # A path that climbs out of the static folder finds nothing there (and no route).
    for climbing in ("/web/../jobs/overview", "/web/%2e%2e/%2e%2e/setup.cfg", "/web/js/../../routes.py"):
        answer = guarded.get(climbing)
        assert answer.status_code in (401, 404), climbing
        assert "jobs" not in answer.json() and "errors" in answer.json()
    assert jobmanager.calls == []


def test_a_cross_site_post_is_still_refused_with_the_dashboard(guarded: TestClient, jobmanager: StubJobManager) -> None:
    foreign = {**AUTH, "Origin": "https://evil.example"}
    assert guarded.post(f"/jobs/{JOB_ID}/stop", headers=foreign, json={}).status_code == 403
    assert guarded.patch(f"/jobs/{JOB_ID}?mode=cancel", headers=foreign, json={}).status_code == 403
    assert guarded.post(f"/jobs/{JOB_ID}/stop", headers={"Origin": "https://evil.example"}, json={}).status_code == 401
    assert jobmanager.calls == []


def test_the_dashboard_leaves_the_openapi_docs_alone(guarded: TestClient) -> None:
    assert guarded.get("/docs", headers=AUTH).status_code == 200
    paths = guarded.get("/openapi.json", headers=AUTH).json()["paths"]
    assert "/" not in paths and not any(path.startswith("/web") for path in paths)


# -- /v1/: Flink's versioned prefix -----------------------------------------------------------------


@pytest.mark.parametrize("path", [f"/jobs/{JOB_ID}/checkpoints", "/config"])
def test_every_path_answers_bare_and_under_v1_alike(open_api: TestClient, path: str) -> None:
    bare, versioned = open_api.get(path), open_api.get(f"/v1{path}")
    assert bare.status_code == versioned.status_code == 200
    assert bare.json() == versioned.json()


def test_v1_requests_pass_the_same_guard(guarded: TestClient, jobmanager: StubJobManager) -> None:
    assert guarded.get("/v1/overview").status_code == 401
    refused = guarded.post(f"/v1/jobs/{JOB_ID}/stop", headers={**AUTH, "Content-Type": "text/plain"}, content=b"{}")
    assert refused.status_code == 415
    answer = guarded.post(f"/v1/jobs/{JOB_ID}/stop", headers=AUTH, json={"drain": False})
    assert answer.status_code == 202
    assert len(jobmanager.calls) == 1
    upload = guarded.post(
        "/v1/blobs?name=udfs.py", headers={**AUTH, "Content-Type": "application/octet-stream"}, content=b"x = 1\n"
    )
    assert upload.status_code == 201


def test_unknown_v1_paths_are_json_404s(open_api: TestClient) -> None:
    answer = open_api.get("/v1/no/such/path")
    assert answer.status_code == 404
    assert answer.json() == {"errors": ["Not found: /no/such/path"]}
    assert open_api.get("/v2/overview").status_code == 404  # only Flink's one version


def test_the_openapi_document_lists_each_path_once(open_api: TestClient) -> None:
    paths = open_api.get("/v1/openapi.json").json()["paths"]
    assert "/jobs/overview" in paths
    assert not any(path.startswith("/v1") for path in paths)


# -- Host: no DNS rebinding ---------------------------------------------------------------------


@pytest.fixture
def loopback_only(jobmanager: StubJobManager) -> Iterator[TestClient]:
    """A guard with the default Host names (addresses and localhost), no token."""
    app = RestGuard(create_app(jobmanager, Configuration()))  # type: ignore[arg-type]
    with TestClient(app, base_url="http://127.0.0.1:8081", raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize(
    "method,path", [("GET", "/jobs/overview"), ("GET", "/"), ("GET", "/no/such/path"), ("POST", f"/jobs/{JOB_ID}/stop")]
)
def test_a_foreign_host_is_refused_before_anything_else(
    loopback_only: TestClient, jobmanager: StubJobManager, method: str, path: str
) -> None:
    rebound = {"Host": "evil.example:8081", "Origin": "http://evil.example:8081"}
    answer = loopback_only.request(method, path, headers=rebound, json={"drain": False})
    assert answer.status_code == 403
    assert answer.headers["content-type"] == "application/json"
    message = answer.json()["errors"][0]
    assert "'evil.example:8081'" in message and "rest.allowed-hosts" in message and "DNS rebinding" in message
    assert jobmanager.calls == []


def test_the_host_is_checked_before_the_token(guarded: TestClient) -> None:
    answer = guarded.get("/overview", headers={**AUTH, "Host": "evil.example"})
    assert answer.status_code == 403 and "www-authenticate" not in answer.headers


@pytest.mark.parametrize("host", ["127.0.0.1:8081", "localhost:8081", "LOCALHOST.", "[::1]:8081", "127.1.2.3"])
def test_loopback_hosts_are_answered(loopback_only: TestClient, host: str) -> None:
    answer = loopback_only.get(f"/jobs/{JOB_ID}/checkpoints", headers={"Host": host})
    assert answer.status_code == 200, answer.text


def test_an_empty_bearer_token_is_named_as_such(guarded: TestClient) -> None:
    answer = guarded.get("/overview", headers={"Authorization": "Bearer "})
    assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")
    assert "empty bearer token" in answer.json()["errors"][0]


# -- cross-site requests -------------------------------------------------------------------------


def test_a_foreign_origin_is_refused(guarded: TestClient, jobmanager: StubJobManager) -> None:
    answer = guarded.post(
        f"/jobs/{JOB_ID}/stop", headers={**AUTH, "Origin": "https://evil.example"}, json={"drain": False}
    )
    assert answer.status_code == 403
    assert "evil.example" in answer.json()["errors"][0]
    assert jobmanager.calls == []


def test_the_servers_own_origin_is_accepted(guarded: TestClient) -> None:
    answer = guarded.post(f"/jobs/{JOB_ID}/stop", headers={**AUTH, "Origin": "http://testserver"}, json={})
    assert answer.status_code == 202


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_state_changing_requests_need_json(
    open_api: TestClient, jobmanager: StubJobManager, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    answer = open_api.post(f"/jobs/{JOB_ID}/stop", headers=headers, content=b'{"drain": false}')
    assert answer.status_code == 415
    assert "application/json" in answer.json()["errors"][0]
    assert jobmanager.calls == []  # nothing reached the JobManager


def test_a_blob_upload_needs_octet_stream(open_api: TestClient) -> None:
    answer = open_api.post("/blobs?name=udfs.py", headers={"Content-Type": "text/plain"}, content=b"import os\n")
    assert answer.status_code == 415
    assert "application/octet-stream" in answer.json()["errors"][0]
    answer = open_api.post(
        "/blobs?name=udfs.py", headers={"Content-Type": "application/octet-stream"}, content=b"import os\n"
    )
    assert answer.status_code == 201


def test_a_bodyless_cancel_needs_no_content_type(open_api: TestClient) -> None:
    # PATCH always needs a CORS preflight; Flink's CLI and curl -X PATCH send no body.
    answer = open_api.patch(f"/jobs/{JOB_ID}?mode=cancel")
    assert answer.status_code != 415


def test_no_cors_headers_are_sent(open_api: TestClient) -> None:
    answer = open_api.options("/jobs", headers={"Origin": "http://testserver", "Access-Control-Request-Method": "POST"})
    assert not any(name.lower().startswith("access-control-") for name in answer.headers)


# -- every error is JSON ----------------------------------------------------------------------------


async def _raising_asgi_app(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await receive()  # startup
        await send({"type": "lifespan.startup.complete"})
        await receive()  # shutdown
        await send({"type": "lifespan.shutdown.complete"})
        return
    raise RuntimeError("deep inside")


@pytest.mark.parametrize("with_handlers", [True, False], ids=["create_app", "plain-asgi"])
def test_an_uncaught_exception_answers_json_with_a_request_id(
    caplog: pytest.LogCaptureFixture, jobmanager: StubJobManager, with_handlers: bool
) -> None:
    app: Any = _raising_asgi_app
    if with_handlers:
        app = create_app(jobmanager, Configuration())  # type: ignore[arg-type]

        @app.get("/boom")
        async def boom() -> None:
            raise RuntimeError("deep inside")

    with TestClient(RestGuard(app, hosts=TESTSERVER), raise_server_exceptions=False) as client:
        answer = client.get("/boom")
    assert answer.status_code == 500
    body = answer.json()
    assert body["request-id"] in body["errors"][0]
    assert "deep inside" not in body["errors"][0]  # details stay in the log
    logged = [record for record in caplog.records if body["request-id"] in record.getMessage()]
    assert len(logged) == 1  # once, with the traceback
    assert logged[0].exc_info is not None


# -- configuration: tokens, exposure, masking -------------------------------------------------------


def test_the_token_comes_from_a_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    assert rest_token(Configuration({"security.rest.token-file": str(token_file)})) == "from-file"
    token_file.write_text("")
    with pytest.raises(RestSecurityError, match="is empty"):
        rest_token(Configuration({"security.rest.token-file": str(token_file)}))
    with pytest.raises(RestSecurityError, match="cannot read"):
        rest_token(Configuration({"security.rest.token-file": str(tmp_path / "missing")}))
    with pytest.raises(RestSecurityError, match="not both"):
        rest_token(Configuration({"security.rest.token-file": str(token_file), "security.rest.token": "x"}))


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_no_token(address: str) -> None:
    check_rest_exposure(Configuration({"rest.bind-address": address}), token="")


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "10.1.2.3", "jobmanager"])
def test_a_reachable_address_without_a_token_is_refused(address: str) -> None:
    config = Configuration({"rest.bind-address": address})
    with pytest.raises(RestSecurityError, match="security.rest.token"):
        check_rest_exposure(config, token="")
    check_rest_exposure(config, token="t")
    check_rest_exposure(config.copy({"security.rest.allow-unauthenticated": "true"}), token="")


@pytest.mark.parametrize(
    "key",
    [
        "security.cluster.secret",
        "security.rest.token",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "fs.azure.account.key.acct.blob.core.windows.net",
        "spark.ssl.keyPassword",
        "my.credentials.file",
        "apikey",
    ],
)
def test_secret_keys_are_masked(key: str) -> None:
    assert is_secret_key(key)
    assert masked_config({key: "hunter2"}) == {key: "******"}


@pytest.mark.parametrize("key", ["rest.port", "state.backend.type", "taskmanager.numberOfTaskSlots", "pipeline.keyed"])
def test_ordinary_keys_are_shown(key: str) -> None:
    assert not is_secret_key(key)
    assert masked_config({key: "42"}) == {key: "42"}


def test_passwords_in_urls_are_masked_whatever_the_key() -> None:
    shown = masked_config(
        {"jobstore.url": "postgresql+psycopg://flink:hunter2@db/flink", "spark.remote": "sc://h:15002/;token=hunter2"}
    )
    assert "hunter2" not in str(shown)
    assert shown["jobstore.url"] == "postgresql+psycopg://flink:***@db/flink"
