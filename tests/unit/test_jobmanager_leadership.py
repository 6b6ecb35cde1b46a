"""The JobManager's Leadership component, built alone: a fake host (the JobManager's
side: mailbox, grant/revoke reactions) and a fake election the test drives by hand,
on a real SQLite job store (its lock and lease table)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.highavailability.exclusive_store import JobStoreInUse
from flink_runtime.highavailability.lease_store import LeaderLease
from flink_runtime.jobmanager.jobstore import JobStore, JobStoreError
from flink_runtime.jobmanager.leadership import Leadership
from flink_runtime.rest.cluster_routes import leader_json


def lease(token: int, leader: str = "jm-a") -> LeaderLease:
    return LeaderLease("prod", leader, token, "tcp://a:1", "http://a:2", renewed_at=0.0, read_at=0.0)


class FakeHost:
    address = "tcp://here:6123"
    rest_url = "http://here:8081"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail_grant: JobStoreError | None = None

    def run_in_mailbox(self, function: Callable[..., Any], *args: Any) -> None:
        function(*args)

    def run_async(self, awaitable: Any, on_done: Any = None) -> Any:
        self.calls.append(("run_async",))
        return asyncio.ensure_future(awaitable)

    def leadership_granted(self, granted: LeaderLease) -> None:
        self.calls.append(("granted", granted.token))
        if self.fail_grant is not None:
            raise self.fail_grant

    def leadership_revoked(self, token: int, reason: str) -> None:
        self.calls.append(("revoked", token, reason))


class FakeElection:
    """What Leadership builds its election with; the test calls on_grant/on_revoke as
    the election thread would."""

    def __init__(self, store: Any, contender_id: str, config: Any, **callbacks: Any) -> None:
        self.contender_id = contender_id
        self.callbacks = callbacks
        self.events: list[tuple[Any, ...]] = []

    def start(self) -> None:
        self.events.append(("start",))

    def stop(self, release: bool) -> None:
        self.events.append(("stop", release))

    def step_down(self, stepped: LeaderLease, reason: str) -> None:
        self.events.append(("step_down", stepped.token, reason))

    def from_thread(self, name: str, *args: Any) -> None:
        thread = threading.Thread(target=self.callbacks[name], args=args)
        thread.start()
        thread.join()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    with JobStore(f"sqlite:///{tmp_path / 'jobstore.db'}") as job_store:
        yield job_store


def ha_config(tmp_path: Path) -> Configuration:
    return Configuration(
        {
            "jobstore.url": f"sqlite:///{tmp_path / 'jobstore.db'}",
            "high-availability.type": "database",
            "high-availability.cluster-id": "prod",
        }
    )


def test_without_high_availability_it_leads_from_the_start() -> None:
    leadership = Leadership(Configuration(), None, FakeHost())
    assert leadership.is_leader and leadership.fencing_cluster is None
    assert not leadership.store_lock_can_be_lost
    leadership.start()  # nothing to contend for
    assert leader_json(leadership.info()) == {
        "cluster-id": "default",
        "high-availability": "NONE",
        "is-leader": True,
        "leader": None,
    }


async def test_a_standby_leads_once_granted_and_stands_by_again_once_revoked(tmp_path: Path, store: JobStore) -> None:
    host = FakeHost()
    leadership, election = leadership_with_fake_election(tmp_path, store, host)
    assert not leadership.is_leader and leadership.fencing_cluster == "prod"
    assert election.callbacks["addresses"]() == (host.address, host.rest_url)
    assert election.events == [("start",)]

    election.from_thread("on_leader_seen", lease(3, "jm-b"))  # a standby learns who leads
    assert leader_json(leadership.info())["leader"] == {"id": "jm-b", "fencing-token": 3, "rest-url": "http://a:2"}

    election.from_thread("on_grant", lease(4))
    await asyncio.sleep(0)  # the grant reaches the mailbox through the loop
    assert leadership.is_leader and host.calls == [("granted", 4)]
    assert leadership.info().is_leader and leader_json(leadership.info())["leader"]["fencing-token"] == 4

    election.from_thread("on_revoke", lease(3), "an older leadership")  # not ours: ignored
    await asyncio.sleep(0)
    assert leadership.is_leader and host.calls == [("granted", 4)]

    election.from_thread("on_revoke", lease(4), "could not renew")
    await asyncio.sleep(0)
    assert not leadership.is_leader and leadership.known_leader is None
    assert host.calls[-1] == ("revoked", 4, "could not renew")

    leadership.stop()
    assert election.events[-1] == ("stop", True)  # the lease is given up on a clean stop


def leadership_with_fake_election(tmp_path: Path, store: JobStore, host: FakeHost) -> tuple[Leadership, FakeElection]:
    elections: list[FakeElection] = []

    def build(*args: Any, **kwargs: Any) -> FakeElection:
        elections.append(FakeElection(*args, **kwargs))
        return elections[-1]

    leadership = Leadership(ha_config(tmp_path), store, host, election_service=build)
    leadership.start()
    return leadership, elections[0]


async def test_a_grant_anew_ends_the_old_leadership_first(tmp_path: Path, store: JobStore) -> None:
    host = FakeHost()
    leadership, election = leadership_with_fake_election(tmp_path, store, host)
    election.from_thread("on_grant", lease(1))
    election.from_thread("on_grant", lease(2))
    await asyncio.sleep(0)
    assert host.calls == [("granted", 1), ("revoked", 1, "granted anew with fencing token 2"), ("granted", 2)]
    assert leadership.leader_lease == lease(2)


async def test_a_leader_that_cannot_take_up_its_jobs_steps_down(tmp_path: Path, store: JobStore) -> None:
    host = FakeHost()
    host.fail_grant = JobStoreError("database is gone")
    _, election = leadership_with_fake_election(tmp_path, store, host)
    election.from_thread("on_grant", lease(7))
    await asyncio.sleep(0)
    assert election.events[-1] == ("step_down", 7, "recovering its jobs failed: database is gone")


def test_the_store_lock_is_held_until_released(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobstore.db'}"
    with JobStore(url) as store:
        holder = Leadership(Configuration(), store, FakeHost())
        with pytest.raises(JobStoreInUse, match="is in use by the JobManager"):
            Leadership(Configuration(), JobStore(url), FakeHost())
        holder.release_store_lock()
        holder.release_store_lock()  # a second release is harmless
        with JobStore(url) as second:
            Leadership(Configuration(), second, FakeHost()).release_store_lock()  # free again
