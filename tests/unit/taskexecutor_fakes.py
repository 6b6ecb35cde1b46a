"""Fakes for building one TaskExecutor component alone (tests/unit/test_taskexecutor_*.py).

`FakeMailbox` runs a component's background work on the test's event loop and calls
its continuation directly (its turn ends after each, and after each timer); its timers
never fire by themselves: the test fires them (`fire_timers`, `tick`) after moving the
`FakeClock`. `FakeTransport` answers asks
from a script and records what was told. `FakeTask` is a task whose thread the test is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.rpc.messages import Message, TaskDeploymentDescriptor
from flink_runtime.rpc.supervision import Directive, Supervised

T = TypeVar("T")


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeMailbox:
    def __init__(self) -> None:
        self.timers: list[tuple[float, Callable[..., None], tuple[Any, ...]]] = []
        self.periodic: list[tuple[float, Callable[[], None]]] = []
        self.background: list[asyncio.Task[Any]] = []
        self.errors: list[BaseException] = []
        self.turn_end: list[Callable[[], None]] = []

    def run_async(
        self,
        awaitable: Awaitable[T],
        on_done: Callable[[T | None, BaseException | None], None] | None = None,
    ) -> asyncio.Task[None]:
        async def runner() -> None:
            try:
                result = await awaitable
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - handed to on_done, as RpcEndpoint does
                if on_done is None:
                    self.errors.append(exc)
                else:
                    on_done(None, exc)
                self.end_turn()
                return
            if on_done is not None:
                on_done(result, None)
            self.end_turn()

        task = asyncio.get_running_loop().create_task(runner())
        self.background.append(task)
        return task

    def at_end_of_turn(self, function: Callable[[], None]) -> None:
        self.turn_end.append(function)

    def end_turn(self) -> None:
        """The mailbox ran dry: what waits for the end of the turn runs (after a timer, a
        continuation, or when the test says so: a delivered message)."""
        while self.turn_end:
            functions, self.turn_end = self.turn_end, []
            for function in functions:
                function()

    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> None:
        self.timers.append((delay, function, args))

    def schedule_every(self, interval: float, function: Callable[[], None]) -> None:
        self.periodic.append((interval, function))

    def fire_timers(self) -> list[float]:
        """Run the one-shot timers scheduled so far; their delays."""
        timers, self.timers = self.timers, []
        for _, function, args in timers:
            function(*args)
            self.end_turn()
        return [delay for delay, _, _ in timers]

    def tick(self) -> None:
        """Run every periodic function once."""
        for _, function in list(self.periodic):
            function()
            self.end_turn()

    async def settle(self) -> None:
        """Until all background work (and what it started) is done."""
        for _ in range(100):
            pending = [task for task in self.background if not task.done()]
            if not pending:
                await asyncio.sleep(0)
                if all(task.done() for task in self.background):
                    return
                continue
            await asyncio.gather(*pending, return_exceptions=True)
        raise AssertionError("background work did not settle")

    async def close(self) -> None:
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)


class FakeTransport:
    """`answer(address, message)` gives each ask's answer (or raises); tells are recorded."""

    def __init__(self, answer: Callable[[str, Message], Message]) -> None:
        self.answer = answer
        self.asked: list[tuple[str, Message]] = []
        self.told: list[tuple[str, Message]] = []

    def tell(self, address: str, message: Message) -> None:
        self.told.append((address, message))

    async def ask(self, address: str, message: Message, timeout: float) -> Message:
        self.asked.append((address, message))
        await asyncio.sleep(0)
        return self.answer(address, message)


class RestartingSupervisor:
    """The TaskExecutor's strategy for its children: restart them."""

    name = "fake TaskExecutor"

    def __init__(self) -> None:
        self.failed: list[tuple[str, BaseException]] = []

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        self.failed.append((child.name, error))
        return Directive.RESTART

    def escalate_failure(self, child: Supervised, error: BaseException) -> None:
        raise AssertionError(f"{child.name} escalated {error!r}")


def descriptor(execution_id: str, jobmanager_id: str = "jm-1", **fields: Any) -> TaskDeploymentDescriptor:
    defaults: dict[str, Any] = {
        "job_id": "0123456789abcdef0123456789abcdef",
        "job_name": "test job",
        "execution_id": execution_id,
        "jobmanager_id": jobmanager_id,
        "allocation_id": "alloc-1",
        "slot_index": 0,
        "data_namespace": "0123456789abcdef0123456789abcdef",
        "vertex_id": "v1",
        "task_name": f"noop {execution_id}",
        "subtask_index": 0,
        "parallelism": 1,
        "attempt_number": 0,
        "invokable": "noop",
    }
    return TaskDeploymentDescriptor(**{**defaults, **fields})


class FakeTask:
    """A RunningTask (taskmanager/task_table.py) that does nothing by itself."""

    def __init__(self, descriptor: TaskDeploymentDescriptor, report: Callable[..., None] | None = None) -> None:
        self.descriptor = descriptor
        self.execution_id = descriptor.execution_id
        self.job_id = descriptor.job_id
        self.io_metrics: IOMetrics | None = None
        self.missing_partitions: list[str] = []
        self.invokable: Any = None
        self.started = False
        self.cancelled = 0
        self.interrupted = 0
        self.alive = True
        self._report = report

    def start(self) -> None:
        self.started = True

    def cancel(self) -> None:
        self.cancelled += 1

    def interrupt(self) -> None:
        self.interrupted += 1

    def is_alive(self) -> bool:
        return self.alive

    def report(self, state: ExecutionState, error: str | None = None) -> None:
        assert self._report is not None
        self._report(self, state, error)
