"""RPC with a cluster secret: CURVE-authenticated and encrypted, peers without it unheard.

In-process RpcServices on loopback; tests/integration/test_rpc_security.py sends
forgeries to a real cluster."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
import zmq

from flink_runtime.rpc.messages import PROTOCOL_VERSION, CancelJob, Heartbeat, HeartbeatResponse
from flink_runtime.rpc.service import TELL, AskTimeoutError, Envelope, RpcService
from flink_runtime.security.rpc_keys import curve_keys
from tests.unit.test_rpc import Probe

SECRET = "cluster-secret"


def test_the_keys_come_from_the_secret_alone() -> None:
    assert curve_keys("") is None
    first, again, other = curve_keys(SECRET), curve_keys(SECRET), curve_keys("another")
    assert first == again
    assert first is not None and other is not None
    assert first.public != other.public and len(first.public) == 40


async def test_peers_with_the_secret_talk() -> None:
    probe = Probe(RpcService("127.0.0.1", 0, cluster_secret=SECRET))
    await probe.start()
    client = RpcService("127.0.0.1", 0, cluster_secret=SECRET)
    await client.start(lambda message, reply: None)
    try:
        answer = await client.ask(probe.address, Heartbeat(jobmanager_id="jm"), timeout=5)
        assert answer == HeartbeatResponse(task_manager_id="echo-jm")
    finally:
        await client.close()
        await probe.stop()


@pytest.mark.parametrize("client_secret", ["wrong-secret", ""], ids=["wrong-secret", "no-secret"])
async def test_a_peer_without_the_secret_is_not_heard(client_secret: str) -> None:
    probe = Probe(RpcService("127.0.0.1", 0, cluster_secret=SECRET))
    await probe.start()
    client = RpcService("127.0.0.1", 0, cluster_secret=client_secret)
    await client.start(lambda message, reply: None)
    try:
        client.tell(probe.address, CancelJob(job_id="0" * 32))
        with pytest.raises(AskTimeoutError):
            await client.ask(probe.address, Heartbeat(jobmanager_id="jm"), timeout=1.5)
        assert probe.received == []
    finally:
        await client.close()
        await probe.stop()


async def test_a_raw_zeromq_peer_is_not_heard() -> None:
    """A forger's DEALER that never registered, sending the project's own messages: not heard."""
    probe = Probe(RpcService("127.0.0.1", 0, cluster_secret=SECRET))
    await probe.start()
    context = zmq.Context.instance()
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(probe.address)
    try:
        forged = msgspec.msgpack.encode(Envelope(PROTOCOL_VERSION, TELL, 0, CancelJob(job_id="0" * 32)))
        # The failed CURVE handshake tears the connection down and ZeroMQ redials,
        # so a send may find no pipe at all (Again): keep forging for a second.
        sent = 0
        for _ in range(20):
            try:
                dealer.send(forged, zmq.NOBLOCK)
                sent += 1
            except zmq.Again:
                pass
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert sent > 0, "the forger's DEALER never queued a message"
        assert probe.received == []
    finally:
        dealer.close()
        await probe.stop()
