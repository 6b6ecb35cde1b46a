"""The planner's side of plans resolved on a TaskManager (planner/remote_plan.py): what it
does with each answer, against a real RPC endpoint standing where a TaskManager would."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from flink_runtime.planner.remote_plan import (
    RemotePlanResolver,
    TaskManagerTarget,
    choose_task_manager,
)
from flink_runtime.planner.tasks import VertexPreparationError
from flink_runtime.planner.user_code import UserCodeError
from flink_runtime.rpc.messages import Message, PlanRefused, PlanResolved, ResolvePlan, RpcError
from flink_runtime.rpc.service import RpcService

SECRET = "remote-plan-test-secret"
CONFIG = {"operators": [{"op": "select", "exprs": ["value"]}]}
SCHEMA = '{"type": "struct", "fields": []}'


@dataclass
class Endpoint:
    """An RPC endpoint that answers each ResolvePlan with the next of `answers`."""

    target: TaskManagerTarget
    answers: list[Message]
    received: list[ResolvePlan] = field(default_factory=list)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    service = RpcService("127.0.0.1", 0, cluster_secret=SECRET)
    answers: list[Message] = []
    received: list[ResolvePlan] = []

    def handle(message: Message, reply: Any) -> None:
        assert isinstance(message, ResolvePlan)
        received.append(message)
        reply(answers.pop(0))

    address = asyncio.run_coroutine_threadsafe(service.start(handle), loop).result(10)
    yield Endpoint(TaskManagerTarget("tm-test", address, SECRET, 10 << 20), answers, received)
    asyncio.run_coroutine_threadsafe(service.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


class Local:
    """The planner's own resolution, counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, config: dict[str, Any], input_schemas: list[Any], files: list[str]) -> tuple[dict, str]:
        self.calls += 1
        return {"input_schemas": list(input_schemas)}, "local"


def resolver(
    target: TaskManagerTarget | None, local: Local, own_spark: bool = False, limit: float = 40.0
) -> RemotePlanResolver:
    return RemotePlanResolver(target, "job-1", ["blob:lib"], local, lambda: own_spark, limit)


def test_an_answer_is_used_as_it_comes_and_the_taskmanager_gets_half_the_time_left(endpoint: Endpoint) -> None:
    endpoint.answers.append(PlanResolved(resolved={"input_schemas": [SCHEMA]}, output_schema="remote"))
    local = Local()
    assert resolver(endpoint.target, local)(CONFIG, [SCHEMA], ["/in/a.txt"]) == ({"input_schemas": [SCHEMA]}, "remote")
    assert local.calls == 0
    (asked,) = endpoint.received
    assert (asked.job_id, asked.libraries, asked.config, asked.files) == ("job-1", ["blob:lib"], CONFIG, ["/in/a.txt"])
    assert 15 < asked.timeout <= 20


def test_the_job_codes_error_reads_as_the_planners_own() -> None:
    """Wrapped for the submission's 400 as the planner wraps what it raises itself."""
    raised = ValueError("a transform that refuses its input")
    here = VertexPreparationError.wrapping("vertex 'v' (V)", raised)
    remote = VertexPreparationError.wrapping(
        "vertex 'v' (V)", UserCodeError(str(raised), "ValueError", "Traceback (on the TaskManager)")
    )
    assert str(remote) == str(here)
    assert (remote.cause_name, remote.cause_trace) == ("ValueError", "Traceback (on the TaskManager)")


def test_a_refusal_of_the_job_code_is_raised_with_its_name_and_trace(endpoint: Endpoint) -> None:
    endpoint.answers.append(PlanRefused(error="no such column", cause_name="AnalysisException", cause_trace="tb"))
    local = Local()
    with pytest.raises(UserCodeError) as raised:
        resolver(endpoint.target, local)(CONFIG, [SCHEMA], [])
    assert (str(raised.value), raised.value.cause_name, raised.value.cause_trace) == (
        "no such column",
        "AnalysisException",
        "tb",
    )
    assert local.calls == 0


def test_a_timed_out_answer_fails_saying_so_without_a_second_try(endpoint: Endpoint) -> None:
    endpoint.answers.append(PlanRefused(error="not resolved within 20 s", timed_out=True))
    local = Local()
    with pytest.raises(UserCodeError, match="did not finish within .* on TaskManager tm-test"):
        resolver(endpoint.target, local)(CONFIG, [SCHEMA], [])
    assert local.calls == 0


@pytest.mark.parametrize(
    "answer",
    [
        PlanRefused(error="the job's libraries: cannot fetch", user_code=False),
        RpcError(error="incompatible protocol version 7, this side speaks 6"),
    ],
    ids=["cannot try", "another protocol"],
)
def test_a_taskmanager_that_cannot_resolve_leaves_it_to_the_planner_for_the_rest_of_the_job(
    endpoint: Endpoint, answer: Message
) -> None:
    endpoint.answers.append(answer)
    local = Local()
    resolve = resolver(endpoint.target, local)
    assert resolve(CONFIG, [SCHEMA], []) == ({"input_schemas": [SCHEMA]}, "local")
    assert resolve(CONFIG, [SCHEMA], []) == ({"input_schemas": [SCHEMA]}, "local")
    assert (local.calls, len(endpoint.received)) == (2, 1)


def test_a_planner_with_its_own_jvm_running_or_no_taskmanager_resolves_itself(endpoint: Endpoint) -> None:
    local = Local()
    resolver(endpoint.target, local, own_spark=True)(CONFIG, [SCHEMA], [])
    resolver(None, local)(CONFIG, [SCHEMA], [])
    assert (local.calls, endpoint.received) == (2, [])


def test_a_dropped_connection_falls_back_at_once() -> None:
    """A TaskManager killed while it resolves: its connection drops, the ask does not wait."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    target = TaskManagerTarget("tm-gone", f"tcp://127.0.0.1:{port}", SECRET, 10 << 20)

    def accept_and_drop() -> None:  # the planner's reachability probe, then the RPC's connection
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:  # closed at the test's end
                return
            time.sleep(0.5)
            connection.close()

    threading.Thread(target=accept_and_drop, daemon=True).start()
    local = Local()
    started = time.monotonic()
    assert resolver(target, local, limit=120.0)(CONFIG, [SCHEMA], [])[1] == "local"
    assert time.monotonic() - started < 20  # not the 65 s the TaskManager's answer may take
    listener.close()


def test_a_taskmanager_dead_before_the_ask_falls_back_at_once() -> None:
    """Killed before the JobManager noticed: nothing listens at its address any more, and
    the planner resolves the plan itself instead of waiting half its time limit."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # the port is free: connections are refused
    target = TaskManagerTarget("tm-dead", f"tcp://127.0.0.1:{port}", SECRET, 10 << 20)
    local = Local()
    started = time.monotonic()
    assert resolver(target, local, limit=120.0)(CONFIG, [SCHEMA], [])[1] == "local"
    assert time.monotonic() - started < 5  # not the 60 s half of the limit would be
    assert local.calls == 1


def test_a_taskmanager_with_its_jvm_running_is_chosen_first() -> None:
    @dataclass
    class Registered:
        task_manager_id: str
        address: str
        registered_at: float
        metrics: dict[str, float]

    cold = Registered("tm-cold", "tcp://a:1", 1.0, {})
    warm = Registered("tm-warm", "tcp://b:1", 2.0, {"Status.JVM.Memory.Heap.Used": 1.0})
    chosen = choose_task_manager([cold, warm], SECRET, 1024)
    assert chosen is not None and (chosen.task_manager_id, chosen.address) == ("tm-warm", "tcp://b:1")
    assert choose_task_manager([cold], SECRET, 1024).task_manager_id == "tm-cold"  # type: ignore[union-attr]
    assert choose_task_manager([], SECRET, 1024) is None
    assert SECRET not in repr(chosen)
