"""Execution and job states, named exactly as Flink names them.

The rules live with the data: each state knows whether it is terminal and which
states may follow it, so no caller re-derives a transition table.
"""

from __future__ import annotations

import enum


class IllegalStateTransition(RuntimeError):
    """Raised when code asks for a transition the state machine forbids."""


class ExecutionState(enum.StrEnum):
    """The state of one execution attempt of a subtask.

    ::

        CREATED  -> SCHEDULED -> DEPLOYING -> INITIALIZING -> RUNNING -> FINISHED
           |            |            |             |             |
           |            +------------+-------------+-------------+
           |                                |
           |                           CANCELING -----+----> CANCELED
           |                                          |
           +--------------------------------------> CANCELED
                                                       |
        any non-terminal state -------------------> FAILED

    FINISHED, CANCELED and FAILED are terminal: an attempt never leaves them; a
    restart creates a new attempt instead. A task may skip forward (RUNNING can be
    reported without INITIALIZING having been seen) because messages from a
    TaskManager may be coalesced, but it never goes backwards.
    """

    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL_EXECUTION_STATES

    @property
    def is_deployed(self) -> bool:
        """The task is on a TaskManager (sent, initializing or running): cancelling it
        takes a message there, and the TaskManager reports on it."""
        return self in _DEPLOYED_EXECUTION_STATES

    def can_transition_to(self, target: ExecutionState) -> bool:
        return target in _EXECUTION_TRANSITIONS[self]

    def check_transition(self, target: ExecutionState) -> ExecutionState:
        if not self.can_transition_to(target):
            raise IllegalStateTransition(f"execution cannot go from {self.value} to {target.value}")
        return target


_TERMINAL_EXECUTION_STATES = frozenset({ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED})
_DEPLOYED_EXECUTION_STATES = frozenset({ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING})

_E = ExecutionState
_PROGRESS = [_E.CREATED, _E.SCHEDULED, _E.DEPLOYING, _E.INITIALIZING, _E.RUNNING, _E.FINISHED]
_EXECUTION_TRANSITIONS: dict[ExecutionState, frozenset[ExecutionState]] = {
    state: frozenset(
        # forward along the happy path (skipping allowed), or into cancellation / failure
        _PROGRESS[i + 1 :] + [_E.CANCELING, _E.CANCELED, _E.FAILED]
    )
    for i, state in enumerate(_PROGRESS[:-1])
}
_EXECUTION_TRANSITIONS[_E.CANCELING] = frozenset({_E.CANCELED, _E.FAILED})
for _terminal in _TERMINAL_EXECUTION_STATES:
    _EXECUTION_TRANSITIONS[_terminal] = frozenset()
# A task that completes before the cancel reached it finishes; Flink accepts that too.
_EXECUTION_TRANSITIONS[_E.CANCELING] |= {_E.FINISHED}


class JobStatus(enum.StrEnum):
    """The state of a whole job.

    ::

        INITIALIZING -> CREATED -> RUNNING -> FINISHED
                           |          |
                           |          +--> FAILING ----> FAILED
                           |          |       |
                           |          |       +--> RESTARTING -> RUNNING
                           |          +--> RESTARTING
                           +----------+--> CANCELLING -> CANCELED
                                      +--> SUSPENDED

    Globally terminal states (FINISHED, CANCELED, FAILED) end the job for the whole
    cluster. SUSPENDED is only locally terminal: this JobManager stopped working on
    the job, but another (or a restarted) JobManager may recover it.
    """

    INITIALIZING = "INITIALIZING"
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    RESTARTING = "RESTARTING"
    SUSPENDED = "SUSPENDED"

    @property
    def is_globally_terminal(self) -> bool:
        return self in (JobStatus.FINISHED, JobStatus.CANCELED, JobStatus.FAILED)

    @property
    def is_terminal(self) -> bool:
        """Locally terminal: this JobManager does no more work on the job."""
        return self.is_globally_terminal or self is JobStatus.SUSPENDED

    def can_transition_to(self, target: JobStatus) -> bool:
        return target in _JOB_TRANSITIONS[self]

    def check_transition(self, target: JobStatus) -> JobStatus:
        if not self.can_transition_to(target):
            raise IllegalStateTransition(f"job cannot go from {self.value} to {target.value}")
        return target


_J = JobStatus
_JOB_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    _J.INITIALIZING: frozenset({_J.CREATED, _J.FAILED, _J.CANCELLING, _J.CANCELED, _J.SUSPENDED}),
    _J.CREATED: frozenset({_J.RUNNING, _J.FAILING, _J.FAILED, _J.CANCELLING, _J.SUSPENDED}),
    _J.RUNNING: frozenset({_J.FINISHED, _J.FAILING, _J.CANCELLING, _J.RESTARTING, _J.SUSPENDED}),
    _J.FAILING: frozenset({_J.FAILED, _J.RESTARTING, _J.CANCELLING, _J.SUSPENDED}),
    _J.RESTARTING: frozenset({_J.RUNNING, _J.CREATED, _J.FAILED, _J.CANCELLING, _J.SUSPENDED}),
    _J.CANCELLING: frozenset({_J.CANCELED, _J.FAILED, _J.SUSPENDED}),
    _J.FINISHED: frozenset(),
    _J.CANCELED: frozenset(),
    _J.FAILED: frozenset(),
    _J.SUSPENDED: frozenset(),
}
