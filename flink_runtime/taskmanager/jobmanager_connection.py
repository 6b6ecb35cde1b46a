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

`JobManagerConnection` is part of the TaskExecutor (a mixin: it shares its state and
runs in its mailbox).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from flink_runtime import configuration as cfg
from flink_runtime.highavailability.leader_retrieval import LeaderRetriever
from flink_runtime.highavailability.lease_store import LeaderLease
from flink_runtime.registration import RegistrationSuccess, RetryingRegistration
from flink_runtime.rpc.messages import RegisterTaskManager
from flink_runtime.rpc.supervision import supervise
from flink_runtime.taskmanager.resources import task_manager_resources

if TYPE_CHECKING:
    from flink_runtime.taskmanager.taskexecutor import TaskExecutor

log = logging.getLogger(__name__)


class JobManagerConnection:
    """The TaskExecutor's side of registration and JobManager liveness."""

    def _start_registration(self: TaskExecutor) -> None:
        """Register from scratch; until accepted this TaskManager takes no tasks."""
        self.jobmanager_id = None
        self.registered.clear()
        self._stop_watching_jobmanager()
        if self._probe is not None:  # the registration takes over from it
            self._probe.cancel()
            self._probe = None
        if self._registration is None:
            registration = self._registration = self._retrying_registration()
            self.run_async(
                registration.run(), lambda answer, error: self._registration_ended(registration, answer, error)
            )

    def _start_leader_retrieval(self: TaskExecutor, retriever: LeaderRetriever) -> None:
        """Register with whoever holds the leader lease, now and at every change."""
        self._look_for_leader(retriever)
        self.schedule_every(self.config.get_seconds(cfg.HA_RETRY_PERIOD), lambda: self._look_for_leader(retriever))

    def _look_for_leader(self: TaskExecutor, retriever: LeaderRetriever) -> None:
        if self._looking_for_leader:
            return  # the last read has not come back (a slow database): no pile of threads
        self._looking_for_leader = True
        self.run_async(asyncio.to_thread(retriever.leader), self._leader_seen)

    def _leader_seen(self: TaskExecutor, lease: LeaderLease | None, error: BaseException | None) -> None:
        self._looking_for_leader = False
        if error is not None or lease is None or not lease.rpc_address:
            return  # nobody leads right now (or the database did not answer): look again later
        if (lease.token, lease.rpc_address) == self.leader_token_and_address:
            return
        log.info("%s: the leading JobManager is %s; registering there", self.resource_id, lease.describe())
        self.leader_token_and_address = (lease.token, lease.rpc_address)
        self.jobmanager_address = lease.rpc_address
        for running in (self._registration, self._probe):
            if running is not None:
                running.cancel()
        self._registration = self._probe = None
        self._start_registration()

    def _retrying_registration(self: TaskExecutor) -> RetryingRegistration:
        return RetryingRegistration(
            self.jobmanager_address,
            self.rpc.ask,
            self._registration_request,
            self.registration_config,
            name=self.resource_id,
        )

    def _registration_ended(
        self: TaskExecutor,
        registration: RetryingRegistration,
        answer: RegistrationSuccess | None,
        error: BaseException | None,
    ) -> None:
        if registration is not self._registration:
            return
        self._registration = None
        if error is not None or answer is None:
            # Every attempt's error is retried inside the loop: this is the loop itself failing.
            supervise(self, _RegistrationChild(self), error or RuntimeError("registration ended without an answer"))
            return
        self._on_registered(answer)

    def _registration_request(self: TaskExecutor) -> RegisterTaskManager:
        return RegisterTaskManager(
            task_manager_id=self.resource_id,
            address=self.address,
            host=self.host,
            slots=self.slots,
            resources=task_manager_resources(self.config, self.slots),
            secret=self.cluster_secret,
        )

    def _on_registered(self: TaskExecutor, answer: RegistrationSuccess) -> None:
        self.jobmanager_id = answer.jobmanager_id
        # Tasks of a JobManager that is gone: the new one refuses whatever they report and
        # may already run their job again from its latest checkpoint.
        for task in self.tasks.values():
            if task.descriptor.jobmanager_id != answer.jobmanager_id:
                log.warning(
                    "%s: cancelling %s, deployed by JobManager %s (now registered with %s)",
                    self.resource_id,
                    task.descriptor.task_name,
                    task.descriptor.jobmanager_id,
                    answer.jobmanager_id,
                )
                task.cancel()
        self.jobmanager_rest_url = answer.rest_url or self._configured_rest_url()
        self._stop_watching_jobmanager()
        self.jobmanager_heartbeats.monitor_target(answer.jobmanager_id, time.monotonic())
        self.registered.set()
        log.info(
            "%s registered at JobManager %s (%s)",
            self.resource_id,
            answer.jobmanager_id,
            type(answer).__name__,
        )

    def _on_connection_lost(self: TaskExecutor, address: str) -> None:
        """The connection to the JobManager dropped: ask it at once whether it still knows
        this TaskManager instead of waiting out heartbeat.timeout.

        A JobManager restarted on the same address (killed, then recovered from the job
        store) answers the registration with its new id, and _on_registered cancels the
        dead one's tasks: recovery starts within a second of the successor being up,
        not after heartbeat.timeout. The one that was only disconnected answers
        AlreadyRegistered and nothing changes. The probe is a registration like any
        other, retried until answered or until the heartbeat timeout gives the
        JobManager up and a regular registration takes over (it cancels the probe)."""
        if address != self.jobmanager_address or self.jobmanager_id is None or self._probe is not None:
            return
        known = self.jobmanager_id
        probe = self._probe = self._retrying_registration()
        self.run_async(probe.run(), lambda answer, error: self._probe_ended(probe, known, answer, error))

    def _probe_ended(
        self: TaskExecutor,
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
            log.warning("%s: probing JobManager %s failed: %s", self.resource_id, known, error)
        elif self.jobmanager_id == known:
            self._on_registered(answer)

    def _configured_rest_url(self: TaskExecutor) -> str:
        """For a JobManager that answered without its REST URL (it registered us before its
        REST API was up): rest.address if set, else the JobManager's host, at rest.port."""
        port = self.config.get(cfg.REST_PORT)
        if not port:
            return ""
        host = self.config.get(cfg.REST_ADDRESS) if cfg.REST_ADDRESS.key in self.config else None
        scheme = "https" if self.config.get(cfg.SSL_REST_ENABLED) else "http"
        return f"{scheme}://{host or self.config.get(cfg.JOBMANAGER_RPC_ADDRESS)}:{port}"

    def _stop_watching_jobmanager(self: TaskExecutor) -> None:
        for jobmanager_id in self.jobmanager_heartbeats.monitored_targets:
            self.jobmanager_heartbeats.unmonitor_target(jobmanager_id)

    def _jobmanager_lost(self: TaskExecutor, jobmanager_id: str) -> None:
        """No heartbeat from the JobManager for heartbeat.timeout (_JobManagerHeartbeatListener)."""
        if jobmanager_id != self.jobmanager_id:
            return
        last = self.jobmanager_heartbeats.last_heartbeat_from(jobmanager_id)
        log.warning(
            "%s: no heartbeat from JobManager %s for %.1f s; cancelling %d tasks and registering again",
            self.resource_id,
            jobmanager_id,
            time.monotonic() - last if last is not None else self.heartbeat_timeout,
            len(self.tasks),
        )
        for task in self.tasks.values():
            task.cancel()
        self._start_registration()


class JobManagerHeartbeatListener:
    """The TaskExecutor's HeartbeatListener (Flink's JobManagerHeartbeatListener): the
    JobManager's heartbeat requests carry no payload; their absence is what matters."""

    def __init__(self, taskexecutor: TaskExecutor) -> None:
        self._taskexecutor = taskexecutor

    def notify_heartbeat_timeout(self, resource_id: str) -> None:
        self._taskexecutor._jobmanager_lost(resource_id)

    def report_payload(self, resource_id: str, payload: None) -> None:
        pass


class _RegistrationChild:
    """The registration as the child the TaskExecutor supervises: a loop that failed
    (a bug; each attempt's own errors are retried inside it) is started afresh after
    cluster.registration.error-delay, so a TaskManager never stays unregistered."""

    def __init__(self, taskexecutor: TaskExecutor) -> None:
        self._taskexecutor = taskexecutor
        self.name = f"{taskexecutor.name} registration"

    def restart(self, error: BaseException) -> None:
        taskexecutor = self._taskexecutor
        taskexecutor.schedule_once(taskexecutor.registration_config.error_delay, taskexecutor._start_registration)
