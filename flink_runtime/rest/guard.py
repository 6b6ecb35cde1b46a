"""What every REST request passes before it reaches an endpoint, and what catches it after.

`RestGuard` is a plain ASGI middleware around the whole FastAPI app, so it sees
unknown paths and errors that no endpoint handler caught as well:

0. Versions. Flink serves its REST API bare and under `/v1/` (its CLI and Java
   client call `/v1/jobs/overview`, ...). The prefix is dropped here, before anything
   else looks at the path, so one route table (and one OpenAPI document) serves both
   and every rule below holds for both spellings alike.
1. Host. A request whose Host header is not a name this server is reachable as gets
   403 before anything else is checked, whatever its method and path
   (security/hosts.py): a web page that reaches a JobManager on its visitor's machine
   through DNS rebinding sends the attacker's name, and the Origin check below compares
   Origin with Host, so it would take the page for this server's own.
2. Authentication. With a token configured, a request without `Authorization:
   Bearer <token>` gets 401 (compared in constant time), whatever its path, except
   a GET or HEAD of the web dashboard's own files (`/` and `/web/...`): a browser
   cannot send the header with a page load, and those files hold no data; the page
   sends the token with every REST call it makes.
3. No cross-site requests. A browser sends `Origin` on every cross-site POST; a
   request whose Origin is not this server's own is refused (403). A state-changing
   request must also say `Content-Type: application/json` (`application/octet-stream`
   for a blob upload), which a page cannot send without a CORS preflight that this
   server never approves (it sends no CORS headers): 415 otherwise. One exception:
   Flink's multipart uploads to `POST /jobs` and `/jars/upload` (a Java JobGraph, JARs)
   reach their routes, which read the whole body and answer 400 with why they cannot
   run and what to use instead (rest/jar_routes.py): those routes change nothing, and
   a 415 sent before the body was read reached Flink's CLI as a closed connection.
4. Every error is JSON. An exception no handler caught answers 500 `{"errors": [...]}`
   with a request id that the JobManager's log line carries too.
"""

from __future__ import annotations

import hmac
import json
import logging
import uuid
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flink_runtime.security.hosts import AllowedHosts
from flink_runtime.web import ASSET_PREFIX

log = logging.getLogger(__name__)

# Methods that change state. PATCH and DELETE need a CORS preflight in any browser, but
# an attacker's fetch() is not the only client: the same content-type rule holds for them.
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON = "application/json"
OCTET_STREAM = "application/octet-stream"
BLOB_PATHS = ("/blobs",)
# Where Flink's clients send multipart programs: answered with the reason, never run.
MULTIPART_EXPLAINED = ("/jobs", "/jars/upload")
MULTIPART = "multipart/form-data"
VERSION_PREFIX = "/v1"
# The scope key under which a request's id travels to the app's error handler.
REQUEST_ID = "flink_runtime.request_id"


class RestGuard:
    def __init__(self, app: ASGIApp, token: str = "", scheme: str = "http", hosts: AllowedHosts | None = None) -> None:
        """hosts: the Host names answered (default: IP addresses and localhost only)."""
        self.app = app
        self._expected = f"Bearer {token}".encode() if token else b""
        self._scheme = scheme
        self._hosts = hosts if hosts is not None else AllowedHosts()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope = without_version_prefix(scope)
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, message, extra = refusal
            await _send_json(send, status, {"errors": [message]}, extra)
            return
        await self._call_catching(scope, receive, send)

    def _refusal(self, scope: Scope, headers: Headers) -> tuple[int, str, dict[str, str]] | None:
        host = headers.get("host")
        if not self._hosts.allows(host):
            return 403, self._hosts.refusal(host or ""), {}
        if self._expected and not is_dashboard_file(scope):
            given = headers.get("authorization", "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, self._expected):
                reason = _why_not(given)
                return (
                    401,
                    f"Authentication required ({reason}): send 'Authorization: Bearer <token>' with the "
                    "JobManager's security.rest.token (CLI --token, the Airflow connection's password).",
                    {"WWW-Authenticate": 'Bearer realm="flink-runtime"'},
                )
        origin = headers.get("origin")
        if origin is not None and origin != f"{self._scheme}://{headers.get('host', '')}":
            return (
                403,
                f"Cross-site request refused: Origin {origin!r} is not this server. The REST API "
                "serves clients (CLI, JobClient, Airflow), not web pages of other sites.",
                {},
            )
        method = scope["method"]
        if method in STATE_CHANGING:
            path = scope["path"].rstrip("/")
            expected = OCTET_STREAM if path in BLOB_PATHS else JSON
            content_type = headers.get("content-type", "").split(";")[0].strip().lower()
            explained = content_type == MULTIPART and method == "POST" and path in MULTIPART_EXPLAINED
            if (
                content_type != expected
                and not explained
                and not (method in ("PATCH", "DELETE") and not _has_body(headers))
            ):
                shown = repr(content_type) if content_type else "none"
                return 415, f"{method} {scope['path']} takes Content-Type: {expected}, got {shown}.", {}
        return None

    async def _call_catching(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[REQUEST_ID] = uuid.uuid4().hex[:16]
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            # A FastAPI app answered already (create_app's handler for Exception, which
            # Starlette re-raises after answering): nothing more to say.
            if not started:
                status, body = internal_error(scope, exc)
                await _send_json(send, status, body, {})


def is_dashboard_file(scope: Scope) -> bool:
    """A read of the dashboard page or one of its static files (never REST data)."""
    path: str = scope["path"]
    return scope["method"] in ("GET", "HEAD") and (path == "/" or path.startswith(ASSET_PREFIX))


def without_version_prefix(scope: Scope) -> Scope:
    """The request with `/v1/...` read as `/...` (and `/v1` as `/`)."""
    path: str = scope["path"]
    if path != VERSION_PREFIX and not path.startswith(VERSION_PREFIX + "/"):
        return scope
    bare = path[len(VERSION_PREFIX) :] or "/"
    raw_path = scope.get("raw_path")
    if isinstance(raw_path, bytes) and raw_path.startswith(VERSION_PREFIX.encode()):
        raw_path = raw_path[len(VERSION_PREFIX) :] or b"/"
    return {**scope, "path": bare, "raw_path": raw_path}


def internal_error(scope: Scope, exc: BaseException) -> tuple[int, dict[str, Any]]:
    """Log `exc` under the request's id; the 500 answer that names the id."""
    request_id = scope.get(REQUEST_ID) or uuid.uuid4().hex[:16]
    log.error("REST %s %s failed (request id %s)", scope["method"], scope["path"], request_id, exc_info=exc)
    message = (
        f"Internal server error (request id {request_id}): the JobManager's log has the details "
        "under that id. This is a bug: please report it with the request."
    )
    return 500, {"errors": [message], "request-id": request_id}


def _why_not(given: bytes) -> str:
    """What is wrong with an Authorization header that is not the expected one."""
    if not given:
        return "no Authorization header"
    scheme, _, credentials = given.strip().partition(b" ")
    if scheme.lower() == b"bearer" and not credentials.strip():
        return "empty bearer token"
    return "wrong bearer token"


def _has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    return "transfer-encoding" in headers or (length is not None and length.strip() not in ("", "0"))


async def _send_json(send: Send, status: int, body: dict[str, Any], extra_headers: dict[str, str]) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    headers += [(key.lower().encode(), value.encode()) for key, value in extra_headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
