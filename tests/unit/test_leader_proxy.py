"""A standby JobManager's REST API answers through the leader's (rest/leader_proxy.py):
method, path (byte for byte), query, body and token passed on, the leader's answer
streamed back as it is; the Host and Origin its own guard checked are not passed on;
503 + Retry-After while nobody leads or the leader does not answer; its own /leader.
The leader is a real HTTP server; so is the standby where raw requests matter."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from flink_runtime.highavailability.lease_store import LeaderLease
from flink_runtime.jobmanager.leadership import LeaderInfo
from flink_runtime.rest.cluster_routes import leader_json
from flink_runtime.rest.guard import RestGuard
from flink_runtime.rest.leader_proxy import LeaderProxy


class FakeJobManager:
    cluster_id = "prod"
    rest_url = "http://b:8082"

    def __init__(self, is_leader: bool, known_leader: LeaderLease | None) -> None:
        self.is_leader = is_leader
        self.known_leader = known_leader

    def leader_info(self) -> LeaderInfo:
        return LeaderInfo(self.cluster_id, True, self.is_leader, self.known_leader)


def leader_app() -> FastAPI:
    app = FastAPI()

    @app.post("/jobs")
    async def submit(request: Request) -> dict[str, Any]:
        body = await request.body()
        return {
            "bytes": len(body),
            "query": str(request.url.query),
            "authorization": request.headers.get("authorization"),
            "origin": request.headers.get("origin"),
            "host": request.headers.get("host"),
        }

    @app.get("/jobs/{job_id}")
    async def missing(job_id: str) -> JSONResponse:
        return JSONResponse({"errors": [f"Job {job_id} not found"]}, status_code=404)

    @app.get("/taskmanagers/{rest:path}")
    async def echo(request: Request) -> dict[str, Any]:
        return {"raw-path": request.scope["raw_path"].decode(), "authorization": request.headers.get("authorization")}

    @app.get("/events")
    async def events() -> StreamingResponse:
        async def lines() -> AsyncIterator[bytes]:
            for n in range(3):
                yield f"event {n}\n".encode()
                await asyncio.sleep(0.05)

        return StreamingResponse(lines(), media_type="text/plain")

    return app


@contextlib.asynccontextmanager
async def served(app: Any) -> AsyncIterator[int]:
    """`app` served by uvicorn on a free loopback port (the port)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task


@pytest.fixture
async def leader() -> AsyncIterator[LeaderLease]:
    async with served(leader_app()) as port:
        yield LeaderLease("prod", "jm-a", 7, "tcp://a:6123", f"http://127.0.0.1:{port}", 1.0, 2.0)


@contextlib.asynccontextmanager
async def standby(jobmanager: FakeJobManager) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()

    @app.get("/leader")
    async def own_leader() -> dict[str, Any]:
        return leader_json(jobmanager.leader_info())

    @app.post("/jobs")
    async def submit() -> dict[str, str]:
        return {"served": "by this JobManager"}

    proxy = LeaderProxy(app, jobmanager)
    transport = httpx.ASGITransport(app=proxy)  # type: ignore[arg-type]
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://b:8082", timeout=10) as http:
            yield http
    finally:
        await proxy.aclose()  # as the REST server does when it stops


async def test_a_standby_answers_through_the_leader(leader: LeaderLease) -> None:
    async with standby(FakeJobManager(False, leader)) as http:
        body = b"x" * (3 << 20)  # an upload, streamed on
        headers = {"Authorization": "Bearer t0ken", "Origin": "http://b:8082", "Content-Type": "application/json"}
        answer = await http.post("/jobs?mode=detached", content=body, headers=headers)
        assert answer.status_code == 200, answer.text
        seen = answer.json()
        assert seen["bytes"] == len(body) and seen["query"] == "mode=detached"
        assert seen["authorization"] == "Bearer t0ken"  # the leader checks the token again
        assert seen["origin"] is None  # checked by the standby's guard, meaningless to the leader
        assert seen["host"] == leader.rest_url.removeprefix("http://")
        assert answer.headers["x-flink-runtime-leader"] == leader.rest_url

        missing = await http.get("/jobs/abc")  # the leader's errors come back as they are
        assert missing.status_code == 404 and missing.json() == {"errors": ["Job abc not found"]}
        streamed = await http.get("/events")
        assert streamed.text == "event 0\nevent 1\nevent 2\n"

        own = await http.get("/leader")  # answered by the standby itself
        assert own.status_code == 200 and own.json()["is-leader"] is False


async def test_while_nobody_leads_a_standby_says_retry_later() -> None:
    for known in (None, LeaderLease("prod", "me", 3, "", "http://b:8082", 1.0, 2.0)):  # or only itself, stale
        async with standby(FakeJobManager(False, known)) as http:
            answer = await http.post("/jobs", content=b"{}")
            assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
            assert "a leader is being elected: retry shortly" in answer.json()["errors"][0]


async def test_a_leader_that_does_not_answer_is_a_503_naming_it() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there
    gone = LeaderLease("prod", "jm-a", 7, "tcp://a:6123", f"http://127.0.0.1:{port}", 1.0, 2.0)
    async with standby(FakeJobManager(False, gone)) as http:
        answer = await http.get("/jobs/abc")
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        assert (
            f"the leader jm-a at http://127.0.0.1:{port} does not answer (ConnectError)" in answer.json()["errors"][0]
        )


async def test_the_leader_serves_everything_itself(leader: LeaderLease) -> None:
    async with standby(FakeJobManager(True, leader)) as http:
        answer = await http.post("/jobs", content=b"{}")
        assert answer.status_code == 200 and answer.json() == {"served": "by this JobManager"}


@contextlib.asynccontextmanager
async def served_standby(leader: LeaderLease) -> AsyncIterator[int]:
    """A standby's guard and proxy served by uvicorn, as the REST server composes them (the port)."""
    proxy = LeaderProxy(FastAPI(), FakeJobManager(False, leader))
    try:
        async with served(RestGuard(proxy)) as port:
            yield port
    finally:
        await proxy.aclose()


def raw_get(port: int, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """GET `target` exactly as given (httpx would resolve its dot segments), with exactly
    `headers` (no Host unless given)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", target, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


async def test_a_standby_passes_the_path_on_byte_for_byte(leader: LeaderLease) -> None:
    async with served_standby(leader) as port:
        host = {"Host": f"127.0.0.1:{port}"}
        for target in ("/taskmanagers/x/logs/..", "/taskmanagers/x/./logs/%2e%2e/a%2Fb", "/v1/taskmanagers/x/.."):
            status, _, body = await asyncio.to_thread(raw_get, port, target, host)
            assert status == 200, body
            assert json.loads(body)["raw-path"] == target.removeprefix("/v1"), target


async def test_a_standby_strips_an_empty_bearer_token_instead_of_failing(leader: LeaderLease) -> None:
    # Without a token configured the leader ignores the header; the standby's HTTP client
    # refuses to send "Bearer " with its space, so the standby strips it (rest/leader_proxy.py)
    # rather than answer 503 (the leader "does not answer").
    async with served_standby(leader) as port:
        headers = {"Host": f"127.0.0.1:{port}", "Authorization": "Bearer "}
        status, _, body = await asyncio.to_thread(raw_get, port, "/taskmanagers/x", headers)
        assert status == 200, body
        assert json.loads(body)["authorization"] == "Bearer"


async def test_a_standby_refuses_a_foreign_host_itself(leader: LeaderLease) -> None:
    async with served_standby(leader) as port:
        status, headers, body = await asyncio.to_thread(
            raw_get, port, "/taskmanagers/x", {"Host": f"evil.example:{port}"}
        )
        assert status == 403 and "rest.allowed-hosts" in json.loads(body)["errors"][0]
        assert "x-flink-runtime-leader" not in headers  # never reached the leader


async def test_a_request_that_cannot_be_passed_on_is_a_client_error_not_a_retry(leader: LeaderLease) -> None:
    # What the standby's HTTP server accepts and its HTTP client refuses to write ("Bearer "
    # with its space was one; a NUL, sent here through the ASGI transport, is another) must
    # not read as "the leader does not answer" (503), which clients retry for ever.
    async with standby(FakeJobManager(False, leader)) as http:
        answer = await http.get("/taskmanagers/x", headers={"X-Odd": "a\x00b"})
        assert answer.status_code == 400 and "retry-after" not in answer.headers
        assert "cannot be passed on to the leader" in answer.json()["errors"][0]
