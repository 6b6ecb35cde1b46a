"""Supervision in the actor layer: a handler that raises is reported to the parent,
whose strategy resumes, restarts or escalates it (rpc/supervision.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from flink_runtime.rpc.endpoint import RpcEndpoint, handles
from flink_runtime.rpc.messages import CancelJob, CancelTask
from flink_runtime.rpc.service import RpcService
from flink_runtime.rpc.supervision import (
    EXIT_INTERNAL_ERROR,
    Directive,
    ProcessSupervisor,
    ResumingSupervisor,
    Supervised,
)


class Child:
    def __init__(self, name: str, restart_fails: bool = False) -> None:
        self.name = name
        self.restarted: list[BaseException] = []
        self.restart_fails = restart_fails

    def restart(self, error: BaseException) -> None:
        if self.restart_fails:
            raise RuntimeError("cannot restart")
        self.restarted.append(error)


class Recorder:
    """A parent that records what it is told and answers with a fixed directive."""

    def __init__(self, directive: Directive) -> None:
        self.directive = directive
        self.told: list[tuple[Supervised, BaseException]] = []
        self.escalated: list[BaseException] = []

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        self.told.append((child, error))
        return self.directive

    def escalate_failure(self, child: Supervised, error: BaseException) -> None:
        self.escalated.append(error)


class Parent(RpcEndpoint):
    """Handles CancelJob for its children (one per job id), CancelTask for itself; both raise."""

    def __init__(self) -> None:
        super().__init__("parent", RpcService("127.0.0.1", 0))
        self.children = {"job-a": Child("job-a"), "broken": Child("broken", restart_fails=True)}

    def child_of(self, message: Any) -> Child | None:
        return self.children.get(getattr(message, "job_id", ""))

    @handles(CancelJob)
    def on_cancel_job(self, message: CancelJob) -> None:
        raise ValueError(f"bug while cancelling {message.job_id}")

    @handles(CancelTask)
    def on_cancel_task(self, message: CancelTask) -> None:
        raise KeyError(message.execution_id)


async def settle(endpoint: RpcEndpoint) -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


async def test_a_childs_failure_restarts_the_child() -> None:
    parent = Parent()
    parent.parent = Recorder(Directive.RESUME)
    await parent.start()
    try:
        parent.tell_self(CancelJob(job_id="job-a"))
        await settle(parent)
        (error,) = parent.children["job-a"].restarted
        assert isinstance(error, ValueError) and "job-a" in str(error)
        assert parent.parent.told == []  # the parent's own parent never heard of it
    finally:
        await parent.stop()


async def test_a_child_that_cannot_restart_escalates_to_the_parents_parent() -> None:
    parent = Parent()
    grandparent = Recorder(Directive.RESUME)
    parent.parent = grandparent
    await parent.start()
    try:
        parent.tell_self(CancelJob(job_id="broken"))
        await settle(parent)
        ((child, error),) = grandparent.told
        assert child.name == "parent" and str(error) == "cannot restart"
    finally:
        await parent.stop()


async def test_the_endpoints_own_failure_goes_to_its_parent_with_what_failed() -> None:
    parent = Parent()
    grandparent = Recorder(Directive.RESUME)
    parent.parent = grandparent
    await parent.start()
    try:
        parent.tell_self(CancelTask(execution_id="e-1"))
        parent.run_in_mailbox(lambda: 1 / 0)
        await settle(parent)
        (request, continuation) = grandparent.told
        assert isinstance(request[1], KeyError) and not request[0].internal  # one request from outside
        assert isinstance(continuation[1], ZeroDivisionError) and continuation[0].internal
    finally:
        await parent.stop()


def test_the_process_supervisor_resumes_requests_and_escalates_its_own_continuations() -> None:
    outside, own = Child("x"), Child("y")
    outside.internal, own.internal = False, True  # type: ignore[attr-defined]
    assert ProcessSupervisor().child_failed(outside, ValueError()) is Directive.RESUME
    assert ProcessSupervisor().child_failed(own, ValueError()) is Directive.ESCALATE
    assert ResumingSupervisor().child_failed(own, ValueError()) is Directive.RESUME


@pytest.mark.parametrize("hosted", [False, True])
def test_what_reaches_the_top_of_a_process_exits_it_with_the_reason(hosted: bool) -> None:
    """A real process: its endpoint's timer raises. Under ProcessSupervisor the process
    exits 70 with the reason logged; hosted (a MiniCluster's default) it goes on."""
    script = textwrap.dedent(
        f"""
        import asyncio, logging
        from flink_runtime.rpc.endpoint import RpcEndpoint
        from flink_runtime.rpc.service import RpcService
        from flink_runtime.rpc.supervision import ProcessSupervisor

        logging.basicConfig(level=logging.INFO)

        def explode():
            raise RuntimeError("the timer's state is broken")

        async def main():
            endpoint = RpcEndpoint("probe", RpcService("127.0.0.1", 0))
            if not {hosted}:
                endpoint.parent = ProcessSupervisor()
            await endpoint.start()
            endpoint.schedule_once(0.05, explode)
            await asyncio.sleep(1.0)
            print("still running", flush=True)
            await endpoint.stop()

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    if hosted:
        assert done.returncode == 0, done.stderr
        assert "still running" in done.stdout
    else:
        assert done.returncode == EXIT_INTERNAL_ERROR, done.stderr
        assert "still running" not in done.stdout
        assert "the timer's state is broken" in done.stderr and "exiting with code 70" in done.stderr
