"""JobManagerConnection (taskmanager/jobmanager_connection.py) alone: a fake mailbox,
transport, clock, supervisor and leader source; no sockets, no TaskExecutor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.highavailability.lease_store import LeaderLease
from flink_runtime.registration import NextAttempt, retrying
from flink_runtime.rpc.messages import (
    AcknowledgeRegistration,
    AlreadyRegistered,
    DisconnectTaskManager,
    Message,
    RefuseRegistration,
    RegisterTaskManager,
)
from flink_runtime.taskmanager.errors import CommandRefused
from flink_runtime.taskmanager.jobmanager_connection import JobManagerConnection
from tests.unit.taskexecutor_fakes import FakeClock, FakeMailbox, FakeTransport, RestartingSupervisor

JM_ADDRESS = "tcp://jm:6123"


@dataclass
class Listener:
    events: list[tuple[str, str]] = field(default_factory=list)
    registered_when_told: list[bool] = field(default_factory=list)
    connection: JobManagerConnection | None = None

    def jobmanager_registered(self, jobmanager_id: str) -> None:
        self.events.append(("registered", jobmanager_id))
        assert self.connection is not None
        self.registered_when_told.append(self.connection.registered.is_set())

    def jobmanager_lost(self, jobmanager_id: str) -> None:
        self.events.append(("lost", jobmanager_id))


class JobManagers:
    """Who answers at which address: the id of the JobManager there (a restart changes it)."""

    def __init__(self) -> None:
        self.ids = {JM_ADDRESS: "jm-1"}
        self.known: set[tuple[str, str]] = set()

    def answer(self, address: str, message: Message) -> Message:
        assert isinstance(message, RegisterTaskManager)
        jobmanager_id = self.ids[address]
        if (jobmanager_id, message.task_manager_id) in self.known:
            return AlreadyRegistered(registration_id="r", jobmanager_id=jobmanager_id)
        self.known.add((jobmanager_id, message.task_manager_id))
        return AcknowledgeRegistration(registration_id="r", jobmanager_id=jobmanager_id, rest_url=f"http://{address}")


@dataclass
class Harness:
    connection: JobManagerConnection
    mailbox: FakeMailbox
    transport: FakeTransport
    clock: FakeClock
    listener: Listener
    jobmanagers: JobManagers
    supervisor: RestartingSupervisor

    def registrations(self) -> list[str]:
        return [address for address, message in self.transport.asked if isinstance(message, RegisterTaskManager)]


CONFIG = {
    "heartbeat.interval": "1 s",
    "heartbeat.timeout": "5 s",
    "cluster.registration.error-delay": "2 s",
    "high-availability.retry-period": "3 s",
}


def build(leader_source: Any = None, **config: str) -> Harness:
    mailbox, clock, listener, jobmanagers = FakeMailbox(), FakeClock(), Listener(), JobManagers()
    transport = FakeTransport(jobmanagers.answer)
    supervisor = RestartingSupervisor()
    connection = JobManagerConnection(
        Configuration({**CONFIG, **config}),
        JM_ADDRESS,
        mailbox,
        transport,
        supervisor,
        lambda: RegisterTaskManager(task_manager_id="tm-1", address="tcp://tm:1", host="tm", slots=1),
        listener,
        name="tm-1",
        leader_source=leader_source,
        clock=clock,
    )
    listener.connection = connection
    return Harness(connection, mailbox, transport, clock, listener, jobmanagers, supervisor)


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    built = build()
    yield built
    await built.mailbox.close()


async def test_it_registers_and_tells_the_listener_before_it_counts_as_registered(harness: Harness) -> None:
    harness.connection.start()
    await harness.mailbox.settle()
    assert harness.registrations() == [JM_ADDRESS]
    assert harness.connection.jobmanager_id == "jm-1"
    assert harness.connection.jobmanager_rest_url == f"http://{JM_ADDRESS}"
    assert harness.connection.registered.is_set()
    assert harness.listener.events == [("registered", "jm-1")]
    assert harness.listener.registered_when_told == [False], "tasks of another JobManager go first"


async def test_a_silent_jobmanager_is_lost_after_the_heartbeat_timeout_and_registered_with_again(
    harness: Harness,
) -> None:
    harness.connection.start()
    await harness.mailbox.settle()
    harness.clock.now += 4.0
    harness.connection.heartbeat_received("jm-1")
    harness.connection.heartbeat_received("another-jm")  # not the one it is registered with: ignored
    harness.clock.now += 4.0  # 8 s since registering, 4 s since the last heartbeat
    harness.mailbox.tick()
    assert harness.listener.events == [("registered", "jm-1")]

    harness.jobmanagers.ids[JM_ADDRESS] = "jm-2"  # restarted meanwhile
    harness.clock.now += 1.5
    harness.mailbox.tick()
    assert harness.listener.events[1] == ("lost", "jm-1")
    assert not harness.connection.registered.is_set() and harness.connection.jobmanager_id is None
    await harness.mailbox.settle()
    assert harness.registrations() == [JM_ADDRESS, JM_ADDRESS]
    assert harness.listener.events[2] == ("registered", "jm-2")
    assert harness.connection.heartbeats.monitored_targets == ["jm-2"]


async def test_a_dropped_connection_is_probed_and_a_restarted_jobmanager_is_noticed_at_once(
    harness: Harness,
) -> None:
    harness.connection.start()
    await harness.mailbox.settle()
    harness.connection.connection_lost("tcp://someone-else:1")  # not the JobManager's: nothing
    await harness.mailbox.settle()
    assert harness.registrations() == [JM_ADDRESS]

    harness.connection.connection_lost(JM_ADDRESS)  # only disconnected: AlreadyRegistered, nothing changes
    await harness.mailbox.settle()
    assert harness.registrations() == [JM_ADDRESS, JM_ADDRESS]
    assert harness.listener.events == [("registered", "jm-1"), ("registered", "jm-1")]

    harness.jobmanagers.ids[JM_ADDRESS] = "jm-2"
    harness.connection.connection_lost(JM_ADDRESS)
    await harness.mailbox.settle()
    assert harness.connection.jobmanager_id == "jm-2"
    assert harness.listener.events[-1] == ("registered", "jm-2")


async def test_commands_of_another_jobmanager_are_refused_with_the_reason(harness: Harness) -> None:
    harness.connection.start()
    await harness.mailbox.settle()
    harness.connection.check_fencing("CancelTask", "jm-1")  # obeyed
    harness.connection.check_fencing("CancelTask", "")  # unfenced (an older sender): obeyed
    with pytest.raises(CommandRefused) as refused:
        harness.connection.check_fencing("TriggerCheckpoint", "old-jm")
    assert refused.value.reason == (
        "FencingTokenException: TriggerCheckpoint from JobManager old-jm, but TaskManager tm-1 is registered with jm-1"
    )


async def test_a_failed_registration_loop_is_supervised_and_restarted_after_the_error_delay(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(address: str, message: Message) -> Message:
        return RefuseRegistration(reason="not yet")

    def buggy_next_attempt(*args: Any) -> NextAttempt:
        raise ZeroDivisionError("bug in the back-off")  # the loop itself fails, not an attempt

    harness.transport.answer = refuse
    monkeypatch.setattr(retrying, "next_attempt", buggy_next_attempt)
    harness.connection.start()
    await harness.mailbox.settle()
    assert [(name, type(error)) for name, error in harness.supervisor.failed] == [
        ("TaskExecutor tm-1 registration", ZeroDivisionError)
    ]
    assert harness.connection.jobmanager_id is None
    monkeypatch.undo()
    harness.transport.answer = harness.jobmanagers.answer
    assert harness.mailbox.fire_timers() == [2.0]
    await harness.mailbox.settle()
    assert harness.connection.jobmanager_id == "jm-1"


async def test_stopping_tells_the_jobmanager_only_when_registered(harness: Harness) -> None:
    harness.connection.stop("TaskManager shut down")
    assert harness.transport.told == []
    harness.connection.start()
    await harness.mailbox.settle()
    harness.connection.stop("TaskManager shut down")
    assert harness.transport.told == [
        (JM_ADDRESS, DisconnectTaskManager(task_manager_id="tm-1", reason="TaskManager shut down"))
    ]


class Leases:
    def __init__(self) -> None:
        self.lease: LeaderLease | None = None
        self.closed = False

    def leader(self) -> LeaderLease | None:
        return self.lease

    def close(self) -> None:
        self.closed = True

    def elect(self, token: int, address: str) -> None:
        self.lease = LeaderLease("c", f"leader-{token}", token, address, "", 0.0, 0.0)


async def test_with_standby_jobmanagers_it_registers_with_each_new_leader() -> None:
    leases = Leases()
    harness = build(leader_source=leases)
    try:
        harness.connection.start()
        await harness.mailbox.settle()
        assert harness.registrations() == [], "nobody leads yet"
        harness.jobmanagers.ids.update({"tcp://a:1": "jm-a", "tcp://b:1": "jm-b"})
        leases.elect(1, "tcp://a:1")
        harness.mailbox.tick()
        await harness.mailbox.settle()
        harness.mailbox.tick()  # the same leader read again: no new registration
        await harness.mailbox.settle()
        assert harness.registrations() == ["tcp://a:1"]
        assert harness.connection.jobmanager_address == "tcp://a:1"

        leases.elect(2, "tcp://b:1")
        harness.mailbox.tick()
        await harness.mailbox.settle()
        assert harness.registrations() == ["tcp://a:1", "tcp://b:1"]
        assert harness.listener.events == [("registered", "jm-a"), ("registered", "jm-b")]
        harness.connection.stop("TaskManager shut down")
        assert leases.closed
        assert harness.transport.told[-1][0] == "tcp://b:1"
    finally:
        await harness.mailbox.close()
