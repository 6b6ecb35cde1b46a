"""The transport an RpcEndpoint talks through, as a Protocol.

RpcService (ZeroMQ, service.py) is the one production implements; the deterministic
simulator (tests/simulation/) passes an in-memory one whose deliveries a seeded
scheduler delays, drops and reorders. JobManager and TaskExecutor accept either
through their keyword-only `rpc=` parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from flink_runtime.rpc.messages import Message

# Called for each incoming tell or ask; `reply` is None for tells.
InboundHandler = Callable[[Message, Callable[[Message], None] | None], None]


class RpcTransport(Protocol):
    """What an RpcEndpoint and its components use of their RPC service."""

    address: str
    framesize: int
    # Called with a peer's address when the connection to it drops (a killed process).
    on_disconnect: Callable[[str], None] | None

    async def start(self, handler: InboundHandler) -> str: ...

    async def close(self) -> None: ...

    def tell(self, address: str, message: Message) -> None: ...

    async def ask(self, address: str, message: Message, timeout: float) -> Message: ...

    @property
    def connections(self) -> list[str]: ...

    def disconnect(self, address: str) -> None: ...
