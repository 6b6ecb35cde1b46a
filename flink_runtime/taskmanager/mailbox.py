"""What the TaskExecutor's components need from the actor that hosts them.

Each component (jobmanager_connection.py, task_table.py, ...) owns its state and is
given, through its constructor, only these narrow seams: a `Mailbox` to run its
continuations and timers in the actor (so its state is touched by one thread only) and
a `Transport` to talk to other endpoints. The TaskExecutor (an RpcEndpoint) and its
RpcService satisfy them as they are; a unit test passes fakes that run callbacks at
once and record the messages (tests/unit/test_taskexecutor_*.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from flink_runtime.rpc.messages import Message

T = TypeVar("T")


class Mailbox(Protocol):
    """Runs work for a component inside the actor (RpcEndpoint's own methods)."""

    def run_async(
        self,
        awaitable: Awaitable[T],
        on_done: Callable[[T | None, BaseException | None], None] | None = None,
    ) -> Any:
        """Await `awaitable` outside the mailbox; `on_done(result, error)` runs back inside it."""
        ...

    def at_end_of_turn(self, function: Callable[[], None]) -> None:
        """Run `function()` inside the mailbox once it has handled what is queued now
        (called from inside the mailbox)."""
        ...

    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> Any:
        """Run `function(*args)` inside the mailbox after `delay` seconds."""
        ...

    def schedule_every(self, interval: float, function: Callable[[], None]) -> None:
        """Run `function()` inside the mailbox every `interval` seconds."""
        ...


class Transport(Protocol):
    """Messages to other endpoints (RpcService's own methods)."""

    def tell(self, address: str, message: Message) -> None: ...

    async def ask(self, address: str, message: Message, timeout: float) -> Message: ...
