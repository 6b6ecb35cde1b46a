"""How an attached `flink-runtime run` follows its job (client/cli_progress.py), against a
fake JobClient that answers the event long poll and GET /jobs/:id from a script."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from flink_runtime.client.cli_progress import follow_job, task_counts
from flink_runtime.client.job_client import EventPage, JobStatusEvent
from flink_runtime.executiongraph.states import JobStatus

J = JobStatus


def details(finished: int, state: str = "RUNNING") -> dict[str, Any]:
    return {
        "name": "job",
        "state": state,
        "vertices": [{"parallelism": 2, "tasks": {"FINISHED": finished}}, {"parallelism": 1, "tasks": {}}],
    }


class ScriptedClient:
    """Each poll answers the next page; GET /jobs/:id the finished count of that moment."""

    def __init__(self, pages: list[EventPage], finished: list[int]) -> None:
        self.pages = pages
        self.finished = finished
        self.polled_since: list[int] = []

    def poll_events(self, job_id: str, since: int, timeout: float) -> EventPage:
        self.polled_since.append(since)
        return self.pages.pop(0)

    def details(self, job_id: str) -> dict[str, Any]:
        return details(self.finished[0] if len(self.finished) == 1 else self.finished.pop(0))


def event(number: int, old: JobStatus, new: JobStatus) -> JobStatusEvent:
    return JobStatusEvent(id=number, job_id="j1", old_state=old, new_state=new, timestamp=0.0)


def test_task_counts_sum_the_vertices() -> None:
    assert task_counts(details(1)) == (1, 3)
    assert task_counts({}) == (0, 0)


def test_plain_output_has_a_line_per_state_change_and_per_progress() -> None:
    pages = [
        EventPage([event(1, J.CREATED, J.RUNNING)], 1, J.RUNNING),
        EventPage([], 1, J.RUNNING),
        EventPage([event(2, J.RUNNING, J.FINISHED)], 2, J.FINISHED),
    ]
    client = ScriptedClient(pages, finished=[1, 3])
    out = io.StringIO()
    state = follow_job(client, "j1", Console(file=out, force_terminal=False))  # type: ignore[arg-type]
    lines = [line.split(" ", 1)[1] for line in out.getvalue().splitlines()]  # without the time stamp
    assert state is J.FINISHED
    assert lines == [
        "Job j1 switched from CREATED to RUNNING.",
        "Job j1 RUNNING: 1/3 tasks finished.",
        "Job j1 RUNNING: 3/3 tasks finished.",
        "Job j1 switched from RUNNING to FINISHED.",
    ]
    assert client.polled_since == [0, 1, 1]


def test_a_terminal_shows_the_state_changes_above_the_bar_and_the_final_state() -> None:
    pages = [EventPage([event(1, J.RUNNING, J.FAILING)], 1, J.FAILING), EventPage([], 1, J.FAILED)]
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    state = follow_job(ScriptedClient(pages, finished=[0]), "j1", console)  # type: ignore[arg-type]
    assert state is J.FAILED  # the job ended between two polls: its state says so
    assert "Job j1 switched from RUNNING to FAILING." in out.getvalue()
