"""Supervision in the actor layer: a handler that raises is reported to the parent,
whose strategy resumes, restarts or escalates it (rpc/supervision.py). Escalation is
the default: an endpoint's own failure reaches the top of its process, which ends it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from flink_runtime.minicluster import MiniCluster, MiniClusterFailed
from flink_runtime.rpc.endpoint import EndpointFailure, RpcEndpoint, handles
from flink_runtime.rpc.messages import CancelJob, CancelTask, Heartbeat, HeartbeatResponse, ReleasePartitions
from flink_runtime.rpc.service import RpcService
from flink_runtime.rpc.supervision import (
    EXIT_INTERNAL_ERROR,
    Directive,
    ProcessSupervisor,
    Supervised,
    Supervisor,
)
from tests.helpers.supervision import RecordingSupervisor


class Child:
    def __init__(self, name: str, restart_fails: bool = False) -> None:
        self.name = name
        self.restarted: list[BaseException] = []
        self.restart_fails = restart_fails

    def restart(self, error: BaseException) -> None:
        if self.restart_fails:
            raise RuntimeError("cannot restart")
        self.restarted.append(error)


class Parent(RpcEndpoint):
    """Handles CancelJob for its children (one per job id), CancelTask for itself; both
    raise. Heartbeat answers (to see whether it still serves)."""

    def __init__(self, parent: Supervisor) -> None:
        super().__init__("parent", RpcService("127.0.0.1", 0))
        self.parent = parent
        self.children = {"job-a": Child("job-a"), "broken": Child("broken", restart_fails=True)}

    def child_of(self, message: Any) -> Child | None:
        return self.children.get(getattr(message, "job_id", ""))

    @handles(CancelJob)
    def on_cancel_job(self, message: CancelJob) -> None:
        raise ValueError(f"bug while cancelling {message.job_id}")

    @handles(CancelTask)
    def on_cancel_task(self, message: CancelTask) -> None:
        raise KeyError(message.execution_id)

    @handles(Heartbeat)
    def on_heartbeat(self, message: Heartbeat) -> HeartbeatResponse:
        return HeartbeatResponse(task_manager_id="alive")


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


async def still_serves(endpoint: RpcEndpoint) -> bool:
    try:
        return await endpoint.ask_self(Heartbeat(jobmanager_id="x"), timeout=1) == HeartbeatResponse(
            task_manager_id="alive"
        )
    except RuntimeError as error:
        assert "failed and serves no more" in str(error)
        return False


def test_contracts_are_protocols_every_party_meets() -> None:
    endpoint = Parent(ProcessSupervisor())
    for supervisor in (endpoint, ProcessSupervisor(), MiniCluster(), RecordingSupervisor()):
        assert isinstance(supervisor, Supervisor), supervisor
    assert isinstance(EndpointFailure(endpoint, "handling CancelTask"), Supervised)
    assert isinstance(Child("c"), Supervised)


def test_an_endpoint_nobody_adopts_has_the_process_top_as_parent() -> None:
    endpoint = RpcEndpoint("alone", RpcService("127.0.0.1", 0))
    assert isinstance(endpoint.parent, ProcessSupervisor)
    assert endpoint.parent.child_failed(EndpointFailure(endpoint, "x"), ValueError()) is Directive.ESCALATE


async def test_a_childs_failure_restarts_the_child_and_the_endpoint_goes_on() -> None:
    grandparent = RecordingSupervisor()
    parent = Parent(grandparent)
    await parent.start()
    try:
        parent.tell_self(CancelJob(job_id="job-a"))
        await settle()
        (error,) = parent.children["job-a"].restarted
        assert isinstance(error, ValueError) and "job-a" in str(error)
        assert grandparent.told == []  # the parent's own parent never heard of it
        assert await still_serves(parent)
    finally:
        await parent.stop()


async def test_a_child_that_cannot_restart_escalates_and_its_parent_serves_no_more() -> None:
    grandparent = RecordingSupervisor()
    parent = Parent(grandparent)
    await parent.start()
    try:
        parent.tell_self(CancelJob(job_id="broken"))
        await settle()
        ((child, error),) = grandparent.told
        assert child.name == "parent (escalating the failure of broken)" and str(error) == "cannot restart"
        assert grandparent.escalated == grandparent.told
        assert not await still_serves(parent)
        assert str(parent.failure) == "cannot restart"
    finally:
        await parent.stop()


async def test_the_endpoints_own_failure_escalates_named_with_what_failed() -> None:
    grandparent = RecordingSupervisor()
    parent = Parent(grandparent)
    await parent.start()
    try:
        with pytest.raises(RuntimeError, match="KeyError: 'e-1'"):
            await parent.ask_self(CancelTask(execution_id="e-1"), timeout=1)  # the asker learns why
        ((child, error),) = grandparent.escalated
        assert child.name == "parent (handling CancelTask)" and isinstance(error, KeyError)
        # Its state is unknown: it runs no handler any more, and says so to an ask.
        with pytest.raises(RuntimeError, match="parent failed and serves no more: KeyError: 'e-1'"):
            await parent.ask_self(Heartbeat(jobmanager_id="x"), timeout=1)
        with pytest.raises(RuntimeError, match="serves no more"):
            await parent.call_in_mailbox(lambda: 1, timeout=1)
        assert len(grandparent.escalated) == 1
    finally:
        await parent.stop()


async def test_a_continuation_that_raises_is_named_by_its_function() -> None:
    grandparent = RecordingSupervisor()
    parent = Parent(grandparent)
    await parent.start()
    try:

        def checkpoint_timer() -> None:
            raise ZeroDivisionError("timer")

        parent.run_in_mailbox(checkpoint_timer)
        await settle()
        ((child, error),) = grandparent.escalated
        assert "running " in child.name and "checkpoint_timer" in child.name
    finally:
        await parent.stop()


@pytest.mark.parametrize("directive", [Directive.RESUME, Directive.RESTART])
async def test_a_parent_may_resume_or_restart_a_known_harmless_failure(directive: Directive) -> None:
    class Restartable(Parent):
        restarted = 0

        def restart(self, error: BaseException) -> None:
            self.restarted += 1

    grandparent = RecordingSupervisor(directive)
    parent = Restartable(grandparent)
    await parent.start()
    try:
        parent.tell_self(CancelTask(execution_id="e-1"))
        await settle()
        assert len(grandparent.told) == 1 and grandparent.escalated == []
        assert parent.restarted == (1 if directive is Directive.RESTART else 0)
        assert await still_serves(parent) and parent.failure is None
    finally:
        await parent.stop()


async def test_a_restart_the_endpoint_cannot_do_escalates() -> None:
    grandparent = RecordingSupervisor(Directive.RESTART)  # RpcEndpoint.restart raises: it cannot
    parent = Parent(grandparent)
    await parent.start()
    try:
        parent.tell_self(CancelTask(execution_id="e-1"))
        await settle()
        assert len(grandparent.escalated) == 1 and not await still_serves(parent)
    finally:
        await parent.stop()


async def test_a_message_without_a_handler_is_answered_and_not_a_failure() -> None:
    grandparent = RecordingSupervisor()
    parent = Parent(grandparent)
    await parent.start()
    try:
        with pytest.raises(RuntimeError, match="parent does not handle ReleasePartitions"):
            await parent.ask_self(ReleasePartitions(job_id="j"), timeout=1)
        assert grandparent.told == [] and await still_serves(parent)
    finally:
        await parent.stop()


def test_a_minicluster_escalates_its_endpoints_failures_to_its_parent() -> None:
    process_top = RecordingSupervisor()
    cluster = MiniCluster()
    cluster.parent = process_top
    failure = EndpointFailure(Parent(process_top), "handling CancelTask")
    assert cluster.child_failed(failure, KeyError("e")) is Directive.ESCALATE
    cluster.escalate_failure(failure, KeyError("e"))
    ((child, error),) = process_top.escalated
    assert child is failure and isinstance(error, KeyError)
    assert cluster.failure is None  # the process's top decides; the cluster keeps nothing


def test_a_minicluster_at_the_top_of_its_host_keeps_the_reason_and_refuses_calls() -> None:
    cluster = MiniCluster()
    failure = EndpointFailure(Parent(ProcessSupervisor()), "handling CancelTask")
    cluster.escalate_failure(failure, KeyError("e-7"))
    cluster.escalate_failure(failure, ValueError("a later one"))  # the first reason is kept
    assert isinstance(cluster.failure, MiniClusterFailed)
    assert str(cluster.failure) == "parent (handling CancelTask) failed: KeyError: 'e-7'"
    for call in (lambda: cluster.rest_url, lambda: cluster.call(asyncio.sleep), cluster.close):
        with pytest.raises(MiniClusterFailed, match="KeyError: 'e-7'"):
            call()


# -- at the top of a real process ------------------------------------------------------------

PROBE_PROCESS = """
import asyncio, logging, sys
from flink_runtime.rpc.endpoint import RpcEndpoint, handles
from flink_runtime.rpc.messages import CancelTask
from flink_runtime.rpc.service import RpcService

logging.basicConfig(level=logging.INFO)


class Probe(RpcEndpoint):
    @handles(CancelTask)
    def on_cancel_task(self, message):
        raise RuntimeError(f"half-cancelled {message.execution_id}")


def explode():
    raise RuntimeError("the timer's state is broken")


async def main():
    endpoint = Probe("probe", RpcService("127.0.0.1", 0))  # nobody adopts it
    await endpoint.start()
    if sys.argv[1] == "timer":
        endpoint.schedule_once(0.05, explode)
    else:  # a message from another process's endpoint
        peer = RpcService("127.0.0.1", 0)
        await peer.start(lambda message, reply: None)
        peer.tell(endpoint.address, CancelTask(execution_id="e-3"))
    await asyncio.sleep(3.0)
    print("still running", flush=True)
    await endpoint.stop()

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("failing", "reason"),
    [
        ("timer", "probe (running explode) failed and nothing above it can handle it: RuntimeError: the timer's"),
        ("message", "probe (handling CancelTask) failed and nothing above it can handle it: RuntimeError: half-"),
    ],
)
def test_what_reaches_the_top_of_a_process_ends_it_with_the_reason(failing: str, reason: str) -> None:
    """A real process whose endpoint's timer, or handler of a message from a peer, raises:
    by default the process exits 70 with the reason logged (before: a message's failure was
    resumed, and any endpoint outside the command line's resumed everything)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE_PROCESS), failing], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == EXIT_INTERNAL_ERROR, done.stdout + done.stderr
    assert "still running" not in done.stdout
    assert reason in done.stderr and "; exiting with code 70" in done.stderr, done.stderr
