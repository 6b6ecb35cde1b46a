"""A raw ZeroMQ peer speaking the project's RPC envelope: what a local process that never
registered could send to a JobManager or TaskManager (tests/integration/test_rpc_security.py,
tests/airflow/test_embedded.py)."""

from __future__ import annotations

import time

import msgspec
import zmq

from flink_runtime.rpc.messages import PROTOCOL_VERSION, Message, RegisterTaskManager
from flink_runtime.rpc.service import ASK, TELL, Envelope
from flink_runtime.security.rpc_keys import curve_keys, make_client


def _dealer(address: str, secret: str | None) -> zmq.Socket:
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    keys = curve_keys(secret) if secret else None
    if keys is not None:
        make_client(dealer, keys)
    dealer.connect(address)
    return dealer


def forge(address: str, messages: list[Message], secret: str | None) -> None:
    """Send `messages` as tells from a fresh DEALER (CURVE keys of `secret`, or none)."""
    forge_all([(address, messages)], secret)


def forge_all(targets: list[tuple[str, list[Message]]], secret: str | None) -> None:
    """`forge` to several peers at once: one DEALER each, all sent, then one second for
    them to go out and be handled (closing with LINGER 0 drops what is still queued)."""
    dealers = [(_dealer(address, secret), messages) for address, messages in targets]
    try:
        for dealer, messages in dealers:
            for message in messages:
                dealer.send(msgspec.msgpack.encode(Envelope(PROTOCOL_VERSION, TELL, 0, message)), zmq.NOBLOCK)
        time.sleep(1.0)
    finally:
        for dealer, _ in dealers:
            dealer.close()


def ask(address: str, message: Message, secret: str | None = None, timeout: float = 3.0) -> Message | None:
    """Ask `message` from a fresh DEALER (CURVE keys of `secret`, or none): the answer's
    body, or None when nothing answers within `timeout` s."""
    dealer = _dealer(address, secret)
    try:
        dealer.send(msgspec.msgpack.encode(Envelope(PROTOCOL_VERSION, ASK, 1, message)), zmq.NOBLOCK)
        if not dealer.poll(int(timeout * 1000)):
            return None
        return msgspec.msgpack.decode(dealer.recv(), type=Envelope).body
    finally:
        dealer.close()


def ask_all(asks: list[tuple[str, Message, str | None]], timeout: float = 3.0) -> list[Message | None]:
    """`ask` each (address, message, secret) at once, each from a fresh DEALER (CURVE keys
    of its secret, or none): the answers' bodies in order, None for each one not answered
    within `timeout` s. Every ask gets the whole window, as one `ask` does, but the windows
    run side by side: checking that n forged messages go unanswered waits `timeout` once,
    not n times."""
    dealers = [_dealer(address, secret) for address, _, secret in asks]
    try:
        poller = zmq.Poller()
        for dealer, (_, message, _) in zip(dealers, asks, strict=True):
            dealer.send(msgspec.msgpack.encode(Envelope(PROTOCOL_VERSION, ASK, 1, message)), zmq.NOBLOCK)
            poller.register(dealer, zmq.POLLIN)
        answers: dict[zmq.Socket, Message] = {}
        deadline = time.monotonic() + timeout
        while len(answers) < len(dealers) and (left := deadline - time.monotonic()) > 0:
            for dealer, _ in poller.poll(int(left * 1000) + 1):
                answers[dealer] = msgspec.msgpack.decode(dealer.recv(), type=Envelope).body
                poller.unregister(dealer)
        return [answers.get(dealer) for dealer in dealers]
    finally:
        for dealer in dealers:
            dealer.close()


def fake_registration(secret: str = "") -> RegisterTaskManager:
    """A TaskManager that does not exist, offering many slots (the next job's would go there)."""
    return RegisterTaskManager(
        task_manager_id="fake-tm", address="tcp://127.0.0.1:9", host="127.0.0.1", slots=64, secret=secret
    )
