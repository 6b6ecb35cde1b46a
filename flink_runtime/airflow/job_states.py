"""When a wait on a job's state is over, as the Airflow side reads the states the REST
API reports: the hook's blocking wait, the trigger's long poll, and the operators and
sensor that decide whether a job has ended all ask these two rules."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from flink_runtime.executiongraph.states import JobStatus

__all__ = ["decisive_state", "is_globally_terminal"]


def is_globally_terminal(state: str) -> bool:
    try:
        return JobStatus(state).is_globally_terminal
    except ValueError:
        return False  # a state this version does not know ends nothing


def decisive_state(new_states: Sequence[str], current: str, watched: Collection[str]) -> str | None:
    """The state that ends a wait for any of ``watched``, or None to keep waiting.

    ``new_states`` are one event page's transitions in order and ``current`` the
    job's state when the page was answered. A transition counts even if the job has
    moved on since (a short RUNNING is not missed); a globally terminal state always
    ends the wait, since nothing follows it. ``current`` decides only a page without
    events: the job's first page (its early events may have left the bounded log),
    or a terminal state whose event left it.
    """
    for state in new_states:
        if state in watched or is_globally_terminal(state):
            return state
    if not new_states and (current in watched or is_globally_terminal(current)):
        return current
    return None
