"""UpdateTaskExecutionStates: a TaskManager's state updates of one mailbox turn as one message.

The JobManager's side: a real JobManager (in-memory transport, no store) whose jobs are
real JobMasters on the in-memory gateway of jobmaster_fakes.py; its handler is called as
its mailbox calls it. The TaskManager's side is tests/unit/test_taskexecutor_task_table.py;
the whole path runs in the simulator's schedules (tests/simulation/) and through real
processes in tests/integration/test_batch_slots.py and test_taskmanager_churn.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import ExecutionState, JobStatus
from flink_runtime.jobmanager.jobmanager import JobManager
from flink_runtime.jobmanager.jobmaster import JobMaster
from flink_runtime.rpc.messages import (
    Acknowledge,
    AcknowledgeTaskExecutionStates,
    Message,
    RpcError,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
)

from .jobmaster_fakes import FakeGateway, current, job_graph, start_job

E = ExecutionState


class NoTransport:
    """The JobManager's RPC, never used: its handler is called directly."""

    address = "tcp://jobmanager:1"
    framesize = 10 << 20
    on_disconnect = None
    connections: list[str] = []

    def tell(self, address: str, message: Message) -> None:
        raise AssertionError(f"unexpected tell {message!r}")


@pytest.fixture
def jobmanager() -> JobManager:
    jobmanager = JobManager(Configuration(), cluster_secret="batch-test", rpc=NoTransport(), planner=object())  # type: ignore[arg-type]
    jobmanager.jobmanager_id = FakeGateway.jobmanager_id  # the fencing token the fake gateway deploys with
    return jobmanager


def running_job(jobmanager: JobManager, parallelism: int = 2) -> tuple[JobMaster, FakeGateway]:
    job, gateway = start_job(job_graph(("source", parallelism)))
    jobmanager.add_job(job)
    return job, gateway


def update(
    job: JobMaster | str, execution_id: str, state: str, jobmanager_id: str = "jm-1"
) -> UpdateTaskExecutionState:
    job_id = job if isinstance(job, str) else job.job_id
    return UpdateTaskExecutionState(job_id=job_id, execution_id=execution_id, jobmanager_id=jobmanager_id, state=state)


def answers(jobmanager: JobManager, *updates: UpdateTaskExecutionState) -> list[Any]:
    answer = jobmanager.on_update_task_execution_states(UpdateTaskExecutionStates(updates=list(updates)))
    assert isinstance(answer, AcknowledgeTaskExecutionStates)
    return answer.answers


def test_a_batch_is_applied_in_its_order_in_one_turn(jobmanager: JobManager) -> None:
    job, gateway = running_job(jobmanager, parallelism=3)
    first, second = current(job, "source", 0), current(job, "source", 1)
    assert first.state is E.DEPLOYING and second.state is E.DEPLOYING
    got = answers(
        jobmanager,
        update(job, first.attempt_id, "INITIALIZING"),
        update(job, second.attempt_id, "INITIALIZING"),
        update(job, first.attempt_id, "RUNNING"),
        update(job, first.attempt_id, "FINISHED"),
        update(job, second.attempt_id, "RUNNING"),
    )
    assert got == [Acknowledge()] * 5
    assert (first.state, second.state) == (E.FINISHED, E.RUNNING)
    # Its slot was let go at FINISHED: kept by the job, idle, for its next subtask (slot.idle.timeout).
    assert job.deployer.slots.idle_allocations() == [first.assigned_resource]
    # Out of order, an update is refused as it would be alone: FINISHED cannot come back to RUNNING.
    assert answers(jobmanager, update(job, first.attempt_id, "RUNNING")) == [Acknowledge(ok=False)]
    assert first.state is E.FINISHED


def test_a_bad_entry_is_refused_alone_and_the_others_apply(jobmanager: JobManager) -> None:
    job, _ = running_job(jobmanager)
    execution = current(job, "source", 0)
    got = answers(
        jobmanager,
        update(job, execution.attempt_id, "RUNNING", jobmanager_id="an-earlier-run"),  # a stale fencing token
        update(job, execution.attempt_id, "SLEEPING"),
        update("0" * 32, execution.attempt_id, "RUNNING"),
        update(job, "no-such-attempt", "RUNNING"),
        update(job, execution.attempt_id, "INITIALIZING"),
    )
    assert [(a.ok, a.reason.split(":")[0]) for a in got] == [
        (False, "FencingTokenException"),
        (False, "unknown execution state 'SLEEPING'"),
        (False, f"unknown job {'0' * 32}"),
        (False, ""),
        (True, ""),
    ]
    assert execution.state is E.INITIALIZING
    assert job.status is JobStatus.RUNNING


def test_an_entry_whose_handler_raises_fails_its_own_job_only(jobmanager: JobManager) -> None:
    broken, _ = running_job(jobmanager, parallelism=1)
    healthy, _ = running_job(jobmanager, parallelism=1)

    def raises(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("bug in the handler")

    broken.update_task_execution_state = raises  # type: ignore[method-assign]
    got = answers(
        jobmanager,
        update(broken, current(broken, "source").attempt_id, "RUNNING"),
        update(healthy, current(healthy, "source").attempt_id, "INITIALIZING"),
    )
    assert got == [RpcError(error="RuntimeError: bug in the handler"), Acknowledge()]
    # Supervised as a lone message's handler: its job fails globally (no restart strategy),
    # the JobManager and the other job go on.
    assert broken.status is JobStatus.FAILED
    assert "bug in the handler" in broken.exceptions[-1].stacktrace
    assert healthy.status is JobStatus.RUNNING and current(healthy, "source").state is E.INITIALIZING
    assert jobmanager.failure is None
