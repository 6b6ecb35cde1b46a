"""Reconciliation decisions (heartbeat/reconciliation.py): believed vs reported executions."""

from __future__ import annotations

from flink_runtime.heartbeat import ExecutionDeploymentReconciler, ExecutionDeploymentReport


def report(*executions: str, at: float) -> ExecutionDeploymentReport:
    return ExecutionDeploymentReport.of(executions, requested_at=at)


def test_agreement_calls_for_nothing() -> None:
    reconciler = ExecutionDeploymentReconciler()
    reconciler.complete_deployment_of("a", at=1.0)
    decision = reconciler.reconcile(report("a", at=2.0), expected=["a"])
    assert not decision
    assert decision.missing == [] and decision.unknown == []


def test_an_acknowledged_deployment_missing_from_a_later_request_is_missing() -> None:
    reconciler = ExecutionDeploymentReconciler()
    reconciler.complete_deployment_of("a", at=1.0)
    reconciler.complete_deployment_of("b", at=1.0)
    decision = reconciler.reconcile(report("b", at=2.0), expected=["a", "b"])
    assert decision.missing == ["a"]
    assert decision.unknown == []


def test_a_report_requested_before_the_acknowledgement_cannot_miss_it() -> None:
    reconciler = ExecutionDeploymentReconciler()
    reconciler.complete_deployment_of("a", at=5.0)
    # The request left at 4.0: the TaskManager may have answered before it had the task.
    assert reconciler.reconcile(report(at=4.0), expected=["a"]).missing == []
    assert reconciler.reconcile(report(at=5.0), expected=["a"]).missing == []  # same instant: still grace
    assert reconciler.reconcile(report(at=6.0), expected=["a"]).missing == ["a"]


def test_a_pending_deployment_is_never_missing() -> None:
    reconciler = ExecutionDeploymentReconciler()  # "a" is DEPLOYING, SubmitTask not answered yet
    assert reconciler.reconcile(report(at=100.0), expected=["a"]).missing == []


def test_an_unknown_execution_is_cancelled_once_two_consecutive_reports_have_it() -> None:
    reconciler = ExecutionDeploymentReconciler()
    assert reconciler.reconcile(report("stale", at=1.0), expected=[]).unknown == []
    assert reconciler.reconcile(report("stale", at=2.0), expected=[]).unknown == ["stale"]
    # Cancelled once: the TaskManager's own cancellation timeout takes over from there.
    assert reconciler.reconcile(report("stale", at=3.0), expected=[]).unknown == []


def test_an_execution_unknown_only_once_is_left_alone() -> None:
    """A task whose final state the JobManager acknowledged just before the report was
    taken appears once, and is gone from the next report."""
    reconciler = ExecutionDeploymentReconciler()
    assert reconciler.reconcile(report("just-finished", at=1.0), expected=[]).unknown == []
    assert reconciler.reconcile(report(at=2.0), expected=[]).unknown == []
    assert reconciler.reconcile(report("just-finished", at=3.0), expected=[]).unknown == []


def test_a_stale_task_that_comes_back_is_cancelled_again() -> None:
    reconciler = ExecutionDeploymentReconciler()
    reconciler.reconcile(report("x", at=1.0), expected=[])
    assert reconciler.reconcile(report("x", at=2.0), expected=[]).unknown == ["x"]
    reconciler.reconcile(report(at=3.0), expected=[])
    reconciler.reconcile(report("x", at=4.0), expected=[])
    assert reconciler.reconcile(report("x", at=5.0), expected=[]).unknown == ["x"]


def test_executions_being_cancelled_are_neither_failed_nor_cancelled_again() -> None:
    reconciler = ExecutionDeploymentReconciler()
    reconciler.complete_deployment_of("canceling-gone", at=1.0)
    reconciler.complete_deployment_of("canceling-still-there", at=1.0)
    for at in (2.0, 3.0):
        decision = reconciler.reconcile(
            report("canceling-still-there", at=at), expected=[], tracked=["canceling-gone", "canceling-still-there"]
        )
        assert not decision


def test_a_deployment_the_jobmanager_forgot_is_not_remembered() -> None:
    """Acknowledgements of executions no longer believed there are dropped, so the state
    stays as small as what runs."""
    reconciler = ExecutionDeploymentReconciler()
    reconciler.complete_deployment_of("old", at=1.0)
    reconciler.reconcile(report(at=2.0), expected=[])  # "old" ended meanwhile
    # Were it believed again (it cannot be: attempt ids are never reused), it would be pending.
    assert reconciler.reconcile(report(at=3.0), expected=["old"]).missing == []


def test_missing_and_unknown_together() -> None:
    reconciler = ExecutionDeploymentReconciler()
    for execution_id in ("a", "b", "c"):
        reconciler.complete_deployment_of(execution_id, at=1.0)
    reconciler.reconcile(report("a", "b", "c", "zombie", at=2.0), expected=["a", "b", "c"])
    decision = reconciler.reconcile(report("a", "zombie", at=3.0), expected=["a", "b", "c"])
    assert sorted(decision.missing) == ["b", "c"]
    assert decision.unknown == ["zombie"]
