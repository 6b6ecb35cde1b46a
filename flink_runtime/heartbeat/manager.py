"""Heartbeat monitors, modelled on Flink's HeartbeatManagerImpl and HeartbeatMonitorImpl.

One HeartbeatMonitor per target (a TaskManager's resource id on the JobManager, the
JobManager's id on a TaskManager) remembers when that target was last heard from.
Every heartbeat received from it resets its timeout and hands its payload to the
HeartbeatListener; a target not heard from for `heartbeat.timeout` is reported once
through `notify_heartbeat_timeout`, and stays timed out until it is unmonitored (the
listener normally does that: it unregisters the target).

Unlike Flink's, these classes own no threads or timers and read no clock: every call
that depends on time takes `now` (seconds, from the caller's monotonic clock). The
endpoint that owns a manager drives it from its mailbox (RpcEndpoint.schedule_every),
so its state is touched only there and a unit test can play any timeline.

HeartbeatManagerSender is the requesting side (Flink's HeartbeatManagerSenderImpl: the
JobManager asks every TaskManager every `heartbeat.interval`); the TaskManager only
answers requests, so it uses a plain HeartbeatManager to watch its JobManager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

P = TypeVar("P")
P_contra = TypeVar("P_contra", contravariant=True)


class HeartbeatListener(Protocol[P_contra]):
    """Told what the heartbeats of monitored targets bring, or that they stopped."""

    def notify_heartbeat_timeout(self, resource_id: str) -> None:
        """`resource_id` was not heard from for the manager's timeout."""
        ...

    def report_payload(self, resource_id: str, payload: P_contra) -> None:
        """A heartbeat from `resource_id` carried `payload`."""
        ...


class HeartbeatMonitor:
    """When one target was last heard from, and whether it timed out."""

    def __init__(self, resource_id: str, timeout: float, now: float) -> None:
        self.resource_id = resource_id
        self.timeout = timeout
        # Being monitored counts as being heard from: the timeout runs from here.
        self.last_heartbeat = now
        self.timed_out = False

    def report_heartbeat(self, now: float) -> None:
        # A late answer to an older request must not move the time back.
        self.last_heartbeat = max(self.last_heartbeat, now)

    def silent_for(self, now: float) -> float:
        return now - self.last_heartbeat

    def is_overdue(self, now: float) -> bool:
        return self.silent_for(now) > self.timeout


class HeartbeatManager(Generic[P]):
    """The monitors of one endpoint's targets; the receiving side of heartbeats."""

    def __init__(self, timeout: float, listener: HeartbeatListener[P]) -> None:
        self.timeout = timeout
        self.listener = listener
        self._monitors: dict[str, HeartbeatMonitor] = {}

    def monitor_target(self, resource_id: str, now: float) -> HeartbeatMonitor:
        """Start watching `resource_id` (again, from `now`, if it was watched already)."""
        monitor = HeartbeatMonitor(resource_id, self.timeout, now)
        self._monitors[resource_id] = monitor
        return monitor

    def unmonitor_target(self, resource_id: str) -> None:
        self._monitors.pop(resource_id, None)

    def is_monitored(self, resource_id: str) -> bool:
        return resource_id in self._monitors

    @property
    def monitored_targets(self) -> list[str]:
        return list(self._monitors)

    def last_heartbeat_from(self, resource_id: str) -> float | None:
        monitor = self._monitors.get(resource_id)
        return monitor.last_heartbeat if monitor is not None else None

    def receive_heartbeat(self, resource_id: str, payload: P | None, now: float) -> bool:
        """A heartbeat from `resource_id`: reset its timeout, report its payload (if
        any). Ignored, and False, for a target not monitored or already timed out:
        its listener has given it up, and a late answer must not revive it."""
        monitor = self._monitors.get(resource_id)
        if monitor is None or monitor.timed_out:
            return False
        monitor.report_heartbeat(now)
        if payload is not None:
            self.listener.report_payload(resource_id, payload)
        return True

    def check_timeouts(self, now: float) -> list[str]:
        """Notify the listener of every target silent for longer than the timeout, once
        each; returns their ids."""
        timed_out = []
        for monitor in list(self._monitors.values()):
            if monitor.timed_out or not monitor.is_overdue(now):
                continue
            monitor.timed_out = True
            timed_out.append(monitor.resource_id)
            self.listener.notify_heartbeat_timeout(monitor.resource_id)
        return timed_out


class HeartbeatManagerSender(HeartbeatManager[P]):
    """A HeartbeatManager that also requests the heartbeats: `request_heartbeats`, run
    every `heartbeat.interval`, calls `request_heartbeat(resource_id, now)` for every
    monitored target that has not timed out. Sending (an RPC) is the caller's: the
    answer comes back through `receive_heartbeat` with the request's time in its
    payload if the listener needs it."""

    def __init__(
        self, timeout: float, listener: HeartbeatListener[P], request_heartbeat: Callable[[str, float], None]
    ) -> None:
        super().__init__(timeout, listener)
        self._request_heartbeat = request_heartbeat

    def request_heartbeats(self, now: float) -> None:
        for resource_id in [m.resource_id for m in self._monitors.values() if not m.timed_out]:
            self._request_heartbeat(resource_id, now)
