"""Leader election through the lease row (lease_store.py), as Flink's Kubernetes HA
elects through a ConfigMap lease:

- a contender tries to take the lease every `retry-period`; it gets it when nobody
  holds it or its holder did not renew it for `lease-duration` (the database's clock);
- the leader renews every `retry-period`; when it has not renewed successfully for
  `renew-deadline` (measured on its own monotonic clock from the START of its last
  successful renewal, which is before the database stamped it), it stops acting as
  leader. With renew-deadline < lease-duration that is before any standby can take
  the lease: two JobManagers never both act as leader. The job store's fencing
  (every write checks the token) covers what a paused process might still send.

`LeaderState` is the decision and the state it rests on, without I/O (time passed in); `LeaderElectionService` runs it
in a thread of its own, so a busy JobManager mailbox never delays a renewal, and calls
`on_grant(lease)` / `on_revoke(lease, reason)` in the order they happened; they must
not block (the JobManager hands them to its mailbox).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.highavailability.lease_store import LeaderLease, LeaseStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaderElectionConfiguration:
    """Seconds, from `high-availability.database.leader-election.*`."""

    lease_duration: float
    renew_deadline: float
    retry_period: float

    def __post_init__(self) -> None:
        prefix = "high-availability.database.leader-election"
        if not 0 < self.retry_period < self.renew_deadline:
            raise ConfigurationError(
                f"{prefix}.retry-period ({self.retry_period:g} s) must be > 0 and shorter than "
                f"{prefix}.renew-deadline ({self.renew_deadline:g} s): the leader renews every retry-period"
            )
        if not self.renew_deadline < self.lease_duration:
            raise ConfigurationError(
                f"{prefix}.renew-deadline ({self.renew_deadline:g} s) must be shorter than "
                f"{prefix}.lease-duration ({self.lease_duration:g} s): a leader that cannot renew must step "
                "down before a standby may take its lease"
            )

    @classmethod
    def from_configuration(cls, config: Configuration) -> LeaderElectionConfiguration:
        return cls(
            lease_duration=config.get_seconds(cfg.HA_LEASE_DURATION),
            renew_deadline=config.get_seconds(cfg.HA_RENEW_DEADLINE),
            retry_period=config.get_seconds(cfg.HA_RETRY_PERIOD),
        )


class LeaderState:
    """Whether we lead, and until when we may without another successful renewal."""

    def __init__(self, config: LeaderElectionConfiguration) -> None:
        self.config = config
        self.lease: LeaderLease | None = None
        self.valid_until = 0.0  # monotonic seconds

    @property
    def is_leader(self) -> bool:
        return self.lease is not None

    def acquired(self, lease: LeaderLease, attempt_started: float) -> None:
        self.lease = lease
        self.valid_until = attempt_started + self.config.renew_deadline

    def renewed(self, attempt_started: float) -> None:
        # max(): a slow renewal that started before a later quick one must not shorten it.
        self.valid_until = max(self.valid_until, attempt_started + self.config.renew_deadline)

    def must_revoke(self, now: float) -> bool:
        return self.lease is not None and now >= self.valid_until

    def revoked(self) -> None:
        self.lease = None
        self.valid_until = 0.0


class LeaderElectionService:
    """Contends for the lease, renews it while leading, steps down when it cannot."""

    def __init__(
        self,
        store: LeaseStore,
        contender_id: str,
        config: LeaderElectionConfiguration,
        addresses: Callable[[], tuple[str, str]],
        on_grant: Callable[[LeaderLease], None],
        on_revoke: Callable[[LeaderLease, str], None],
        on_leader_seen: Callable[[LeaderLease | None], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """addresses: () -> (rpc address, REST URL) of this contender, read at each attempt.
        on_leader_seen: the lease as read by a standby (who leads now), for its REST proxy."""
        self.store = store
        self.contender_id = contender_id
        self.config = config
        self.state = LeaderState(config)
        self._addresses = addresses
        self._on_grant = on_grant
        self._on_revoke = on_revoke
        self._on_leader_seen = on_leader_seen
        self._clock = clock
        self._lock = threading.Lock()  # state changes: the loop and the deadline timer
        self._stopped = threading.Event()
        self._deadline: threading.Timer | None = None
        self._thread = threading.Thread(target=self._run, name=f"leader-election-{contender_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        """Stop contending; a leader gives its lease up (release) so a standby takes over
        at once instead of after lease-duration."""
        self._stopped.set()
        self._thread.join(timeout=self.config.renew_deadline)
        with self._lock:
            lease = self.state.lease
            self.state.revoked()
            self._cancel_deadline()
        if release and lease is not None:
            try:
                self.store.release(lease)
            except Exception as exc:  # the lease then expires by itself
                log.warning(
                    "Could not release the leader lease (it expires in %g s): %s", self.config.lease_duration, exc
                )

    def step_down(self, lease: LeaderLease, reason: str) -> None:
        """The leader cannot act as one (it failed to take up its jobs): revoke now; the
        loop contends again at its next attempt, as any standby."""
        self._revoke(lease, reason)

    # -- the loop ----------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopped.is_set():
            self.run_once()
            self._stopped.wait(self.config.retry_period)

    def run_once(self) -> None:
        """One attempt: renew when leading, else try to take the lease."""
        started = self._clock()
        lease = self.state.lease
        try:
            if lease is not None:
                self._renew(lease, started)
            else:
                self._contend(started)
        except Exception as exc:  # the database is unreachable: try again; the deadline decides
            log.warning("Leader election on %s: %s", self.store.cluster_id, exc)

    def _contend(self, started: float) -> None:
        rpc_address, rest_url = self._addresses()
        lease = self.store.try_acquire(self.contender_id, rpc_address, rest_url, self.config.lease_duration)
        if lease is None:
            if self._on_leader_seen is not None:
                self._on_leader_seen(self.store.read())
            return
        log.info(
            "%s was granted leadership of %s with fencing token %d.", self.contender_id, lease.cluster_id, lease.token
        )
        with self._lock:
            if self._stopped.is_set():
                return
            self.state.acquired(lease, started)
            self._arm_deadline()
            self._on_grant(lease)  # under the lock: a revoke is never handed on before its grant

    def _renew(self, lease: LeaderLease, started: float) -> None:
        _, rest_url = self._addresses()
        renewed = self.store.renew(lease, rest_url)
        with self._lock:
            if self.state.lease is not lease:
                return  # revoked meanwhile (the deadline passed while the renewal hung)
            if renewed:
                self.state.renewed(started)
                self._arm_deadline()
                return
        self._revoke(lease, f"the leader lease (fencing token {lease.token}) was taken or released by another")

    # -- the renew deadline ------------------------------------------------------------------------

    def _arm_deadline(self) -> None:
        """(Under the lock.) A timer that revokes at the renew deadline, independent of a
        renewal that hangs on the database."""
        self._cancel_deadline()
        lease = self.state.lease
        timer = threading.Timer(max(self.state.valid_until - self._clock(), 0.0), self._deadline_passed, (lease,))
        timer.daemon = True
        self._deadline = timer
        timer.start()

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _deadline_passed(self, lease: LeaderLease) -> None:
        with self._lock:
            if self.state.lease is not lease or not self.state.must_revoke(self._clock()):
                return
        self._revoke(
            lease,
            f"no successful renewal of the leader lease within "
            f"high-availability.database.leader-election.renew-deadline ({self.config.renew_deadline:g} s)",
        )

    def _revoke(self, lease: LeaderLease, reason: str) -> None:
        with self._lock:
            if self.state.lease is not lease:
                return
            self.state.revoked()
            self._cancel_deadline()
            log.warning("%s lost leadership of %s: %s", self.contender_id, lease.cluster_id, reason)
            # Under the lock: handed on before a grant that may follow (the loop contends
            # again at once), so whoever receives them sees them in order.
            self._on_revoke(lease, reason)
