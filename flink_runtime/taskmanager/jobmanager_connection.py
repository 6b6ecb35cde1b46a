"""How a TaskManager stays connected to its JobManager: registration, probing and losing it.

Registration retries with back-off until the JobManager accepts it (registration/:
timeouts doubling from cluster.registration.initial-timeout up to .max-timeout, a
pause of .refused-registration-delay after a refusal and of .error-delay after an
error). The registration is a child the TaskExecutor supervises: should its loop
itself fail, it is restarted. Once registered, the JobManager's heartbeats are
watched: when they stop for heartbeat.timeout the TaskManager takes the JobManager
for lost (heartbeat/), cancels its tasks and registers again, so a restarted
JobManager gets its TaskManagers back without anyone restarting them. A dropped
connection is probed at once instead of waiting out that timeout.

With standby JobManagers (high-availability.type: database) the TaskManager does not
take jobmanager.rpc.address for the JobManager: it reads the leader lease from the job
store's database every retry-period (highavailability/leader_retrieval.py), registers
with its holder, and registers anew whenever the holder changes. The new leader's
fencing token then differs, so tasks of the old leader are cancelled on registration.

`JobManagerConnection` is a component of the TaskExecutor: it owns the JobManager's
address and id, the registration, the probe, the leader retrieval and the heartbeat
monitor; it tells the TaskExecutor what happened through a `JobManagerListener`
(registered with a JobManager, JobManager lost), and runs in the TaskExecutor's mailbox.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.heartbeat import HeartbeatManager
from flink_runtime.highavailability.lease_store import LeaderLease
from flink_runtime.registration import RegistrationSuccess, RetryingRegistration, RetryingRegistrationConfiguration
from flink_runtime.rpc.messages import DisconnectTaskManager, RegisterTaskManager
from flink_runtime.rpc.supervision import Supervisor, supervise
from flink_runtime.taskmanager.errors import CommandRefused
from flink_runtime.taskmanager.mailbox import Mailbox, Transport

log = logging.getLogger(__name__)


class JobManagerListener(Protocol):
    """What the connection tells its TaskExecutor (both run in its mailbox)."""

    def jobmanager_registered(self, jobmanager_id: str) -> None:
        """Registered with `jobmanager_id` (anew, or again after a probe or a new leader)."""
        ...

    def jobmanager_lost(self, jobmanager_id: str) -> None:
        """No heartbeat from `jobmanager_id` for heartbeat.timeout; registering again."""
        ...


class LeaderSource(Protocol):
    """Who leads now (highavailability/leader_retrieval.py's LeaderRetriever); read on a thread."""

    def leader(self) -> LeaderLease | None: ...

    def close(self) -> None: ...


class JobManagerConnection:
    """The TaskExecutor's side of registration and JobManager liveness."""

    def __init__(
        self,
        config: Configuration,
        jobmanager_address: str,
        mailbox: Mailbox,
        transport: Transport,
        supervisor: Supervisor,
        registration_request: Callable[[], RegisterTaskManager],
        listener: JobManagerListener,
        *,
        name: str,
        leader_source: LeaderSource | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """name: the TaskManager's resource id (in logs and DisconnectTaskManager);
        leader_source: with standby JobManagers, where the leader is read (else the
        JobManager is `jobmanager_address`)."""
        self._config = config
        self._mailbox = mailbox
        self._transport = transport
        self._supervisor = supervisor
        self._registration_request = registration_request
        self._listener = listener
        self._name = name
        self._leader_source = leader_source
        self._clock = clock
        self.jobmanager_address = jobmanager_address
        self.jobmanager_id: str | None = None
        # The JobManager's REST URL (from its registration answer): where job libraries come from.
        self.jobmanager_rest_url = ""
        self.registered = asyncio.Event()
        self.registration_config = RetryingRegistrationConfiguration.from_configuration(config)
        self.heartbeat_timeout = config.get_seconds(cfg.HEARTBEAT_TIMEOUT)
        self._registration: RetryingRegistration | None = None
        self._probe: RetryingRegistration | None = None
        self.leader_token_and_address: tuple[int, str] | None = None
        self._looking_for_leader = False
        # Watches the JobManager this TaskManager is registered with (its id is the target).
        self.heartbeats: HeartbeatManager[None] = HeartbeatManager(self.heartbeat_timeout, _HeartbeatListener(self))

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self._leader_source is not None:
            self._start_leader_retrieval(self._leader_source)
        else:
            self.start_registration()
        self._mailbox.schedule_every(
            self._config.get_seconds(cfg.HEARTBEAT_INTERVAL) / 2,
            lambda: self.heartbeats.check_timeouts(self._clock()),
        )

    def stop(self, reason: str) -> None:
        if self._leader_source is not None:
            self._leader_source.close()
        if self.jobmanager_id is not None:
            # Tell the JobManager at once instead of letting it wait for a heartbeat timeout.
            self._transport.tell(
                self.jobmanager_address, DisconnectTaskManager(task_manager_id=self._name, reason=reason)
            )

    # -- what the JobManager sends ---------------------------------------------------------------

    def heartbeat_received(self, jobmanager_id: str) -> None:
        if jobmanager_id == self.jobmanager_id:
            self.heartbeats.receive_heartbeat(jobmanager_id, None, self._clock())

    def check_fencing(self, message_type: str, sender_jobmanager_id: str) -> None:
        """CommandRefused when a JobManager's command is to be ignored: its sender is not
        the JobManager this TaskManager is registered with (a deposed leader, or one it left)."""
        if not sender_jobmanager_id or sender_jobmanager_id == self.jobmanager_id:
            return
        reason = (
            f"FencingTokenException: {message_type} from JobManager {sender_jobmanager_id}, but "
            f"TaskManager {self._name} is registered with {self.jobmanager_id or 'none'}"
        )
        log.warning("%s: ignored", reason)
        raise CommandRefused(reason)

    # -- registration ------------------------------------------------------------------------------

    def start_registration(self) -> None:
        """Register from scratch; until accepted this TaskManager takes no tasks."""
        self.jobmanager_id = None
        self.registered.clear()
        self._stop_watching_jobmanager()
        if self._probe is not None:  # the registration takes over from it
            self._probe.cancel()
            self._probe = None
        if self._registration is None:
            registration = self._registration = self._retrying_registration()
            self._mailbox.run_async(
                registration.run(), lambda answer, error: self._registration_ended(registration, answer, error)
            )

    def _retrying_registration(self) -> RetryingRegistration:
        return RetryingRegistration(
            self.jobmanager_address,
            self._transport.ask,
            self._registration_request,
            self.registration_config,
            name=self._name,
        )

    def _registration_ended(
        self, registration: RetryingRegistration, answer: RegistrationSuccess | None, error: BaseException | None
    ) -> None:
        if registration is not self._registration:
            return
        self._registration = None
        if error is not None or answer is None:
            # Every attempt's error is retried inside the loop: this is the loop itself failing.
            supervise(
                self._supervisor,
                _RegistrationChild(self),
                error or RuntimeError("registration ended without an answer"),
            )
            return
        self._on_registered(answer)

    def _on_registered(self, answer: RegistrationSuccess) -> None:
        self.jobmanager_id = answer.jobmanager_id
        self.jobmanager_rest_url = answer.rest_url or self._configured_rest_url()
        self._stop_watching_jobmanager()
        self.heartbeats.monitor_target(answer.jobmanager_id, self._clock())
        # Before `registered` is set: tasks of a JobManager that is gone are cancelled first.
        self._listener.jobmanager_registered(answer.jobmanager_id)
        self.registered.set()
        log.info("%s registered at JobManager %s (%s)", self._name, answer.jobmanager_id, type(answer).__name__)

    def _configured_rest_url(self) -> str:
        """For a JobManager that answered without its REST URL (it registered us before its
        REST API was up): rest.address if set, else the JobManager's host, at rest.port."""
        config = self._config
        port = config.get(cfg.REST_PORT)
        if not port:
            return ""
        host = config.get(cfg.REST_ADDRESS) if cfg.REST_ADDRESS.key in config else None
        scheme = "https" if config.get(cfg.SSL_REST_ENABLED) else "http"
        return f"{scheme}://{host or config.get(cfg.JOBMANAGER_RPC_ADDRESS)}:{port}"

    # -- a dropped connection --------------------------------------------------------------------

    def connection_lost(self, address: str) -> None:
        """The connection to the JobManager dropped: ask it at once whether it still knows
        this TaskManager instead of waiting out heartbeat.timeout.

        A JobManager restarted on the same address (killed, then recovered from the job
        store) answers the registration with its new id, and the listener cancels the
        dead one's tasks: recovery starts within a second of the successor being up,
        not after heartbeat.timeout. The one that was only disconnected answers
        AlreadyRegistered and nothing changes. The probe is a registration like any
        other, retried until answered or until the heartbeat timeout gives the
        JobManager up and a regular registration takes over (it cancels the probe)."""
        if address != self.jobmanager_address or self.jobmanager_id is None or self._probe is not None:
            return
        known = self.jobmanager_id
        probe = self._probe = self._retrying_registration()
        self._mailbox.run_async(probe.run(), lambda answer, error: self._probe_ended(probe, known, answer, error))

    def _probe_ended(
        self,
        probe: RetryingRegistration,
        known: str,
        answer: RegistrationSuccess | None,
        error: BaseException | None,
    ) -> None:
        if probe is not self._probe:
            return
        self._probe = None
        if error is not None or answer is None:
            # Harmless: the heartbeat timeout still notices a JobManager that is gone.
            log.warning("%s: probing JobManager %s failed: %s", self._name, known, error)
        elif self.jobmanager_id == known:
            self._on_registered(answer)

    # -- heartbeats ------------------------------------------------------------------------------

    def _stop_watching_jobmanager(self) -> None:
        for jobmanager_id in self.heartbeats.monitored_targets:
            self.heartbeats.unmonitor_target(jobmanager_id)

    def _heartbeat_timed_out(self, jobmanager_id: str) -> None:
        if jobmanager_id != self.jobmanager_id:
            return
        last = self.heartbeats.last_heartbeat_from(jobmanager_id)
        log.warning(
            "%s: no heartbeat from JobManager %s for %.1f s; cancelling its tasks and registering again",
            self._name,
            jobmanager_id,
            self._clock() - last if last is not None else self.heartbeat_timeout,
        )
        self._listener.jobmanager_lost(jobmanager_id)
        self.start_registration()

    # -- leader retrieval (standby JobManagers) ---------------------------------------------------

    def _start_leader_retrieval(self, source: LeaderSource) -> None:
        """Register with whoever holds the leader lease, now and at every change."""
        self._look_for_leader(source)
        self._mailbox.schedule_every(
            self._config.get_seconds(cfg.HA_RETRY_PERIOD), lambda: self._look_for_leader(source)
        )

    def _look_for_leader(self, source: LeaderSource) -> None:
        if self._looking_for_leader:
            return  # the last read has not come back (a slow database): no pile of threads
        self._looking_for_leader = True
        self._mailbox.run_async(asyncio.to_thread(source.leader), self._leader_seen)

    def _leader_seen(self, lease: LeaderLease | None, error: BaseException | None) -> None:
        self._looking_for_leader = False
        if error is not None or lease is None or not lease.rpc_address:
            return  # nobody leads right now (or the database did not answer): look again later
        if (lease.token, lease.rpc_address) == self.leader_token_and_address:
            return
        log.info("%s: the leading JobManager is %s; registering there", self._name, lease.describe())
        self.leader_token_and_address = (lease.token, lease.rpc_address)
        self.jobmanager_address = lease.rpc_address
        for running in (self._registration, self._probe):
            if running is not None:
                running.cancel()
        self._registration = self._probe = None
        self.start_registration()


class _HeartbeatListener:
    """The connection's HeartbeatListener (Flink's JobManagerHeartbeatListener): the
    JobManager's heartbeat requests carry no payload; their absence is what matters."""

    def __init__(self, connection: JobManagerConnection) -> None:
        self._connection = connection

    def notify_heartbeat_timeout(self, resource_id: str) -> None:
        self._connection._heartbeat_timed_out(resource_id)

    def report_payload(self, resource_id: str, payload: None) -> None:
        pass


class _RegistrationChild:
    """The registration as a supervised child: a loop that failed (a bug; each attempt's
    own errors are retried inside it) is started afresh after cluster.registration.error-delay,
    so a TaskManager never stays unregistered."""

    def __init__(self, connection: JobManagerConnection) -> None:
        self._connection = connection
        self.name = f"TaskExecutor {connection._name} registration"

    def restart(self, error: BaseException) -> None:
        connection = self._connection
        connection._mailbox.schedule_once(connection.registration_config.error_delay, connection.start_registration)
