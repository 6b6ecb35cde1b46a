"""Reconciling the executions the JobManager believes a TaskManager runs with those the
TaskManager reports in its heartbeats, as Flink's ExecutionDeploymentReconciler does.

Every HeartbeatResponse carries an ExecutionDeploymentReport: the executions its
TaskManager runs. Two disagreements matter:

- missing: the JobManager believes an execution is DEPLOYING, INITIALIZING or RUNNING
  there, and the report lacks it. The task is gone without its final state reaching
  the JobManager (the update was never delivered, the task table lost it); left
  alone the job would wait for it forever. The JobManager fails it, and the job's
  restart strategy decides what happens next.
- unknown: the report has an execution the JobManager does not track there (a stale
  task: failed by the JobManager while its TaskManager was paused or partitioned
  away, or deployed by an earlier JobManager). The JobManager cancels it, so it stops
  taking a slot and writing partitions nobody reads.

A report and the JobManager's state are not taken at the same instant, so each rule
has a grace that keeps a healthy cluster from ever tripping it:

- An execution is missing only from a report answering a heartbeat request sent after
  its TaskManager acknowledged the deployment (SubmitTask answered successfully; see
  `complete_deployment_of`). A request sent earlier may be answered before the task
  is in the TaskManager's table, and a deployment still pending is not missing.
- A TaskManager reports a task that ended until the JobManager acknowledged its final
  state (TaskTable.final_states_in_flight): the final update and the heartbeat
  answer travel on different connections, in either order, and a task that just
  finished must not look missing meanwhile.
- An execution is unknown only if two consecutive reports have it: one whose final
  state the JobManager has just acknowledged may still be in the report taken before
  the TaskManager received the acknowledgement. Each unknown execution is cancelled
  once (the TaskManager's own cancellation timeout takes over from there).

No clock (times are the caller's monotonic seconds) and no I/O, so a unit test can play
any timeline; the state it keeps per TaskManager is what the graces above need.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ExecutionDeploymentReport:
    """The executions one TaskManager reported, answering the heartbeat request sent at
    `requested_at` (the JobManager's monotonic clock)."""

    executions: frozenset[str]
    requested_at: float

    @classmethod
    def of(cls, executions: Iterable[str], requested_at: float) -> ExecutionDeploymentReport:
        return cls(frozenset(executions), requested_at)


@dataclass(frozen=True)
class DeploymentReconciliation:
    """What one report calls for."""

    missing: list[str] = field(default_factory=list)  # to fail: believed running, not reported
    unknown: list[str] = field(default_factory=list)  # to cancel: reported, not tracked there

    def __bool__(self) -> bool:
        return bool(self.missing or self.unknown)


class ExecutionDeploymentReconciler:
    """Reconciliation state of one TaskManager: when each deployment to it was
    acknowledged, which executions the previous report had that nobody tracks, and
    which of those were cancelled already."""

    def __init__(self) -> None:
        self._deployed_at: dict[str, float] = {}
        self._unknown_before: set[str] = set()
        self._cancelled: set[str] = set()

    def complete_deployment_of(self, execution_id: str, at: float) -> None:
        """The TaskManager accepted the execution (answered its SubmitTask) at `at`."""
        self._deployed_at.setdefault(execution_id, at)

    def _deployed_before(self, execution_id: str, requested_at: float) -> bool:
        deployed_at = self._deployed_at.get(execution_id)
        return deployed_at is not None and deployed_at < requested_at

    def reconcile(
        self, report: ExecutionDeploymentReport, expected: Collection[str], tracked: Collection[str] = ()
    ) -> DeploymentReconciliation:
        """Compare a report with what the JobManager believes now.

        expected: executions the JobManager believes DEPLOYING, INITIALIZING or RUNNING
            on this TaskManager: failed when the report lacks them (after the grace).
        tracked: other executions it still tracks there (CANCELING ones): never
            failed by a report, never cancelled again because of one.
        """
        reported = report.executions
        missing = [
            execution_id
            for execution_id in expected
            if execution_id not in reported and self._deployed_before(execution_id, report.requested_at)
        ]
        unknown_now = reported.difference(expected, tracked)
        unknown = sorted((unknown_now & self._unknown_before) - self._cancelled)
        self._unknown_before = set(unknown_now)
        self._cancelled = (self._cancelled | set(unknown)) & unknown_now
        # Forget deployments the JobManager no longer believes in (ended, failed here).
        believed = set(expected).union(tracked)
        self._deployed_at = {e: at for e, at in self._deployed_at.items() if e in believed}
        return DeploymentReconciliation(missing=missing, unknown=unknown)
