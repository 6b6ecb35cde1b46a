"""Heartbeat monitors (heartbeat/manager.py): time is passed in, so every timeline is exact."""

from __future__ import annotations

from flink_runtime.heartbeat import HeartbeatManager, HeartbeatManagerSender

TIMEOUT = 3.0


class Listener:
    def __init__(self) -> None:
        self.timeouts: list[str] = []
        self.payloads: list[tuple[str, object]] = []

    def notify_heartbeat_timeout(self, resource_id: str) -> None:
        self.timeouts.append(resource_id)

    def report_payload(self, resource_id: str, payload: object) -> None:
        self.payloads.append((resource_id, payload))


def manager() -> tuple[HeartbeatManager[object], Listener]:
    listener = Listener()
    return HeartbeatManager(TIMEOUT, listener), listener


def test_a_silent_target_times_out_once_after_the_timeout() -> None:
    heartbeats, listener = manager()
    heartbeats.monitor_target("tm-1", now=100.0)
    assert heartbeats.check_timeouts(now=103.0) == []  # exactly the timeout: not yet
    assert listener.timeouts == []
    assert heartbeats.check_timeouts(now=103.1) == ["tm-1"]
    assert listener.timeouts == ["tm-1"]
    assert heartbeats.check_timeouts(now=200.0) == []  # reported once, not on every check
    assert listener.timeouts == ["tm-1"]


def test_each_heartbeat_resets_the_timeout_and_reports_its_payload() -> None:
    heartbeats, listener = manager()
    heartbeats.monitor_target("tm-1", now=0.0)
    assert heartbeats.receive_heartbeat("tm-1", {"running": ["a"]}, now=2.5)
    assert heartbeats.receive_heartbeat("tm-1", {"running": []}, now=5.0)
    assert heartbeats.check_timeouts(now=7.9) == []  # 2.9 s after the last one
    assert listener.payloads == [("tm-1", {"running": ["a"]}), ("tm-1", {"running": []})]
    assert heartbeats.last_heartbeat_from("tm-1") == 5.0
    assert heartbeats.check_timeouts(now=8.1) == ["tm-1"]


def test_a_heartbeat_without_payload_resets_the_timeout_and_reports_nothing() -> None:
    heartbeats, listener = manager()
    heartbeats.monitor_target("jm", now=0.0)
    heartbeats.receive_heartbeat("jm", None, now=2.0)
    assert heartbeats.check_timeouts(now=4.0) == []
    assert listener.payloads == []


def test_a_late_answer_does_not_move_the_last_heartbeat_back() -> None:
    heartbeats, _ = manager()
    heartbeats.monitor_target("tm-1", now=0.0)
    heartbeats.receive_heartbeat("tm-1", None, now=5.0)
    heartbeats.receive_heartbeat("tm-1", None, now=4.0)
    assert heartbeats.last_heartbeat_from("tm-1") == 5.0


def test_an_unmonitored_target_never_times_out_and_its_heartbeats_are_ignored() -> None:
    heartbeats, listener = manager()
    heartbeats.monitor_target("tm-1", now=0.0)
    heartbeats.monitor_target("tm-2", now=0.0)
    heartbeats.unmonitor_target("tm-1")
    assert not heartbeats.is_monitored("tm-1")
    assert not heartbeats.receive_heartbeat("tm-1", "payload", now=1.0)
    assert heartbeats.check_timeouts(now=10.0) == ["tm-2"]
    assert listener.timeouts == ["tm-2"]
    assert listener.payloads == []
    heartbeats.unmonitor_target("never-monitored")  # no error


def test_a_timed_out_target_is_not_revived_by_a_late_heartbeat() -> None:
    heartbeats, listener = manager()
    heartbeats.monitor_target("tm-1", now=0.0)
    heartbeats.check_timeouts(now=4.0)
    assert not heartbeats.receive_heartbeat("tm-1", "late", now=4.1)
    assert listener.payloads == []
    # Monitoring it again (it registered anew) starts a fresh timeout.
    heartbeats.monitor_target("tm-1", now=10.0)
    assert heartbeats.receive_heartbeat("tm-1", "fresh", now=11.0)
    assert heartbeats.check_timeouts(now=13.0) == []
    assert listener.payloads == [("tm-1", "fresh")]


def test_the_sender_requests_every_live_target_with_the_request_time() -> None:
    requested: list[tuple[str, float]] = []
    listener = Listener()
    heartbeats: HeartbeatManagerSender[object] = HeartbeatManagerSender(
        TIMEOUT, listener, lambda resource_id, now: requested.append((resource_id, now))
    )
    heartbeats.monitor_target("tm-1", now=0.0)
    heartbeats.monitor_target("tm-2", now=2.0)
    heartbeats.request_heartbeats(now=2.5)
    assert sorted(requested) == [("tm-1", 2.5), ("tm-2", 2.5)]
    requested.clear()
    heartbeats.check_timeouts(now=3.5)  # tm-1 is given up: no more requests to it
    heartbeats.request_heartbeats(now=4.0)
    assert requested == [("tm-2", 4.0)]
