"""The JobManager as one of several on one job store (high-availability.type: database).

Only the leader runs jobs. A JobManager starts as a standby: it accepts no TaskManager
and no job, its job store refuses every write, and its REST API answers through the
leader's (rest/leader_proxy.py). Granted the lease (highavailability/leader_election.py), it
takes a fresh RPC fencing token (`jobmanager_id`, carried by every message between it
and its TaskManagers), writes to the store fenced by the lease's token, and recovers the
jobs the store says were running, as a restarted JobManager does. Revoked (it could not
renew in time, or the lease was taken), it suspends its jobs (SUSPENDED, as Flink's
JobMasters on a revoked leadership), lets its TaskManagers go, and is a standby again.

Without high availability the JobManager leads from its start and holds its job store
exclusively instead (highavailability/exclusive_store.py): a second JobManager on the
same store refuses to start rather than run the same jobs beside it. The JobManagers of
an HA cluster hold that lock shared, so neither kind starts beside the other.
`Leadership` is a component the JobManager owns: it holds the election, the lease and
the store lock, hands the election thread's decisions to the JobManager's mailbox, and
tells the JobManager (a `LeadershipHost`) what to do on a grant or a revoke.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from flink_runtime.configuration import Configuration, JobStoreOptions
from flink_runtime.highavailability import exclusive_store
from flink_runtime.highavailability.leader_election import LeaderElectionConfiguration, LeaderElectionService
from flink_runtime.highavailability.leader_retrieval import cluster_id, high_availability_enabled
from flink_runtime.highavailability.lease_store import LeaderLease, LeaseStore
from flink_runtime.jobmanager.jobstore import JobStore, JobStoreError

log = logging.getLogger(__name__)

Callback = Callable[[Any, BaseException | None], None]


def store_idle_timeout(config: Configuration) -> float | None:
    """With standbys, the job store's PostgreSQL sessions end after sitting idle inside a
    transaction for the renew deadline: a leader frozen mid-write (its fenced write holds
    the lease row) would otherwise keep every standby from taking over. A live leader's
    transactions last milliseconds; one idle that long has stepped down already."""
    if not config.get(JobStoreOptions.URL) or not high_availability_enabled(config):
        return None
    return LeaderElectionConfiguration.from_configuration(config).renew_deadline


@dataclass(frozen=True)
class LeaderInfo:
    cluster_id: str
    high_availability: bool  # several JobManagers on one job store (high-availability.type: database)
    is_leader: bool
    leader: LeaderLease | None  # this one's lease while it leads, else the latest seen


class LeadershipHost(Protocol):
    """What the leadership uses of the JobManager: its mailbox, the addresses a lease
    names, and what it does when granted or revoked."""

    rest_url: str

    @property
    def address(self) -> str: ...

    def run_in_mailbox(self, function: Callable[..., Any], *args: Any) -> None: ...
    def run_async(self, awaitable: Any, on_done: Callback | None = None) -> Any: ...

    def leadership_granted(self, lease: LeaderLease) -> None:
        """Lead: take up the jobs. Raises JobStoreError if that fails (the leadership
        then steps down and contends again)."""

    def leadership_revoked(self, token: int, reason: str) -> None:
        """A standby again: give up the jobs and TaskManagers of leadership `token`."""


class Leadership:
    """Leader election (high-availability.type: database) or the exclusive store lock."""

    def __init__(
        self,
        config: Configuration,
        job_store: JobStore | None,
        host: LeadershipHost,
        *,
        election_service: Callable[..., LeaderElectionService] = LeaderElectionService,
    ) -> None:
        """job_store: the unfenced store (None without one); its lock is taken here, and
        the store closed if that fails. election_service: builds the election (a test's
        fake drives grants and revokes by hand)."""
        self._host = host
        self.high_availability = high_availability_enabled(config)
        self.cluster_id = cluster_id(config)
        self.leader_lease: LeaderLease | None = None  # ours, while leading
        self.known_leader: LeaderLease | None = None  # the leader as last read (standby)
        self._election: LeaderElectionService | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the mailbox's, for the election thread
        self._store_lock: exclusive_store.StoreLock | None = None
        if job_store is not None:
            # Alone on its store, or shared with the other JobManagers of its HA cluster only.
            try:
                self._store_lock = exclusive_store.acquire(job_store, shared=self.high_availability)
            except BaseException:
                job_store.close()
                raise
        if not self.high_availability:
            return
        assert job_store is not None  # high_availability_enabled() requires jobstore.url
        self.contender_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._election = election_service(
            LeaseStore(job_store.engine, self.cluster_id, JobStore.WRITE_OPTIONS),
            self.contender_id,
            LeaderElectionConfiguration.from_configuration(config),
            addresses=lambda: (host.address, host.rest_url),
            on_grant=lambda lease: self._from_election_thread(self._grant, lease),
            on_revoke=lambda lease, reason: self._from_election_thread(self._revoke, lease, reason),
            on_leader_seen=self._leader_seen,
        )

    @property
    def is_leader(self) -> bool:
        return not self.high_availability or self.leader_lease is not None

    @property
    def fencing_cluster(self) -> str | None:
        """The cluster whose lease fences the job store's writes (None: not fenced)."""
        return self.cluster_id if self.high_availability else None

    def start(self) -> None:
        """Contend for the lease (once the REST API serves: the lease names its URL)."""
        if self._election is not None:
            self._loop = asyncio.get_running_loop()
            self._election.start()

    def stop(self) -> None:
        """A clean stop gives the lease up, so a standby takes over without waiting it out."""
        if self._election is not None:
            self._election.stop(release=True)

    @property
    def store_lock_can_be_lost(self) -> bool:
        """Whether check_store_lock needs calling now and then (a PostgreSQL session's lock)."""
        return self._store_lock is not None and self._store_lock.can_be_lost

    def check_store_lock(self) -> None:
        """Still holding the store's lock (exclusive_store.py)? (A PostgreSQL session
        can end under a live JobManager; exclusive_store.py takes the lock again, and
        raises JobStoreInUse, which ends a standalone JobManager's process, if another
        JobManager took it meanwhile.)"""
        if self._store_lock is not None:
            self._host.run_async(asyncio.to_thread(self._store_lock.check), _store_lock_checked)

    def release_store_lock(self) -> None:
        """After the store's last write: only then may another JobManager start on it."""
        if self._store_lock is not None:
            self._store_lock.release()
            self._store_lock = None

    def info(self) -> LeaderInfo:
        """Who leads this cluster, and whether this JobManager does (GET /leader)."""
        return LeaderInfo(
            cluster_id=self.cluster_id,
            high_availability=self.high_availability,
            is_leader=self.is_leader,
            leader=self.leader_lease or self.known_leader,
        )

    def _from_election_thread(self, function: Callable[..., None], *arguments: Any) -> None:
        assert self._loop is not None  # the election runs once start() was called
        self._loop.call_soon_threadsafe(self._host.run_in_mailbox, function, *arguments)

    def _leader_seen(self, lease: LeaderLease | None) -> None:
        self.known_leader = lease  # read by the REST proxy; one assignment, from the election thread

    def _grant(self, lease: LeaderLease) -> None:
        if self.leader_lease is not None:  # not expected (revokes come first): end the old one cleanly
            self._revoke(self.leader_lease, f"granted anew with fencing token {lease.token}")
        self.leader_lease = self.known_leader = lease
        try:
            self._host.leadership_granted(lease)
        except JobStoreError as exc:  # the database failed, or the lease is gone already
            log.error("Recovering the jobs of cluster %s failed: %s; stepping down.", self.cluster_id, exc)
            assert self._election is not None
            self._election.step_down(lease, f"recovering its jobs failed: {exc}")

    def _revoke(self, lease: LeaderLease, reason: str) -> None:
        if self.leader_lease is None or self.leader_lease.token != lease.token:
            return  # a leadership already given up
        self.leader_lease = self.known_leader = None  # who leads now: read at the next attempt
        self._host.leadership_revoked(lease.token, reason)


def _store_lock_checked(_result: None, error: BaseException | None) -> None:
    if error is not None:
        raise error  # inside the mailbox: escalated (rpc/supervision.py)
