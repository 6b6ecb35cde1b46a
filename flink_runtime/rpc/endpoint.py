"""RpcEndpoint: the actor every JobManager and TaskManager component is built on.

One mailbox, one asyncio task draining it, state touched only by handlers. A handler
never blocks: it answers at once, or returns an awaitable whose result becomes the
answer later while the mailbox goes on (SubmitJob is answered only once the sources
run, long after the handler returned). Work that must wait on the network or a thread
is started with `run_async`, and its result comes back through the mailbox as a
callback, so the state it touches is still touched only here.

A handler that raises is supervised (supervision.py): a failure that concerns one of
the endpoint's children (`child_of`, e.g. the JobMaster of the message's job) goes to
the endpoint's own strategy (`child_failed`); any other failure is the endpoint's own
and goes to its parent: the MiniCluster that adopted it, else the top of the process.
Unless the parent resumes or restarts it, the endpoint serves no more from then on
(its state is unknown): asks are answered with the reason, everything else is dropped,
until whoever owns it stops it (the MiniCluster) or the process ends.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from flink_runtime.rpc.messages import Message, RpcError
from flink_runtime.rpc.service import RpcService
from flink_runtime.rpc.supervision import Directive, ProcessSupervisor, Supervised, Supervisor, supervise

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M")
Reply = Callable[[Any], None]


def handles(message_type: type[Message] | type) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Mark a method as the handler of one message type."""

    def mark(method: Callable[..., T]) -> Callable[..., T]:
        method._handles = message_type  # type: ignore[attr-defined]
        return method

    return mark


class _Callback:
    """A continuation run inside the actor: the result of work done elsewhere."""

    __slots__ = ("function", "args")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args


class _Mailbox:
    """An endpoint's queue of (message, reply): a deque and the one task that drains it
    (`_drain`), woken when a message comes while it waits. What asyncio.Queue does beside
    (its unfinished-task count and Event, size checks, any number of getters and putters)
    cost a few microseconds a message for nothing used here; a TaskManager's mailbox takes
    three messages per task it runs."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque[tuple[Any, Reply | None]] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: tuple[Any, Reply | None]) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def empty(self) -> bool:
        return not self._items

    async def get(self) -> tuple[Any, Reply | None]:
        """The oldest item; returns without yielding to the event loop while there is one."""
        while not self._items:
            waiter = asyncio.get_running_loop().create_future()
            self._waiter = waiter
            try:
                await waiter
            finally:
                if self._waiter is waiter:
                    self._waiter = None
        return self._items.popleft()


class RpcEndpoint:
    _handler_types: dict[type, str] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        handler_types: dict[type, str] = {}
        for klass in reversed(cls.__mro__):
            for name, attr in vars(klass).items():
                if hasattr(attr, "_handles"):
                    handler_types[attr._handles] = name
        cls._handler_types = handler_types

    def __init__(self, name: str, rpc: RpcService) -> None:
        self.name = name
        self.rpc = rpc
        # Told of this endpoint's own failures: the top of the process (what it cannot
        # handle ends the process) unless a MiniCluster adopts the endpoint.
        self.parent: Supervisor = ProcessSupervisor()
        # Why the endpoint serves no more: its own failure that the parent did not
        # resume or restart (see _fail).
        self.failure: BaseException | None = None
        self._mailbox = _Mailbox()
        self._handlers = {t: getattr(self, n) for t, n in self._handler_types.items()}
        self._drainer: asyncio.Task[None] | None = None
        # Run once the mailbox has handled what is queued (at_end_of_turn).
        self._end_of_turn: list[Callable[[], None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Told from other threads, not yet in the mailbox (tell_self_threadsafe).
        self._inbox: collections.deque[Any] = collections.deque()
        self._inbox_lock = threading.Lock()
        self._inbox_scheduled = False

    @property
    def address(self) -> str:
        return self.rpc.address

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.rpc.start(self._enqueue)
        self._drainer = asyncio.create_task(self._drain(), name=f"mailbox {self.name}")
        self.on_start()

    def on_start(self) -> None:
        """Hook run in the actor once the mailbox drains; schedule timers here."""

    async def stop(self) -> None:
        self.on_stop()
        for task in list(self._background):
            task.cancel()
        if self._drainer is not None:
            self._drainer.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self._drainer is not None:
            await asyncio.gather(self._drainer, return_exceptions=True)
        await self.rpc.close()

    def on_stop(self) -> None:
        """Hook run before the mailbox stops."""

    def restart(self, error: BaseException) -> None:
        """Start afresh after a failure (supervision). An endpoint holds the process's
        state: by default it cannot, and the failure escalates."""
        raise error

    # -- the mailbox ---------------------------------------------------------------------------

    def _enqueue(self, message: Any, reply: Reply | None) -> None:
        self._mailbox.put_nowait((message, reply))

    def tell_self(self, message: Any) -> None:
        """Put a message in the mailbox (same event loop)."""
        self._mailbox.put_nowait((message, None))

    def tell_self_threadsafe(self, message: Any) -> None:
        """Put a message in the mailbox from another thread (a task's thread). Messages told
        while the loop has not yet taken the earlier ones go in with them: one wake-up of
        the loop (a write to its self-pipe) for all, in the order they were told."""
        assert self._loop is not None
        with self._inbox_lock:
            self._inbox.append(message)
            if self._inbox_scheduled:
                return
            self._inbox_scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._take_inbox)
        except BaseException:  # a closed loop: the next teller tries again
            with self._inbox_lock:
                self._inbox_scheduled = False
            raise

    def _take_inbox(self) -> None:
        with self._inbox_lock:
            messages = list(self._inbox)
            self._inbox.clear()
            self._inbox_scheduled = False
        for message in messages:
            self._mailbox.put_nowait((message, None))

    async def ask_self(self, message: Any, timeout: float | None = None) -> Any:
        """Ask this actor from the same process (the REST server does)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def reply(answer: Any) -> None:
            if not future.done():
                future.set_result(answer)

        self._mailbox.put_nowait((message, reply))
        answer = await asyncio.wait_for(future, timeout)
        if isinstance(answer, RpcError):
            raise RuntimeError(answer.error)
        return answer

    async def call_in_mailbox(self, function: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """Run `function(*args)` inside the mailbox and return its result (or raise its error)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def call() -> None:
            try:
                result = function(*args)
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                return
            if not future.done():
                future.set_result(result)

        def refused(answer: Any) -> None:  # only when the endpoint serves no more (_drain)
            if isinstance(answer, RpcError) and not future.done():
                future.set_exception(RuntimeError(answer.error))

        self._mailbox.put_nowait((_Callback(call, ()), refused))
        return await asyncio.wait_for(future, timeout)

    def run_in_mailbox(self, function: Callable[..., Any], *args: Any) -> None:
        self._mailbox.put_nowait((_Callback(function, args), None))

    def at_end_of_turn(self, function: Callable[[], None]) -> None:
        """Run `function()` inside the mailbox once it has handled every message queued by
        then (when it next runs dry), supervised as any continuation. What the handlers of
        one turn produce can so leave as one message (taskmanager/task_table.py batches the
        task state updates this way)."""
        self._end_of_turn.append(function)

    def run_async(
        self,
        awaitable: Awaitable[T],
        on_done: Callable[[T | None, BaseException | None], None] | None = None,
    ) -> asyncio.Task[T]:
        """Run I/O outside the mailbox; `on_done(result, error)` runs back inside it."""

        async def runner() -> T:
            try:
                result = await awaitable
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                if on_done is not None:
                    self.run_in_mailbox(on_done, None, exc)
                else:
                    log.warning("%s: background work failed: %s", self.name, exc)
                raise
            if on_done is not None:
                self.run_in_mailbox(on_done, result, None)
            return result

        task = asyncio.get_running_loop().create_task(runner())
        self._background.add(task)
        task.add_done_callback(lambda done: self._forget_task(done, awaitable))
        return task

    def _forget_task(self, task: asyncio.Task[Any], awaitable: Awaitable[Any]) -> None:
        self._background.discard(task)
        if task.cancelled():
            # Cancelled before its first step: the coroutine never ran; close it
            # quietly instead of leaving a "never awaited" warning.
            if inspect.iscoroutine(awaitable):
                awaitable.close()
        else:
            task.exception()  # retrieved: failures were reported through on_done

    def schedule_every(self, interval: float, function: Callable[[], None]) -> None:
        """Run `function` inside the mailbox every `interval` seconds."""

        async def ticker() -> None:
            while True:
                await asyncio.sleep(interval)
                self.run_in_mailbox(function)

        task = asyncio.get_running_loop().create_task(ticker())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        assert self._loop is not None
        return self._loop.call_later(delay, self.run_in_mailbox, function, *args)

    async def _drain(self) -> None:
        mailbox = self._mailbox
        while True:
            if self._end_of_turn and mailbox.empty():
                # The turn is over: its end-of-turn work runs next, as continuations.
                functions, self._end_of_turn = self._end_of_turn, []
                for function in functions:
                    mailbox.put_nowait((_Callback(function, ()), None))
            message, reply = await mailbox.get()
            if self.failure is not None:
                # Its state is unknown: no handler runs on it any more. An ask learns why
                # at once instead of waiting out its timeout.
                if reply is not None:
                    reply(RpcError(error=f"{self.name} failed and serves no more: {_described(self.failure)}"))
                continue
            try:
                self._dispatch(message, reply)
            except Exception as exc:
                if reply is not None:
                    reply(RpcError(error=_described(exc)))
                self._handler_failed(message, exc)

    def answer_each(self, messages: Iterable[M], handler: Callable[[M], Message]) -> list[Message]:
        """The answers to a batch of messages, each handled in order as if it had come
        alone: a handler that raises on one is supervised as for a message of its own (the
        child it concerns fails, say its job) and that entry is answered with the RpcError;
        once the endpoint itself failed, the rest are refused as `_drain` refuses messages."""
        answers: list[Message] = []
        for message in messages:
            if self.failure is not None:
                answers.append(RpcError(error=f"{self.name} failed and serves no more: {_described(self.failure)}"))
                continue
            try:
                answers.append(handler(message))
            except Exception as exc:
                answers.append(RpcError(error=_described(exc)))
                self._handler_failed(message, exc)
        return answers

    def _handler_failed(self, message: Any, error: Exception) -> None:
        child = self.child_of(message)
        if child is not None:
            supervise(self, child, error)  # what it escalates comes back in escalate_failure
        else:
            self._fail(EndpointFailure(self, _what_failed(message)), error)

    def _fail(self, failure: EndpointFailure, error: BaseException) -> None:
        """This endpoint's own failure, reported to its parent. Unless the parent resumes
        or restarts it, the endpoint stops serving (the parent ends the process, or stops
        the MiniCluster that hosts it)."""
        if supervise(self.parent, failure, error) is Directive.ESCALATE and self.failure is None:
            self.failure = error

    # -- supervision -----------------------------------------------------------------------------

    def child_of(self, message: Any) -> Supervised | None:
        """The child a message concerns, whose failure this endpoint handles; None: the
        failure is the endpoint's own."""
        return None

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        """Strategy for children: start them afresh (override to decide otherwise)."""
        return Directive.RESTART

    def escalate_failure(self, child: Supervised, error: BaseException) -> None:
        """A child failed beyond what this endpoint can handle: it fails in turn."""
        self._fail(EndpointFailure(self, f"escalating the failure of {child.name}"), error)

    def _dispatch(self, message: Any, reply: Reply | None) -> None:
        if isinstance(message, _Callback):
            message.function(*message.args)
            return
        handler = self._handlers.get(type(message))
        if handler is None:
            # Known and harmless (nothing ran, nothing changed): the sender learns it,
            # the endpoint goes on. Not a failure to supervise.
            log.warning("%s: ignoring a %s: no handler for it", self.name, type(message).__name__)
            if reply is not None:
                reply(RpcError(error=f"{self.name} does not handle {type(message).__name__}"))
            return
        answer = handler(message)
        # Most handlers answer a Message (or nothing) at once: no abc instance check for those.
        if answer is not None and not isinstance(answer, Message) and inspect.isawaitable(answer):
            if reply is not None:
                self.run_async(answer, lambda result, error: _answer_later(reply, result, error))
            else:
                self.run_async(answer)
        elif reply is not None:
            reply(answer)


class EndpointFailure:
    """An endpoint as the child its parent is told about, named with what failed in it:
    the handler of a message, a continuation (a timer, the result of background work),
    or a child's failure it escalated."""

    def __init__(self, endpoint: RpcEndpoint, what: str) -> None:
        self.endpoint = endpoint
        self.what = what

    @property
    def name(self) -> str:
        return f"{self.endpoint.name} ({self.what})"

    def restart(self, error: BaseException) -> None:
        self.endpoint.restart(error)


def _what_failed(message: Any) -> str:
    if isinstance(message, _Callback):
        function = message.function
        return f"running {getattr(function, '__qualname__', type(function).__name__)}"
    return f"handling {type(message).__name__}"


def _described(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _answer_later(reply: Reply, result: Any, error: BaseException | None) -> None:
    if error is not None:
        reply(RpcError(error=f"{type(error).__name__}: {error}"))
    else:
        reply(result)
