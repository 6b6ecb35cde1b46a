"""A standby JobManager's REST API serves the leader's (high-availability.type: database).

As in Flink, where every JobManager's REST endpoint answers through the leader's
gateway, any JobManager of the cluster can be asked: a load balancer in front of all
of them, Flink's own CLI (which follows no redirect) and the web dashboard all work
whichever one they reach. Between the guard (which checks the Host, authenticates,
and checks a browser's Origin against this server) and the routes: while this
JobManager is not the leader, every request except the few it answers for itself is
sent on to the same path on the leader's REST URL, as read from the leader lease, and
the leader's answer comes back as it is, streamed both ways (uploads, long polls).
The path goes on byte for byte as it came (no `..` or `.` segment resolved, no escape
changed): the leader must judge the request a client made, and
`/taskmanagers/x/logs/..` is not `/taskmanagers/x`. The leader checks the token
again; the Host and Origin the guard here already checked are not sent on (the leader
would judge them against its own address). `X-Flink-Runtime-Leader` names who
answered.

With no leader elected yet, or one that does not answer, the answer is 503 with
Retry-After, which the project's clients retry.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from flink_runtime.rest.cluster_routes import leader_json

if TYPE_CHECKING:
    from flink_runtime.highavailability.lease_store import LeaderLease
    from flink_runtime.jobmanager.leadership import LeaderInfo


class Leadership(Protocol):
    """Who leads, as the JobManager's RestfulGateway tells it."""

    @property
    def is_leader(self) -> bool: ...
    @property
    def known_leader(self) -> LeaderLease | None: ...
    @property
    def rest_url(self) -> str: ...
    @property
    def cluster_id(self) -> str: ...
    def leader_info(self) -> LeaderInfo: ...


# Answered by every JobManager about itself: who leads, and this process's own metrics.
SERVED_BY_STANDBY = frozenset({"/leader", "/metrics"})
LEADER_HEADER = b"x-flink-runtime-leader"
# Not passed on either way: they describe one connection, not the request (RFC 9110
# 7.6.1), or were checked here already (origin, referer).
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade"}
)
_NOT_SENT_ON = _HOP_BY_HOP | {b"host", b"origin", b"referer"}
# Reaching the leader must be quick; its answer may take long (event long polls, uploads).
_TIMEOUT = httpx.Timeout(connect=5.0, read=None, write=None, pool=5.0)


class LeaderProxy:
    def __init__(self, app: ASGIApp, leadership: Leadership, verify: Any = True) -> None:
        """verify: how to trust the leader's TLS certificate (httpx's `verify`)."""
        self.app = app
        self.leadership = leadership  # the JobManager's RestfulGateway
        self.verify = verify
        # One client (its connection pool and TLS context) for every request passed on,
        # made on first use: most JobManagers never stand by.
        self._client: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        leadership = self.leadership
        if scope["type"] != "http" or leadership.is_leader or scope["path"].rstrip("/") in SERVED_BY_STANDBY:
            await self.app(scope, receive, send)
            return
        leader = leadership.known_leader
        if leader is None or not leader.rest_url or leader.rest_url == leadership.rest_url:
            await _unavailable(
                send,
                f"No JobManager leads cluster {leadership.cluster_id!r} at the moment (this one is a standby); "
                "a leader is being elected: retry shortly.",
                leadership,
            )
            return
        raw_path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string") or b""
        # httpx resolves dot segments of a URL's path (RFC 3986 5.2.4); the request target
        # extension goes to the wire as it is.
        target = raw_path + (b"?" + query if query else b"")
        # Surrounding whitespace is no part of a header's value (RFC 9110 5.5); the server
        # here may keep it ("Authorization: Bearer "), the client there refuses to send it.
        headers = [(name, value.strip(b" \t")) for name, value in scope["headers"] if name.lower() not in _NOT_SENT_ON]
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=_TIMEOUT, verify=self.verify)
        client = self._client
        request = client.build_request(
            scope["method"],
            leader.rest_url,
            headers=headers,
            content=_request_body(receive),
            extensions={"target": target},
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.LocalProtocolError as exc:
            # The request itself cannot be written (a header the HTTP client refuses): the
            # client's mistake, not an unavailable leader to retry.
            await _send_json(
                send, 400, {"errors": [f"This request cannot be passed on to the leader as it is: {exc}"]}, []
            )
            return
        except httpx.HTTPError as exc:
            await _unavailable(
                send,
                f"This JobManager is a standby of cluster {leadership.cluster_id!r}, and the leader "
                f"{leader.leader_id} at {leader.rest_url} does not answer ({type(exc).__name__}): retry shortly.",
                leadership,
            )
            return
        answer_headers = [(name, value) for name, value in response.headers.raw if name.lower() not in _HOP_BY_HOP]
        answer_headers.append((LEADER_HEADER, leader.rest_url.encode()))
        try:
            await send({"type": "http.response.start", "status": response.status_code, "headers": answer_headers})
            async for chunk in response.aiter_raw():  # as sent: compressed stays compressed
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


async def _request_body(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        yield message.get("body", b"")
        if not message.get("more_body"):
            return


async def _unavailable(send: Send, message: str, leadership: Leadership) -> None:
    body = {"errors": [message], "leader": leader_json(leadership.leader_info())["leader"]}
    await _send_json(send, 503, body, [(b"retry-after", b"1")])


async def _send_json(send: Send, status: int, body: dict[str, Any], extra: list[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
