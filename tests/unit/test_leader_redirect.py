"""A standby JobManager's REST answers (rest/leader_redirect.py): 307 to the leader with
the path and query kept, 503 + Retry-After while nobody leads, its own /leader."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from flink_runtime.highavailability.lease_store import LeaderLease
from flink_runtime.rest.leader_redirect import LeaderRedirect

LEADER = LeaderLease("prod", "jm-a", 7, "tcp://a:6123", "http://a:8081", 1.0, 2.0)


class FakeJobManager:
    cluster_id = "prod"
    rest_url = "http://b:8082"

    def __init__(self, is_leader: bool, known_leader: LeaderLease | None) -> None:
        self.is_leader = is_leader
        self.known_leader = known_leader

    def leader_view(self) -> dict[str, Any]:
        leader = self.known_leader
        return {"is-leader": self.is_leader, "leader": None if leader is None else {"rest-url": leader.rest_url}}


def client(jobmanager: FakeJobManager) -> httpx.AsyncClient:
    app = FastAPI()

    @app.get("/leader")
    async def leader() -> dict[str, Any]:
        return jobmanager.leader_view()

    @app.post("/jobs")
    async def submit() -> dict[str, str]:
        return {"jobid": "served here"}

    transport = httpx.ASGITransport(app=LeaderRedirect(app, jobmanager))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url="http://b:8082")


async def test_a_standby_redirects_with_path_and_query_and_names_the_leader() -> None:
    async with client(FakeJobManager(False, LEADER)) as http:
        answer = await http.post("/jobs?mode=detached", content=b"{}")
        assert answer.status_code == 307
        assert answer.headers["location"] == "http://a:8081/jobs?mode=detached"
        body = answer.json()
        assert "standby of cluster 'prod'; the leader is jm-a at http://a:8081 (fencing token 7)" in body["errors"][0]
        assert body["leader"] == {"rest-url": "http://a:8081"}
        own = await http.get("/leader")  # answered by the standby itself
        assert own.status_code == 200 and own.json()["is-leader"] is False


async def test_while_nobody_leads_a_standby_says_retry_later() -> None:
    for known in (None, LeaderLease("prod", "me", 3, "", "http://b:8082", 1.0, 2.0)):  # or only itself, stale
        async with client(FakeJobManager(False, known)) as http:
            answer = await http.post("/jobs", content=b"{}")
            assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
            assert "a leader is being elected: retry shortly" in answer.json()["errors"][0]


async def test_the_leader_serves_everything_itself() -> None:
    async with client(FakeJobManager(True, LEADER)) as http:
        answer = await http.post("/jobs", content=b"{}")
        assert answer.status_code == 200 and answer.json() == {"jobid": "served here"}
