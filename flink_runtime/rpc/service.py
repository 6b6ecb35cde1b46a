"""The RPC transport: ZeroMQ sockets carrying msgpack-encoded envelopes.

Why ZeroMQ: it does the framing, reconnection and queueing that a hand-rolled socket
protocol would get wrong, it bounds message sizes (ZMQ_MAXMSGSIZE drops an oversized
frame before it is buffered), and it is fast enough for thousands of task deployments
a second from Python. Why msgpack through msgspec: typed decoding straight into the
message Structs, an order of magnitude faster than JSON plus pydantic.

Each RpcService binds one ROUTER socket (its address, tcp://host:port) where asks and
tells arrive, and keeps one DEALER socket per remote address it talks to; answers to
its asks come back on that DEALER. An endpoint's address therefore stays valid across
reconnects: a restarted JobManager on the same port is found again by every
TaskManager without any of them noticing more than a few timed-out asks.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Callable

import msgspec
import zmq
from zmq.utils.monitor import recv_monitor_message

from flink_runtime.rpc.messages import (
    PROTOCOL_VERSION,
    Message,
    RegisterTaskManager,
    RpcError,
    WireMessage,
)
from flink_runtime.security.rpc_keys import curve_keys, make_client, make_server

log = logging.getLogger(__name__)

TELL, ASK, REPLY = 0, 1, 2

# Names for the inproc endpoints that socket monitors bind. pyzmq's default name is built
# from the socket's file descriptor, which the OS hands out again as soon as a closed
# socket's descriptor is freed, while that socket's monitor may still be bound to the old
# name; a new connection's monitor then fails to bind. A counter never repeats.
_monitor_endpoints = itertools.count(1)


# Monitor events of a CURVE handshake that failed: keys refused, or one side plain.
_HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


class RpcException(RuntimeError):
    """An RPC failed: the peer answered with an error, or the message could not be sent."""


class AskTimeoutError(RpcException, TimeoutError):
    """No answer arrived within the ask timeout."""


class MessageTooLarge(RpcException):
    """A message exceeds `pekko.framesize`; it was not sent."""


class _Expired(Exception):
    """An ask's timer fired before its answer came."""


def _expire(future: asyncio.Future[Message]) -> None:
    if not future.done():
        future.set_exception(_Expired())


class Envelope(msgspec.Struct, array_like=True):
    version: int
    kind: int
    correlation_id: int
    body: WireMessage


# Called for each incoming tell or ask; `reply` is None for tells.
InboundHandler = Callable[[Message, Callable[[Message], None] | None], None]


class RpcService:
    """One process-local RPC endpoint: a bound address plus outgoing connections.

    Sockets are plain (non-asyncio) ZeroMQ sockets whose file descriptors the event
    loop watches; a readiness callback drains every queued message at once. That is
    several times cheaper per message than zmq.asyncio's one future per receive, and
    the JobManager handles tens of thousands of messages a second this way. ZeroMQ's
    descriptor is edge-triggered, so the drain loops until EAGAIN and is re-run
    after every send (a send can consume the edge that announced new input).
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, framesize: int = 10 << 20, cluster_secret: str = ""
    ) -> None:
        """cluster_secret: when set, every connection in and out is CURVE-authenticated
        and encrypted with keys derived from it (security/rpc_keys.py). A JobManager and a
        TaskManager always pass one (security/cluster_secret.py); plain TCP is left for
        the transport's own tests and benchmarks."""
        self._host = host
        self._curve = curve_keys(cluster_secret)
        self._port = port
        self.framesize = framesize
        self._context = zmq.Context.instance()
        self._router: zmq.Socket | None = None
        self._dealers: dict[str, zmq.Socket] = {}
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._correlation = itertools.count(1)
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(Envelope)
        self._handler: InboundHandler | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._drain_scheduled = False
        self.address = ""
        # Called with a peer's address when its TCP connection drops (a killed process).
        self.on_disconnect: Callable[[str], None] | None = None
        self._monitors: dict[str, zmq.Socket] = {}
        self._refused_by: set[str] = set()  # peers whose handshake failed (logged once)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, handler: InboundHandler) -> str:
        self._handler = handler
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        router = self._context.socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        router.setsockopt(zmq.MAXMSGSIZE, self.framesize + 1024)
        router.setsockopt(zmq.SNDHWM, 0)
        router.setsockopt(zmq.RCVHWM, 0)
        if self._curve is not None:
            make_server(router, self._curve)
        if self._port:
            try:
                router.bind(f"tcp://{self._host}:{self._port}")
            except zmq.ZMQError as exc:
                router.close()
                raise RpcException(f"cannot bind RPC to {self._host}:{self._port}: {exc}") from None
            port = self._port
        else:
            port = router.bind_to_random_port(f"tcp://{self._host}")
        self._router = router
        self.address = f"tcp://{self._host}:{port}"
        self._loop.add_reader(router.getsockopt(zmq.FD), self._schedule_drain)
        self._schedule_drain()
        return self.address

    async def close(self) -> None:
        self._require_loop_thread("close")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(RpcException("RPC service closed"))
        self._pending.clear()
        for address in list(self._dealers):
            self.disconnect(address)
        if self._router is not None:
            if self._loop is not None:
                self._loop.remove_reader(self._router.getsockopt(zmq.FD))
            self._router.close(linger=0)
            self._router = None

    # -- sending ---------------------------------------------------------------------------

    def tell(self, address: str, message: Message) -> None:
        """Fire and forget. Never blocks; a message to an unreachable peer is queued by ZeroMQ."""
        self._send(address, Envelope(PROTOCOL_VERSION, TELL, 0, message))

    async def ask(self, address: str, message: Message, timeout: float) -> Message:
        """Send and wait for the answer; raises AskTimeoutError or RpcException."""
        correlation_id = next(self._correlation)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Message] = loop.create_future()
        self._pending[correlation_id] = future
        # One timer instead of asyncio.wait_for's machinery (a task per ask in 3.11): the
        # same outcome for a fraction of the work, one ask per deployment and state update.
        timer = loop.call_later(timeout, _expire, future)
        try:
            self._send(address, Envelope(PROTOCOL_VERSION, ASK, correlation_id, message))
            answer = await future
        except _Expired:
            raise AskTimeoutError(f"{type(message).__name__} to {address}: no answer within {timeout:.3g} s") from None
        finally:
            timer.cancel()
            self._pending.pop(correlation_id, None)
        if isinstance(answer, RpcError):
            raise RpcException(f"{type(message).__name__} to {address} failed: {answer.error}")
        return answer

    def _send(self, address: str, envelope: Envelope) -> None:
        self._require_loop_thread("tell/ask")
        payload = self._encoder.encode(envelope)
        if len(payload) > self.framesize:
            raise MessageTooLarge(
                f"{type(envelope.body).__name__} is {len(payload)} bytes, above pekko.framesize "
                f"({self.framesize} bytes); send less per message or raise pekko.framesize"
            )
        try:
            self._dealer(address).send(payload, zmq.NOBLOCK)
        except zmq.Again:
            raise RpcException(f"cannot send {type(envelope.body).__name__} to {address}: queue full") from None
        self._schedule_drain()

    @property
    def connections(self) -> list[str]:
        """The addresses this service holds an outgoing connection (a DEALER) to."""
        return list(self._dealers)

    def _dealer(self, address: str) -> zmq.Socket:
        socket = self._dealers.get(address)
        if socket is None:
            assert self._loop is not None
            socket = self._context.socket(zmq.DEALER)
            socket.setsockopt(zmq.LINGER, 0)
            socket.setsockopt(zmq.MAXMSGSIZE, self.framesize + 1024)
            socket.setsockopt(zmq.RECONNECT_IVL, 100)
            socket.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
            socket.setsockopt(zmq.SNDHWM, 100_000)
            if self._curve is not None:
                make_client(socket, self._curve)
            if self.on_disconnect is not None:
                # Before connect(), so that not even the first connection's end goes unseen.
                self._watch_connection(address, socket)
            socket.connect(address)
            self._dealers[address] = socket
            self._loop.add_reader(socket.getsockopt(zmq.FD), self._schedule_drain)
        return socket

    def _watch_connection(self, address: str, dealer: zmq.Socket) -> None:
        """Report `address` to on_disconnect whenever the dealer's TCP connection closes.

        A socket monitor is a PAIR socket that libzmq creates inside `dealer` and binds to
        an inproc endpoint; `reader` is the PAIR connected to it. libzmq sends each event
        from its I/O thread with a *blocking* zmq_msg_send (no ZMQ_DONTWAIT; so in 4.3.5
        and still on libzmq's master), holding a mutex of `dealer` meanwhile. Whenever
        that send cannot be delivered, the process's only I/O thread waits forever, and
        every socket with it: no connection is accepted or completed, nothing moves. Two
        ways it cannot be delivered, both closed off here:
        - no reader: a PAIR with no peer blocks. disconnect() therefore stops the monitor
          (disable_monitor) before it closes the reader, never the other way round;
        - a full pipe: RCVHWM 0 on the reader makes the pipe unbounded (set before
          connect, as HWMs are fixed when the pipe is made). Events are few (one per
          closed connection) and read on every drain, so unbounded stays small.
        """
        assert self._loop is not None
        endpoint = f"inproc://flink-rpc-monitor-{next(_monitor_endpoints)}"
        reader = self._context.socket(zmq.PAIR)
        reader.setsockopt(zmq.LINGER, 0)
        reader.setsockopt(zmq.RCVHWM, 0)
        dealer.monitor(endpoint, zmq.EVENT_DISCONNECTED | _HANDSHAKE_FAILED)
        reader.connect(endpoint)
        self._monitors[address] = reader
        self._loop.add_reader(reader.getsockopt(zmq.FD), self._read_monitor, address, reader)
        # Edge-triggered: consume what is pending now, or the descriptor never fires.
        self._read_monitor(address, reader)

    def _read_monitor(self, address: str, monitor: zmq.Socket) -> None:
        while True:
            try:
                event = recv_monitor_message(monitor, zmq.NOBLOCK)
            except (zmq.Again, zmq.ZMQError):
                return
            if event["event"] == zmq.EVENT_DISCONNECTED and self.on_disconnect is not None:
                self.on_disconnect(address)
            elif event["event"] & _HANDSHAKE_FAILED and address not in self._refused_by:
                # ZeroMQ retries the handshake for ever, silently: say once why nothing moves.
                self._refused_by.add(address)
                log.error(
                    "RPC handshake with %s failed: its cluster secret and this process's differ "
                    "(security.cluster.secret; without one, a process on loopback uses its user's secret "
                    "file, so a process of another user, or with another XDG_RUNTIME_DIR, has another one); "
                    "nothing is exchanged with it until they match",
                    address,
                )

    def disconnect(self, address: str) -> None:
        """Drop the connection to a peer that is gone (its queued messages with it).

        A dropped peer is not reported to on_disconnect afterwards. A later tell or ask
        to the same address opens a new connection.
        """
        self._require_loop_thread("disconnect")
        socket = self._dealers.pop(address, None)
        reader = self._monitors.pop(address, None)
        if reader is not None:
            if self._loop is not None:
                self._loop.remove_reader(reader.getsockopt(zmq.FD))
            if socket is not None:
                # Stops the monitor under the mutex the I/O thread holds while it sends an
                # event: once this returns no event of `socket` is in flight or will ever
                # be sent, so closing the reader cannot strand a send (_watch_connection).
                # It cannot wait long: the reader is still connected, its pipe unbounded.
                socket.disable_monitor()
            reader.close(linger=0)  # unread events go with it: the peer is dropped on purpose
        if socket is not None:
            if self._loop is not None:
                self._loop.remove_reader(socket.getsockopt(zmq.FD))
            socket.close(linger=0)

    def _require_loop_thread(self, operation: str) -> None:
        # ZeroMQ sockets are not thread-safe: closing or sending on one while the loop's
        # thread reads it corrupts libzmq's state (crashes, or an I/O thread that hangs).
        if self._loop_thread is not None and threading.get_ident() != self._loop_thread:
            raise RpcException(
                f"RpcService.{operation} called from thread {threading.current_thread().name!r}, not the "
                f"thread running the service's event loop; hand it over with loop.call_soon_threadsafe "
                f"or asyncio.run_coroutine_threadsafe"
            )

    # -- receiving ---------------------------------------------------------------------------

    def _schedule_drain(self) -> None:
        if not self._drain_scheduled and self._loop is not None:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False
        if self._router is None:
            return
        self._drain_router(self._router)
        for address, socket in list(self._dealers.items()):
            self._drain_replies(address, socket)
        # Not the monitors: nothing but their own reader callback (_read_monitor, which reads
        # until EAGAIN) touches a monitor's reader socket, so no other operation can consume
        # the edge that announces its events. Reading them here too cost an EAGAIN per
        # monitor per drain (~8% of a busy TaskManager's loop).

    def _drain_replies(self, address: str, socket: zmq.Socket) -> None:
        while True:
            try:
                payload = socket.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            except zmq.ZMQError:  # closed meanwhile
                return
            envelope = self._decode(payload, address)
            if envelope is None or envelope.kind != REPLY:
                continue
            future = self._pending.get(envelope.correlation_id)
            if future is not None and not future.done():
                future.set_result(envelope.body)

    def _drain_router(self, router: zmq.Socket) -> None:
        assert self._handler is not None
        handler = self._handler
        while self._router is not None:
            try:
                frames = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 2:
                log.warning("RPC message with %d frames dropped (expected 2)", len(frames))
                continue
            identity, payload = frames
            envelope = self._decode(payload, "a peer")
            if envelope is None:
                continue
            if envelope.kind == ASK:
                reply = self._replier(identity, envelope.correlation_id)
                # Registration answers a version mismatch itself (RefuseRegistration),
                # everything else from another protocol version is refused here.
                if envelope.version != PROTOCOL_VERSION and not isinstance(envelope.body, RegisterTaskManager):
                    reply(
                        RpcError(
                            error=f"incompatible protocol version {envelope.version}, "
                            f"this side speaks {PROTOCOL_VERSION}"
                        )
                    )
                    continue
                try:
                    handler(envelope.body, reply)
                except Exception as exc:  # the handler's bug must not kill the transport
                    log.exception("handler failed on %s", type(envelope.body).__name__)
                    reply(RpcError(error=f"{type(exc).__name__}: {exc}"))
            else:
                try:
                    handler(envelope.body, None)
                except Exception:
                    log.exception("handler failed on %s", type(envelope.body).__name__)

    def _replier(self, identity: bytes, correlation_id: int) -> Callable[[Message], None]:
        def reply(message: Message) -> None:
            if self._router is None:
                return
            payload = self._encoder.encode(Envelope(PROTOCOL_VERSION, REPLY, correlation_id, message))
            try:
                self._router.send_multipart([identity, payload], zmq.NOBLOCK)
            except zmq.ZMQError as exc:
                log.warning("reply to %s dropped: %s", type(message).__name__, exc)
            self._schedule_drain()

        return reply

    def _decode(self, payload: bytes, source: str) -> Envelope | None:
        try:
            return self._decoder.decode(payload)
        except msgspec.DecodeError as exc:
            # A peer speaking another protocol version or sending garbage is logged
            # and ignored; registration answers version mismatches explicitly.
            log.warning("undecodable RPC message from %s dropped: %s", source, exc)
            return None
