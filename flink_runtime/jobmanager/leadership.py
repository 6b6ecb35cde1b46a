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
`JobManagerLeadership` is part of the JobManager (a mixin: it shares its state and
runs in its mailbox; the election thread hands its decisions to the mailbox).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from typing import TYPE_CHECKING, Any

from flink_runtime.configuration import Configuration
from flink_runtime.highavailability import exclusive_store
from flink_runtime.highavailability.leader_election import LeaderElectionConfiguration, LeaderElectionService
from flink_runtime.highavailability.leader_retrieval import cluster_id, high_availability_enabled
from flink_runtime.highavailability.lease_store import LeaderLease, LeaseStore
from flink_runtime.jobmanager.jobstore import JobStore, JobStoreError

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmanager import JobManager

log = logging.getLogger(__name__)


def store_idle_timeout(config: Configuration) -> float | None:
    """With standbys, the job store's PostgreSQL sessions end after sitting idle inside a
    transaction for the renew deadline: a leader frozen mid-write (its fenced write holds
    the lease row) would otherwise keep every standby from taking over. A live leader's
    transactions last milliseconds; one idle that long has stepped down already."""
    if not config.raw("jobstore.url") or not high_availability_enabled(config):
        return None
    return LeaderElectionConfiguration.from_configuration(config).renew_deadline


class JobManagerLeadership:
    """Leader election, and what the JobManager does when granted or revoked."""

    def _init_leadership(self: JobManager, config: Configuration) -> None:
        self.high_availability = high_availability_enabled(config)
        self.cluster_id = cluster_id(config)
        self.leader_lease: LeaderLease | None = None  # ours, while leading
        self.known_leader: LeaderLease | None = None  # the leader as last read (standby)
        self._election: LeaderElectionService | None = None
        self._store_lock: exclusive_store.StoreLock | None = None
        if self.job_store is not None:
            # Alone on its store, or shared with the other JobManagers of its HA cluster only.
            try:
                self._store_lock = exclusive_store.acquire(self.job_store, shared=self.high_availability)
            except BaseException:
                self.job_store.close()
                raise
        if not self.high_availability:
            return
        assert self.job_store is not None  # high_availability_enabled() requires jobstore.url
        self._unfenced_store = self.job_store
        self.job_store = self._unfenced_store.fenced(self.cluster_id, None)  # a standby writes nothing
        self.contender_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        loop_call = self._from_election_thread
        self._election = LeaderElectionService(
            LeaseStore(self._unfenced_store.engine, self.cluster_id, JobStore.WRITE_OPTIONS),
            self.contender_id,
            LeaderElectionConfiguration.from_configuration(config),
            addresses=lambda: (self.address, self.rest_url),
            on_grant=lambda lease: loop_call(self._grant_leadership, lease),
            on_revoke=lambda lease, reason: loop_call(self._revoke_leadership, lease, reason),
            on_leader_seen=self._leader_seen,
        )

    @property
    def is_leader(self: JobManager) -> bool:
        return not self.high_availability or self.leader_lease is not None

    def start_leader_election(self: JobManager) -> None:
        """Contend for the lease (once the REST API serves: the lease names its URL)."""
        if self._election is not None:
            self._loop_for_election = asyncio.get_running_loop()
            self._election.start()

    def stop_leader_election(self: JobManager) -> None:
        """A clean stop gives the lease up, so a standby takes over without waiting it out."""
        if self._election is not None:
            self._election.stop(release=True)

    def check_store_lock(self: JobManager) -> None:
        """Still holding the store's lock (exclusive_store.py)? (A PostgreSQL session
        can end under a live JobManager; exclusive_store.py takes the lock again, and
        raises JobStoreInUse, which ends a standalone JobManager's process, if another
        JobManager took it meanwhile.)"""
        if self._store_lock is not None:
            self.run_async(asyncio.to_thread(self._store_lock.check), self._store_lock_checked)

    def _store_lock_checked(self: JobManager, _result: None, error: BaseException | None) -> None:
        if error is not None:
            raise error  # inside the mailbox: escalated (rpc/supervision.py)

    def release_store_lock(self: JobManager) -> None:
        """After the store's last write: only then may another JobManager start on it."""
        if self._store_lock is not None:
            self._store_lock.release()
            self._store_lock = None

    def leader_view(self: JobManager) -> dict[str, Any]:
        """GET /leader: who leads this cluster, and whether this JobManager does."""
        leader = self.leader_lease or self.known_leader
        return {
            "cluster-id": self.cluster_id,
            "high-availability": "database" if self.high_availability else "NONE",
            "is-leader": self.is_leader,
            "leader": None
            if leader is None
            else {"id": leader.leader_id, "fencing-token": leader.token, "rest-url": leader.rest_url},
        }

    def _from_election_thread(self: JobManager, function: Any, *arguments: Any) -> None:
        self._loop_for_election.call_soon_threadsafe(self.run_in_mailbox, function, *arguments)

    def _leader_seen(self: JobManager, lease: LeaderLease | None) -> None:
        self.known_leader = lease  # read by the REST proxy; one assignment, from the election thread

    def _grant_leadership(self: JobManager, lease: LeaderLease) -> None:
        if self.leader_lease is not None:  # not expected (revokes come first): end the old one cleanly
            self._revoke_leadership(self.leader_lease, f"granted anew with fencing token {lease.token}")
        self.leader_lease = self.known_leader = lease
        # A fresh RPC fencing token: TaskManagers registered with an earlier leader (or
        # with this JobManager's earlier leadership) refuse its messages and re-register.
        self.jobmanager_id = uuid.uuid4().hex
        self.job_store = self._unfenced_store.fenced(self.cluster_id, lease.token)
        log.info(
            "JobManager %s leads cluster %s (fencing token %d); recovering its jobs.",
            self.jobmanager_id,
            self.cluster_id,
            lease.token,
        )
        try:
            self._recover_jobs()
        except JobStoreError as exc:  # the database failed, or the lease is gone already
            log.error("Recovering the jobs of cluster %s failed: %s; stepping down.", self.cluster_id, exc)
            assert self._election is not None
            self._election.step_down(lease, f"recovering its jobs failed: {exc}")

    def _revoke_leadership(self: JobManager, lease: LeaderLease, reason: str) -> None:
        if self.leader_lease is None or self.leader_lease.token != lease.token:
            return  # a leadership already given up
        token = lease.token
        self.leader_lease = self.known_leader = None  # who leads now: read at the next attempt
        reason = f"JobManager {self.jobmanager_id} lost the leadership (fencing token {token}): {reason}"
        for job in list(self.jobs.values()):
            job.suspend(reason)  # its SUSPENDED is written with the old token: refused if already taken
        self.jobs.clear()
        self.archived.clear()
        self._finished_at.clear()
        self._recovering.clear()
        for task_manager_id in list(self.task_managers):
            self.resource_manager.remove_task_manager(task_manager_id, "the JobManager is a standby now", expected=True)
        self.jobmanager_id = uuid.uuid4().hex  # whatever tasks still report is refused
        self.job_store = self._unfenced_store.fenced(self.cluster_id, None)
        log.warning("%s; standing by.", reason)
