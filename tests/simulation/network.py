"""An in-memory network of RpcTransports whose deliveries a seeded scheduler controls.

Every message is encoded and decoded as on the wire (msgspec, the real Envelope), so
what arrives is a copy, as across processes. Each delivery is a timer on the virtual
loop at `now + latency`; the scheduler decides the latency, and (by the fault plan)
whether a message is dropped or duplicated, and whether messages between a pair keep
their order (TCP and ZeroMQ keep it per connection: `fifo`) or not.

A message goes to whatever service is bound at its address when it arrives, as
ZeroMQ's queued messages reach a process restarted on the same port; an answer goes
back to the very service that asked (its ROUTER identity), or nowhere if it died.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from flink_runtime.rpc.messages import PROTOCOL_VERSION, Message, RpcError
from flink_runtime.rpc.service import AskTimeoutError, Envelope, RpcException
from flink_runtime.rpc.transport import InboundHandler

TELL, ASK, REPLY = 0, 1, 2

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Envelope)


@dataclass
class NetworkFaults:
    """What the scheduler may do to messages (probabilities per message)."""

    min_latency: float = 0.0005
    max_latency: float = 0.02
    drop: float = 0.0
    duplicate: float = 0.0
    # A slow message now and then: up to this many seconds (reorders across pairs, or
    # within one when fifo is off).
    slow: float = 0.0
    slow_latency: float = 2.0
    fifo: bool = True


class SimNetwork:
    def __init__(self, loop: asyncio.AbstractEventLoop, rng: random.Random, trace: Callable[[str], None]) -> None:
        self.loop = loop
        self.rng = rng
        self.trace = trace
        self.faults = NetworkFaults()
        self.bound: dict[str, SimRpc] = {}
        # Addresses cut off from everyone: what they send and what is sent to them is lost.
        self.isolated: set[str] = set()
        self._last_delivery: dict[tuple[str, str], float] = {}
        self.delivered = 0
        self.verbose = False  # trace every delivery (a replay with --trace)
        # Called after every delivery (the simulator checks its invariants there).
        self.after_delivery: Callable[[], None] = lambda: None
        # Called with (receiver, message, reply) before a message is handled, and with the
        # answer after: the invariants watch fenced messages this way.
        self.observer: Any = None

    # -- binding -----------------------------------------------------------------------------

    def bind(self, service: SimRpc) -> None:
        self.bound[service.address] = service

    def unbind(self, service: SimRpc, crashed: bool) -> None:
        if self.bound.get(service.address) is service:
            del self.bound[service.address]
        if crashed:
            # The peers' ZeroMQ monitors see the TCP connections close.
            for peer in list(self.bound.values()):
                if service.address in peer._connections and peer.on_disconnect is not None:
                    self.loop.call_later(self._latency(), _notify_disconnect, peer, service.address)

    # -- sending -----------------------------------------------------------------------------

    def _latency(self) -> float:
        faults = self.faults
        latency = self.rng.uniform(faults.min_latency, faults.max_latency)
        if faults.slow and self.rng.random() < faults.slow:
            latency += self.rng.uniform(0, faults.slow_latency)
        return latency

    def send(self, sender: SimRpc, address: str, envelope: Envelope, asker: SimRpc | None = None) -> None:
        if self.observer is not None:
            self.observer.sent(sender, envelope.body)
        payload = _encoder.encode(envelope)
        if len(payload) > sender.framesize:
            raise RpcException(f"{type(envelope.body).__name__} is {len(payload)} bytes, above pekko.framesize")
        faults = self.faults
        copies = 1
        if faults.drop and self.rng.random() < faults.drop:
            self.trace(f"drop {type(envelope.body).__name__} {sender.address} -> {address}")
            return
        if faults.duplicate and self.rng.random() < faults.duplicate:
            copies = 2
            self.trace(f"duplicate {type(envelope.body).__name__} {sender.address} -> {address}")
        for _ in range(copies):
            at = self.loop.time() + self._latency()
            if faults.fifo:
                pair = (sender.address, address)
                at = max(at, self._last_delivery.get(pair, 0.0) + 1e-6)
                self._last_delivery[pair] = at
            self.loop.call_at(at, self._deliver, sender, address, payload, asker)

    def _deliver(self, sender: SimRpc, address: str, payload: bytes, asker: SimRpc | None) -> None:
        envelope = _decoder.decode(payload)
        if sender.address in self.isolated or address in self.isolated:
            self.trace(f"lost {type(envelope.body).__name__} {sender.address} -> {address} (isolated)")
            return
        if envelope.kind == REPLY:
            assert asker is not None
            if asker.closed or self.bound.get(asker.address) is not asker:
                return
            if self.verbose:
                self.trace(f"  {sender.address} -> {asker.address}: answer {_describe(envelope.body)}")
            asker._answer(envelope)
        else:
            receiver = self.bound.get(address)
            if receiver is None or receiver.closed:
                return
            self.delivered += 1
            if self.verbose:
                self.trace(f"  {sender.address} -> {address}: {_describe(envelope.body)}")
            receiver._receive(envelope, sender)
        self.after_delivery()


class _Expired(Exception):
    pass


def _expire(future: asyncio.Future[Message]) -> None:
    if not future.done():
        future.set_exception(_Expired())


def _describe(message: Message) -> str:
    text = repr(message)
    return text if len(text) <= 300 else text[:300] + "..."


def _notify_disconnect(peer: SimRpc, address: str) -> None:
    if not peer.closed and peer.on_disconnect is not None and address in peer._connections:
        peer.on_disconnect(address)


class SimRpc:
    """An RpcTransport on a SimNetwork (same contract as rpc/service.py's RpcService)."""

    def __init__(self, network: SimNetwork, address: str, framesize: int = 10 << 20) -> None:
        self.network = network
        self.address = address
        self.framesize = framesize
        self.on_disconnect: Callable[[str], None] | None = None
        self._handler: InboundHandler | None = None
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._correlation = 0
        self._connections: dict[str, None] = {}
        self.closed = False

    async def start(self, handler: InboundHandler) -> str:
        self._handler = handler
        self.network.bind(self)
        return self.address

    async def close(self) -> None:
        self.crash(crashed=False)

    def crash(self, crashed: bool = True) -> None:
        """The process is gone: nothing more is received, pending asks fail."""
        if self.closed:
            return
        self.closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(RpcException("RPC service closed"))
        self._pending.clear()
        self.network.unbind(self, crashed)

    def tell(self, address: str, message: Message) -> None:
        if self.closed:
            return
        self._connections[address] = None
        self.network.send(self, address, Envelope(PROTOCOL_VERSION, TELL, 0, message))

    async def ask(self, address: str, message: Message, timeout: float) -> Message:
        self._correlation += 1
        correlation_id = self._correlation
        loop = self.network.loop
        future: asyncio.Future[Message] = loop.create_future()
        if self.closed:
            raise RpcException("RPC service closed")
        self._pending[correlation_id] = future
        self._connections[address] = None
        # One timer instead of asyncio.wait_for's machinery: the same outcome, a third the work.
        timer = loop.call_at(loop.time() + timeout, _expire, future)
        try:
            self.network.send(self, address, Envelope(PROTOCOL_VERSION, ASK, correlation_id, message), self)
            answer = await future
        except _Expired:
            raise AskTimeoutError(f"{type(message).__name__} to {address}: no answer within {timeout:.3g} s") from None
        finally:
            timer.cancel()
            self._pending.pop(correlation_id, None)
        if isinstance(answer, RpcError):
            raise RpcException(f"{type(message).__name__} to {address} failed: {answer.error}")
        return answer

    @property
    def connections(self) -> list[str]:
        return list(self._connections)

    def disconnect(self, address: str) -> None:
        self._connections.pop(address, None)

    # -- receiving -----------------------------------------------------------------------------

    def _answer(self, envelope: Envelope) -> None:
        future = self._pending.get(envelope.correlation_id)
        if future is not None and not future.done():
            future.set_result(envelope.body)

    def _receive(self, envelope: Envelope, sender: SimRpc) -> None:
        assert self._handler is not None
        observer = self.network.observer
        if envelope.kind == ASK:
            reply = _replier(self, sender, envelope.correlation_id)
            if observer is not None:
                reply = observer.watch(self, envelope.body, reply)
            try:
                self._handler(envelope.body, reply)
            except Exception as exc:  # the handler's bug must not kill the transport
                reply(RpcError(error=f"{type(exc).__name__}: {exc}"))
        else:
            if observer is not None:
                observer.watch(self, envelope.body, None)
            self._handler(envelope.body, None)


def _replier(receiver: SimRpc, asker: SimRpc, correlation_id: int) -> Callable[[Message], None]:
    """An answer goes back over the network to the very service that asked."""

    def reply(message: Message) -> None:
        if not receiver.closed:
            receiver.network.send(
                receiver, asker.address, Envelope(PROTOCOL_VERSION, REPLY, correlation_id, message), asker
            )

    return reply
