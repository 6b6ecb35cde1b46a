"""Stress: hundreds of peers connect to one RpcService and vanish, as TaskManagers do.

The service plays the JobManager (it watches its connections with a socket monitor,
`on_disconnect`); each peer plays a TaskManager that answers one ask and then goes
away in one of the ways a real one does. The endings race the service's own
`disconnect()` against the peer's TCP connection closing, which is the moment that
can leave the ZeroMQ I/O thread blocked forever in a monitor-event send (if the monitor's
reader is closed first: rpc/service.py, `disconnect`): from then on no connection would
be accepted or completed in the whole process.

A blocked I/O thread does not hang the test: the next peer's ask times out and the
test fails with that diagnosis. The timeout marker is only a backstop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import psutil
import pytest

from flink_runtime.rpc.messages import Heartbeat, HeartbeatResponse, Message
from flink_runtime.rpc.service import AskTimeoutError, RpcService

CYCLES = 300
# Generous on a loaded machine: a healthy round trip on loopback takes about a millisecond.
ASK_TIMEOUT = 5.0
IO_THREAD_BLOCKED = (
    "the ZeroMQ I/O thread no longer completes connections: most likely it is blocked "
    "sending a socket-monitor event that nobody will read (see RpcService.disconnect)"
)


def answer_heartbeats(name: str) -> Callable[[Message, Callable[[Message], None] | None], None]:
    def handler(message: Message, reply: Callable[[Message], None] | None) -> None:
        if reply is not None:
            reply(HeartbeatResponse(task_manager_id=name))

    return handler


async def start_peer(name: str) -> RpcService:
    peer = RpcService("127.0.0.1", 0)
    await peer.start(answer_heartbeats(name))
    return peer


async def ask_alive(service: RpcService, address: str, what: str) -> None:
    try:
        answer = await service.ask(address, Heartbeat(jobmanager_id="stress"), ASK_TIMEOUT)
    except AskTimeoutError:
        raise AssertionError(f"{what}: no answer within {ASK_TIMEOUT} s; {IO_THREAD_BLOCKED}") from None
    assert isinstance(answer, HeartbeatResponse)


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        await asyncio.sleep(0.002)


async def wait_reported(lost: list[str], since: int, address: str, what: str) -> None:
    """Wait until `address` is among the losses reported after the first `since` (ports are
    reused, so an earlier peer may have had the same address)."""
    await wait_for(lambda: address in lost[since:], f"{what} was not reported lost")


@pytest.mark.timeout(120, method="thread")
async def test_hundreds_of_vanishing_peers_leave_the_service_accepting_and_leak_free() -> None:
    lost: list[str] = []
    hub = RpcService("127.0.0.1", 0)
    hub.on_disconnect = lost.append
    await hub.start(answer_heartbeats("hub"))
    process = psutil.Process()
    fds_before = process.num_fds()
    started = time.monotonic()
    try:
        for cycle in range(CYCLES):
            peer = await start_peer(f"peer-{cycle}")
            address = peer.address
            # Connects the hub's DEALER and arms its monitor, as a registration does.
            await ask_alive(hub, address, f"cycle {cycle}: a new peer")
            reported_before = len(lost)
            ending = cycle % 4
            if ending == 0:
                # The JobManager drops a TaskManager (DisconnectTaskManager) while the
                # process exits: its TCP connection closes during our teardown.
                hub.disconnect(address)
                await peer.close()
                await asyncio.sleep(0.005)
                # Dropped on purpose, so never reported lost.
                assert address not in lost[reported_before:], f"cycle {cycle}: a dropped peer was reported lost"
            elif ending == 1:
                # The process dies first and we drop it before the monitor event is read.
                await peer.close()
                hub.disconnect(address)
            elif ending == 2:
                # Killed in the middle of a burst of messages to it (queued, unanswered).
                for _ in range(50):
                    hub.tell(address, Heartbeat(jobmanager_id="burst"))
                await peer.close()
                await wait_reported(lost, reported_before, address, f"cycle {cycle}: the vanished peer")
                hub.disconnect(address)
            else:
                # The JobManager's path for a SIGKILLed TaskManager: the monitor reports
                # the closed connection, a probe ask goes unanswered, then it is dropped.
                await peer.close()
                await wait_reported(lost, reported_before, address, f"cycle {cycle}: the killed peer")
                with pytest.raises(AskTimeoutError):
                    await hub.ask(address, Heartbeat(jobmanager_id="probe"), 0.01)
                hub.disconnect(address)
        elapsed = time.monotonic() - started

        # The hub still connects to a newcomer, and a newcomer still reaches the hub.
        newcomer = await start_peer("newcomer")
        try:
            began = time.monotonic()
            await ask_alive(hub, newcomer.address, f"after {CYCLES} cycles: the hub asking a new peer")
            await ask_alive(newcomer, hub.address, f"after {CYCLES} cycles: a new peer asking the hub")
            round_trip = time.monotonic() - began
        finally:
            hub.disconnect(newcomer.address)
            await newcomer.close()
        assert hub.connections == []  # every disconnect() really dropped its connection
        rate = CYCLES / elapsed
        print(f"{CYCLES} cycles in {elapsed:.2f} s ({rate:.0f}/s); newcomer round trips {round_trip * 1e3:.1f} ms")
    finally:
        await hub.close()

    # Every dealer and monitor socket was really closed: ZeroMQ reaps closed sockets in
    # the background, so allow it a moment. A leak would be several descriptors a cycle.
    await wait_for(lambda: process.num_fds() <= fds_before + 10, "file descriptors not released")
