"""A standby JobManager's REST API points at the leader (high-availability.type: database).

Between the guard (which authenticates first) and the routes: while this JobManager is
not the leader, every request except the few it answers for itself is answered with
307 Temporary Redirect to the same path on the leader's REST URL, as read from the
leader lease. 307 keeps the method and body, so a POST /jobs lands on the leader as
sent; the JSON body names the leader for clients that do not follow redirects. With no
leader elected yet (a failover in progress) the answer is 503 with Retry-After, which
the project's clients retry.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmanager import JobManager

# Answered by every JobManager about itself: who leads, and this process's own metrics.
SERVED_BY_STANDBY = frozenset({"/leader", "/metrics"})


class LeaderRedirect:
    def __init__(self, app: ASGIApp, jobmanager: JobManager) -> None:
        self.app = app
        self.jobmanager = jobmanager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobmanager = self.jobmanager
        if scope["type"] != "http" or jobmanager.is_leader or scope["path"].rstrip("/") in SERVED_BY_STANDBY:
            await self.app(scope, receive, send)
            return
        leader = jobmanager.known_leader
        if leader is None or not leader.rest_url or leader.rest_url == jobmanager.rest_url:
            status, headers = 503, [(b"retry-after", b"1")]
            message = (
                f"No JobManager leads cluster {jobmanager.cluster_id!r} at the moment (this one is a standby); "
                "a leader is being elected: retry shortly."
            )
        else:
            raw_path = scope.get("raw_path") or scope["path"].encode()
            query = scope.get("query_string") or b""
            location = leader.rest_url.encode() + raw_path + (b"?" + query if query else b"")
            status, headers = 307, [(b"location", location)]
            message = (
                f"This JobManager is a standby of cluster {jobmanager.cluster_id!r}; the leader is "
                f"{leader.leader_id} at {leader.rest_url} (fencing token {leader.token})."
            )
        body = json.dumps({"errors": [message], "leader": jobmanager.leader_view()["leader"]}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                + headers,
            }
        )
        await send({"type": "http.response.body", "body": body})
