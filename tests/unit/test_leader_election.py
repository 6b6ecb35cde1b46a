"""Leader election through the lease row, and the job store's fencing, on SQLite and on a
real PostgreSQL: two contenders, expiry by the database's clock, a lost renewal that
revokes before the lease can be taken, and writes with an old token refused."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import update

from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.highavailability.leader_election import (
    LeaderElectionConfiguration,
    LeaderElectionService,
    LeaderState,
)
from flink_runtime.highavailability.leader_retrieval import LeaderRetriever, cluster_id, high_availability_enabled
from flink_runtime.highavailability.lease_store import LeaderLease, LeaseStore
from flink_runtime.jobmanager.jobstore import FencingTokenMismatch, JobStore, JobStoreError
from flink_runtime.jobmanager.jobstore_schema import jobs_table
from tests.helpers.postgres import PostgresServer

SHORT = LeaderElectionConfiguration(lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)
# For a leader that must keep its lease for several durations on a loaded machine: a renewal
# delayed past 0.6 s (a starved thread, SQLite's writer lock) would rightly revoke it.
PATIENT = LeaderElectionConfiguration(lease_duration=2.0, renew_deadline=1.5, retry_period=0.1)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobstore.db'}"
    return request.getfixturevalue("postgres").new_database("lease")


@pytest.fixture
def job_store(db_url: str) -> Iterator[JobStore]:
    with JobStore(db_url) as store:
        yield store


def lease_store(job_store: JobStore, cluster: str = "c1") -> LeaseStore:
    return LeaseStore(job_store.engine, cluster, JobStore.WRITE_OPTIONS)


# -- the lease row -------------------------------------------------------------------------------


def test_two_contenders_one_leader_and_the_token_grows_on_takeover(job_store: JobStore) -> None:
    leases = lease_store(job_store)
    first = leases.try_acquire("jm-a", "tcp://a:1", "http://a:2", lease_duration=0.5)
    assert first is not None and (first.leader_id, first.token, first.rpc_address) == ("jm-a", 1, "tcp://a:1")
    assert leases.try_acquire("jm-b", "tcp://b:1", "http://b:2", lease_duration=0.5) is None
    assert leases.renew(first)
    assert leases.try_acquire("jm-b", "tcp://b:1", "http://b:2", lease_duration=0.5) is None  # renewed: still held
    time.sleep(0.7)  # no renewal for longer than the lease duration (the database's clock)
    second = leases.try_acquire("jm-b", "tcp://b:1", "http://b:2", lease_duration=0.5)
    assert second is not None and (second.leader_id, second.token, second.rest_url) == ("jm-b", 2, "http://b:2")
    assert not leases.renew(first), "a deposed leader renewed a lease it no longer holds"
    assert not leases.release(first)
    current = leases.read()
    assert current is not None and (current.leader_id, current.token, current.renewed_at) == (
        "jm-b",
        2,
        second.renewed_at,
    )
    # Another cluster's lease on the same database is independent.
    assert lease_store(job_store, "c2").try_acquire("jm-a", "tcp://a:1", "", 0.5) is not None


def test_a_released_lease_is_taken_at_once(job_store: JobStore) -> None:
    leases = lease_store(job_store)
    first = leases.try_acquire("jm-a", "tcp://a:1", "", lease_duration=60)
    assert first is not None and leases.release(first)
    retriever = LeaderRetriever(str(job_store.engine.url.render_as_string(hide_password=False)), "c1")
    try:
        assert retriever.leader() is None  # released: nobody leads
        second = leases.try_acquire("jm-b", "tcp://b:1", "", lease_duration=60)
        assert second is not None and second.token == 2
        seen = retriever.leader()
        assert seen is not None and (seen.leader_id, seen.rpc_address) == ("jm-b", "tcp://b:1")
    finally:
        retriever.close()


def test_contenders_racing_for_an_expired_lease_get_one_winner(job_store: JobStore) -> None:
    # A contender judges a lease expired after its own lease_duration: 2 s, so the winner's
    # lease cannot expire while a contender slowed down by the load still tries (a second
    # win would then be right, and the test would no longer be about the race).
    leases = lease_store(job_store)
    assert leases.try_acquire("old", "tcp://old:1", "", lease_duration=2.0) is not None
    time.sleep(2.2)
    barrier, winners = threading.Barrier(6), []

    def contend(name: str) -> None:
        barrier.wait()
        lease = leases.try_acquire(name, f"tcp://{name}:1", "", lease_duration=2.0)
        if lease is not None:
            winners.append(lease)

    threads = [threading.Thread(target=contend, args=(f"jm-{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1 and winners[0].token == 2, winners


# -- fencing of the job store -----------------------------------------------------------------------


def test_a_write_with_an_old_token_is_refused_and_changes_nothing(job_store: JobStore) -> None:
    leases = lease_store(job_store)
    old = leases.try_acquire("jm-a", "tcp://a:1", "", lease_duration=0.3)
    assert old is not None
    deposed = job_store.fenced("c1", old.token)
    deposed.add_job("j1", "job", "{}", 1.0)
    deposed.update_status("j1", "RUNNING", 2.0)
    time.sleep(0.5)
    new = leases.try_acquire("jm-b", "tcp://b:1", "", lease_duration=0.3)
    assert new is not None
    leader = job_store.fenced("c1", new.token)
    leader.update_status("j1", "FINISHED", 3.0)
    with pytest.raises(FencingTokenMismatch, match=r"fencing token 1, and the leader lease is now held by token 2"):
        deposed.update_status("j1", "RUNNING", 4.0)  # a deposed leader's late write: RUNNING over FINISHED
    for write in (
        lambda: deposed.add_job("j2", "x", "{}", 1.0),
        lambda: deposed.add_checkpoint("j1", 1, "/cp/1", False, 1.0, 1),
        lambda: deposed.save_progress("j1", {}),
        lambda: deposed.begin_recovery("j1"),
    ):
        with pytest.raises(FencingTokenMismatch):
            write()
    with pytest.raises(FencingTokenMismatch, match="is a standby"):
        job_store.fenced("c1", None).update_status("j1", "RUNNING", 5.0)
    record = job_store.job("j1")  # reads are not fenced
    assert record is not None and (record.status, record.updated_at) == ("FINISHED", 3.0)
    assert job_store.job("j2") is None and job_store.checkpoints("j1") == []
    # After a clean release, nobody may write as leader.
    assert leases.release(new)
    with pytest.raises(FencingTokenMismatch, match="held by nobody"):
        leader.update_status("j1", "CANCELED", 6.0)


# -- the election: pure decisions, then the service --------------------------------------------------


def test_leader_state_revokes_at_the_renew_deadline_from_the_renewal_start() -> None:
    state = LeaderState(SHORT)
    lease = LeaderLease("c", "me", 1, "", "", 0.0, 0.0)
    state.acquired(lease, attempt_started=10.0)
    assert state.is_leader and not state.must_revoke(10.59)
    assert state.must_revoke(10.6)
    state.renewed(attempt_started=10.5)
    assert not state.must_revoke(11.0) and state.must_revoke(11.1)
    state.renewed(attempt_started=10.2)  # a slow renewal finishing late never shortens it
    assert not state.must_revoke(11.05)
    state.revoked()
    assert not state.is_leader and not state.must_revoke(100.0)


def test_configuration_is_checked_and_named() -> None:
    with pytest.raises(ConfigurationError, match="renew-deadline .* must be shorter than .*lease-duration"):
        LeaderElectionConfiguration(lease_duration=5, renew_deadline=5, retry_period=1)
    with pytest.raises(ConfigurationError, match="retry-period"):
        LeaderElectionConfiguration(lease_duration=5, renew_deadline=2, retry_period=2)
    config = Configuration({"high-availability.type": "database"})
    with pytest.raises(ConfigurationError, match="needs jobstore.url"):
        high_availability_enabled(config)
    defaults = LeaderElectionConfiguration.from_configuration(Configuration())
    assert (defaults.lease_duration, defaults.renew_deadline, defaults.retry_period) == (15.0, 10.0, 5.0)
    assert not high_availability_enabled(Configuration())
    assert cluster_id(Configuration({"high-availability.cluster-id": "/prod/"})) == "prod"
    with pytest.raises(ConfigurationError, match="cluster-id is 200 characters long; at most 128"):
        cluster_id(Configuration({"high-availability.cluster-id": "x" * 200}))


class Contender:
    def __init__(self, job_store: JobStore, name: str, config: LeaderElectionConfiguration = SHORT) -> None:
        self.events: list[tuple[str, object]] = []
        self.granted = threading.Event()
        self.revoked = threading.Event()
        self.service = LeaderElectionService(
            lease_store(job_store),
            name,
            config,
            addresses=lambda: (f"tcp://{name}:1", f"http://{name}:2"),
            on_grant=self._grant,
            on_revoke=self._revoke,
        )

    def _grant(self, lease: LeaderLease) -> None:
        self.events.append(("grant", lease.token))
        self.granted.set()

    def _revoke(self, lease: LeaderLease, reason: str) -> None:
        self.events.append(("revoke", reason))
        self.revoked.set()


def test_standby_takes_over_from_a_leader_that_stopped_renewing(job_store: JobStore) -> None:
    a, b = Contender(job_store, "jm-a", PATIENT), Contender(job_store, "jm-b", PATIENT)
    a.service.start()
    assert a.granted.wait(5)
    b.service.start()
    try:
        time.sleep(2 * PATIENT.lease_duration + 0.5)  # a renews, b never gets it
        assert not b.granted.is_set() and a.events == [("grant", 1)]
        # a's process freezes (it stops renewing without releasing): b takes over after the lease.
        a.service._stopped.set()
        assert b.granted.wait(5) and b.events == [("grant", 2)]
        # a's deadline timer revoked it on its own, before b could take the lease.
        assert a.revoked.is_set() and "renew-deadline" in str(a.events[-1][1])
    finally:
        a.service.stop(release=False)
        b.service.stop()
    assert lease_store(job_store).read().leader_id is None  # b released it on stop


def test_a_leader_whose_database_fails_revokes_before_its_lease_expires(db_url: str, job_store: JobStore) -> None:
    """The renewal raises (database unreachable): the leader steps down at the renew
    deadline, measured from its last successful renewal; the lease is still its own
    then (not expired), so no standby can have started."""
    contender = Contender(job_store, "jm-a")
    contender.service.start()
    try:
        assert contender.granted.wait(5)
        broken_at = time.monotonic()

        def unreachable(*args: object) -> bool:
            raise OSError("connection refused")

        contender.service.store.renew = unreachable  # type: ignore[method-assign]
        assert contender.revoked.wait(5)
        stepped_down_after = time.monotonic() - broken_at
        lease = lease_store(job_store).read()
        assert lease is not None and not lease.expired(SHORT.lease_duration), "revoked only after the lease expired"
        # Its own lease, given up: taken again at once, as a new leadership (a new token),
        # and the grant is handed on only after the revoke.
        deadline = time.monotonic() + 5
        while len(contender.events) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        contender.service.stop(release=False)
    assert stepped_down_after <= SHORT.renew_deadline + 0.3, stepped_down_after
    assert [(kind, value if kind == "grant" else "revoke") for kind, value in contender.events[:3]] == [
        ("grant", 1),
        ("revoke", "revoke"),
        ("grant", 2),
    ]


def test_a_leader_frozen_inside_a_write_neither_blocks_the_takeover_nor_commits_after_it(
    postgres: PostgresServer,
) -> None:
    """PostgreSQL: a fenced write holds the lease row (FOR SHARE) until it commits. A
    leader frozen inside one (SIGSTOP, a long pause) would keep every standby from
    taking the lease; the session's idle_in_transaction_session_timeout ends it, and the
    frozen write fails instead of landing after the takeover."""
    url = postgres.new_database("frozen")
    with JobStore(url, idle_transaction_timeout=0.5) as frozen_store, JobStore(url) as standby_store:
        leases = lease_store(standby_store)
        lease = leases.try_acquire("jm-a", "tcp://a:1", "", lease_duration=0.3)
        assert lease is not None
        leader = frozen_store.fenced("c1", lease.token)
        leader.add_job("j1", "job", "{}", 1.0)
        took: list[float] = []

        def take_over() -> None:
            started = time.monotonic()
            while leases.try_acquire("jm-b", "tcp://b:1", "", lease_duration=0.3) is None:
                time.sleep(0.05)
            took.append(time.monotonic() - started)

        with pytest.raises(JobStoreError), leader._transaction(write=True) as conn:  # the lease row is held
            time.sleep(0.4)  # the lease expires meanwhile
            standby = threading.Thread(target=take_over)
            standby.start()
            time.sleep(1.5)  # frozen past the idle timeout: the server ends the session
            conn.execute(update(jobs_table).where(jobs_table.c.job_id == "j1").values(status="RUNNING"))
        standby.join(10)
        assert took and took[0] < 1.4, took  # not blocked until the frozen write ended
        assert standby_store.job("j1").status == "INITIALIZING"


def test_a_leader_that_cannot_take_up_its_jobs_steps_down_and_contends_again(job_store: JobStore) -> None:
    contender = Contender(job_store, "jm-a")
    contender.service.start()
    try:
        assert contender.granted.wait(5)
        lease = contender.service.state.lease
        assert lease is not None
        contender.service.step_down(lease, "recovering its jobs failed: database gone")
        contender.service.step_down(lease, "twice")  # the same leadership ends once
        deadline = time.monotonic() + 5
        while len(contender.events) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        contender.service.stop()
    assert contender.events[:3] == [("grant", 1), ("revoke", "recovering its jobs failed: database gone"), ("grant", 2)]
