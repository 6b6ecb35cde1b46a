"""The JobMaster's decisions, without I/O: a state machine fed stimuli that returns actions.

Flink's DefaultScheduler decides and acts in one class; here the deciding half is this
module and the acting half is the JobMaster (jobmanager/jobmaster.py), which executes
the actions it gets back, in order. Nothing here sends a message, starts a timer,
reads a clock or touches a slot: time comes in as `now` (monotonic seconds) and
timers as stimuli (`region_restart_due`, `restart_due`), as heartbeat/manager.py and
registration/retrying.py do. So every decision below can be played in a unit test.

It decides:

- what a task failure restarts and after how long: the region the failover strategy
  names (the failed subtask and the producers of the inputs it lost) while the job
  stays RUNNING, or every subtask (RESTARTING), or nothing (FAILING, then FAILED);
- what a global failure (a handler of the job raised) does: a full restart when the
  restart strategy allows it, else FAILED with the cause;
- when every execution has stopped, what the job becomes: FAILED, CANCELED, a
  restart after the delay, or (every subtask FINISHED) the publish of its output,
  then FINISHED, or the next round of a continuous job;
- what a stop-with-savepoint needs: the publish, then the savepoint, then FINISHED
  (or, the savepoint failing, the job goes on in rounds).

The job's status lives here; the shell publishes each `Transition` it is handed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from flink_runtime.executiongraph import ExecutionState, ExecutionVertex, JobStatus
from flink_runtime.scheduler.failover import ExecutionFailureHandler
from flink_runtime.scheduler.strategy import inputs_finished

V = TypeVar("V")


# -- actions (what the shell does) -----------------------------------------------------------


@dataclass(frozen=True)
class Transition:
    """The job's status changed: publish it (JobStatusChanged, timestamps, log)."""

    old: JobStatus
    new: JobStatus


@dataclass(frozen=True)
class CancelAll:
    """Cancel every execution that has not ended; then ask `check_completion` again."""


@dataclass(frozen=True)
class ScheduleRegionRestart(Generic[V]):
    """After `delay`, feed `region_restart_due(failed_attempt, vertices)`."""

    failed_attempt: str
    vertices: frozenset[V]
    delay: float


@dataclass(frozen=True)
class ScheduleRestart:
    """Every execution stopped: after `delay`, feed `restart_due()`."""

    delay: float


@dataclass(frozen=True)
class RestartVertices(Generic[V]):
    """A region restarts now: new attempts for `reset` (`rerun` are finished producers
    among them, whose output is lost: their partitions and completed splits are
    forgotten); then deploy those `deployable_after_region_reset` names, the others
    wait for their inputs (ScheduleOrUpdateConsumers)."""

    reset: tuple[V, ...]
    rerun: tuple[V, ...]


@dataclass(frozen=True)
class RestartAll:
    """A full restart now: a new attempt for every subtask, the sources deployed first."""


@dataclass(frozen=True)
class Publish:
    """Every subtask finished: publish what the sinks staged (in a worker), then feed
    `round_done` (`next_round`) or `published`."""

    next_round: bool


@dataclass(frozen=True)
class TriggerStopSavepoint:
    """The stopped job's output is published: write the stop's savepoint, then feed
    `stop_savepoint_done`."""


@dataclass(frozen=True)
class AwaitInput:
    """A round is done and published: the job stays RUNNING, looking for new input."""


@dataclass(frozen=True)
class ResumeRounds:
    """The stop's savepoint failed: the job goes on, as after a round."""


@dataclass(frozen=True)
class ConcludeFailed:
    """Feed `conclude_failed()`: FAILED now, unless cancelling ended the job already."""


@dataclass(frozen=True)
class Finish:
    """The job is terminal: give back its slots, fail pending checkpoints, answer waiters."""


Action = (
    Transition
    | CancelAll
    | ScheduleRegionRestart[ExecutionVertex]
    | ScheduleRestart
    | RestartVertices[ExecutionVertex]
    | RestartAll
    | Publish
    | TriggerStopSavepoint
    | AwaitInput
    | ResumeRounds
    | ConcludeFailed
    | Finish
)


# -- the state machine -------------------------------------------------------------------------


@dataclass
class JobScheduling:
    """One job's status and the counts its decisions need."""

    failure_handler: ExecutionFailureHandler[ExecutionVertex]
    status: JobStatus = JobStatus.INITIALIZING
    total: int = 0  # subtasks of the graph
    active: int = 0  # executions of the current attempt set not ended yet
    finished: int = 0  # executions FINISHED
    # Publishing the output (or writing a stop's savepoint): no completion meanwhile.
    finalizing: bool = False
    restart_delay: float = 0.0
    num_restarts: int = 0  # failovers so far, regional and full (Flink's numRestarts)
    # Failed attempt -> the attempts of the producers whose partitions it lost, as they were
    # when it failed: by the region restart's due time one may have run again already.
    lost_attempts: dict[str, dict[ExecutionVertex, str]] = field(default_factory=dict)

    # -- status ------------------------------------------------------------------------------

    def to(self, new: JobStatus) -> Transition:
        """Change the status (IllegalStateTransition if the diagram forbids it)."""
        old, self.status = self.status, self.status.check_transition(new)
        return Transition(old, new)

    def graph_built(self, total: int) -> None:
        self.total = self.active = total
        self.finished = 0

    def subtasks_removed(self, count: int) -> None:
        """A vertex's parallelism was decided lower: `count` subtasks that never ran are gone."""
        self.total -= count
        self.active -= count

    def reset_counts(self) -> None:
        """Every subtask got a new attempt (a full restart, a new round)."""
        self.active = self.total
        self.finished = 0

    # -- executions --------------------------------------------------------------------------

    def execution_started_again(self, was_finished: bool) -> None:
        """A terminal execution got a new attempt (region restart)."""
        self.active += 1
        if was_finished:
            self.finished -= 1

    def execution_stopped(self, finished: bool) -> None:
        self.active -= 1
        if finished:
            self.finished += 1

    def task_failed(
        self,
        failed: ExecutionVertex,
        failed_attempt: str,
        all_vertices: Collection[ExecutionVertex],
        lost_producers: Iterable[ExecutionVertex],
        now: float,
    ) -> list[Action]:
        """A subtask failed (it has stopped already): restart what the failure handler
        names, or fail the job."""
        if self.status not in (JobStatus.CREATED, JobStatus.RUNNING):
            return []  # already failing, cancelling or restarting: completion decides
        lost_producers = list(lost_producers)
        result = self.failure_handler.task_failed(failed, all_vertices, now, lost_producers=lost_producers)
        if not result.can_restart:
            return [self.to(JobStatus.FAILING), CancelAll()]
        if not result.global_failover:
            if lost_producers:
                self.lost_attempts[failed_attempt] = {p: p.current_execution.attempt_id for p in lost_producers}
            return [ScheduleRegionRestart(failed_attempt, result.vertices_to_restart, result.restart_delay)]
        self.restart_delay = result.restart_delay
        return [self.to(JobStatus.RESTARTING), CancelAll()]

    def region_restart_due(
        self, failed: ExecutionVertex, failed_attempt: str, region: Collection[ExecutionVertex]
    ) -> list[Action]:
        """The region's restart delay passed: new attempts for its subtasks, unless the job
        moved on meanwhile (cancelled, failed, fully restarted)."""
        lost = self.lost_attempts.pop(failed_attempt, {})
        if self.status is not JobStatus.RUNNING or failed.current_execution.attempt_id != failed_attempt:
            return []
        self.num_restarts += 1
        # A producer not FINISHED is running again already, and one whose attempt changed
        # since the failure ran again already: its new partition is not lost (another
        # consumer lost the old one too). Rerunning it would supersede the partition that
        # consumers deployed meanwhile read (simulation seed 184).
        rerun = tuple(
            v
            for v in region
            if v is not failed
            and v.current_execution.state is ExecutionState.FINISHED
            and lost.get(v, v.current_execution.attempt_id) == v.current_execution.attempt_id
        )
        reset = (failed, *rerun)
        for vertex in reset:
            self.execution_started_again(was_finished=vertex is not failed)
        return [RestartVertices(reset, rerun)]

    def deployable_after_region_reset(self, reset: Iterable[ExecutionVertex]) -> tuple[ExecutionVertex, ...]:
        """Of a region just reset: those whose inputs are all available now (the others
        are deployed when their producers report their partitions)."""
        return tuple(v for v in reset if inputs_finished(v))

    def restart_due(self) -> list[Action]:
        """A full restart's delay passed after every execution stopped."""
        if self.status is not JobStatus.RESTARTING:
            return []
        self.num_restarts += 1
        self.reset_counts()
        return [self.to(JobStatus.RUNNING), RestartAll()]

    def global_failure(self, all_vertices: Collection[ExecutionVertex], now: float) -> list[Action]:
        """Something outside one subtask failed (a handler of the job raised), so the job's
        bookkeeping cannot be trusted: every subtask restarts if the restart strategy
        allows it (Flink's global failover), else the job fails at once with the cause."""
        if self.status.is_terminal:
            return []
        if self.status is JobStatus.INITIALIZING:
            return [self.to(JobStatus.FAILED), Finish()]
        # Recount from the graph: the failed handler may have left the counts half-updated.
        self.active = sum(1 for v in all_vertices if not v.current_execution.is_terminal)
        if self.status in (JobStatus.RUNNING, JobStatus.RESTARTING) and not self.finalizing:
            result = self.failure_handler.global_failure(all_vertices, now)
            if result.can_restart:
                self.restart_delay = result.restart_delay
                actions: list[Action] = [] if self.status is JobStatus.RESTARTING else [self.to(JobStatus.RESTARTING)]
                return [*actions, CancelAll()]
        self.finalizing = False
        actions = [self.to(JobStatus.FAILING)] if self.status.can_transition_to(JobStatus.FAILING) else []
        return [*actions, CancelAll(), ConcludeFailed()]

    def conclude_failed(self) -> list[Action]:
        """FAILED now, without waiting for the cancelled executions (unless already terminal:
        cancelling may have ended the job)."""
        if self.status.is_terminal:
            return []
        return [self.to(JobStatus.FAILED), Finish()]

    def cancel(self) -> list[Action]:
        """Start cancelling: nothing to do for a job that ended (the JobMaster refuses
        that), cancels or fails already."""
        if self.status.is_terminal or self.status in (JobStatus.CANCELLING, JobStatus.FAILING):
            return []
        # During a restart: what still runs is being cancelled already, and the pending
        # restart sees CANCELLING and does nothing.
        return [self.to(JobStatus.CANCELLING), CancelAll()]

    # -- completion --------------------------------------------------------------------------

    def check_completion(self, continuous: bool, stopping: bool) -> list[Action]:
        """What the job becomes once no execution runs any more."""
        if self.active > 0 or self.status.is_terminal or self.finalizing:
            return []
        if self.status is JobStatus.RESTARTING:
            return [ScheduleRestart(self.restart_delay)]
        if self.status is JobStatus.FAILING:
            return [self.to(JobStatus.FAILED), Finish()]
        if self.status is JobStatus.CANCELLING:
            return [self.to(JobStatus.CANCELED), Finish()]
        if self.status is JobStatus.RUNNING and self.finished == self.total:
            self.finalizing = True
            return [Publish(next_round=continuous and not stopping)]
        return []

    def published(self, failed: bool, stopping: bool) -> list[Action]:
        """The output of a job that does not go on in rounds is published (or failed to be)."""
        if not failed and stopping:
            return [TriggerStopSavepoint()]  # still finalizing until the savepoint is written
        self.finalizing = False
        return self.end(failed)

    def stop_while_idle(self) -> list[Action]:
        """A stop reached a continuous job between rounds: nothing runs, so the savepoint now."""
        self.finalizing = True
        return [TriggerStopSavepoint()]

    def stop_savepoint_done(self, failed: bool) -> list[Action]:
        """As in Flink, a stop whose savepoint failed leaves the job running."""
        if failed:
            return [ResumeRounds()]
        self.finalizing = False
        return [self.to(JobStatus.FINISHED), Finish()]

    def round_done(self, failed: bool, stopping: bool) -> list[Action]:
        """A round's output is published (or failed to be); `stopping`: a stop arrived
        while it was published."""
        self.finalizing = False
        if self.status is not JobStatus.RUNNING:
            # Cancelled (or failing) while the round's output was published: that request
            # found nothing running and waited for the publish; end the job now.
            return self.check_completion(continuous=True, stopping=False)
        if failed:
            return self.end(True)
        if stopping:
            # The stop found the round publishing, neither running nor between rounds: the
            # job is between rounds now, so its savepoint, as for a stop that finds it idle.
            return [AwaitInput(), *self.stop_while_idle()]
        return [AwaitInput()]

    def end(self, failed: bool) -> list[Action]:
        """A running job ends: FINISHED, or FAILED (the caller recorded why)."""
        if not failed:
            return [self.to(JobStatus.FINISHED), Finish()]
        return [self.to(JobStatus.FAILING), self.to(JobStatus.FAILED), Finish()]
