"""How an attached `flink-runtime run` shows its job until the job ends (client/cli.py).

On a terminal: a progress bar of the finished subtasks over the job's state, refreshed
every second, and a line per state change above it. For logs and pipes: plain lines,
one per state change, and one whenever more subtasks have finished.
"""

from __future__ import annotations

import datetime
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from flink_runtime.client.job_client import JobClient, JobStatusEvent
from flink_runtime.executiongraph.states import JobStatus

# How often an attached `run` refreshes its progress line when no event arrives.
REFRESH_SECONDS = 1.0


def task_counts(details: dict[str, Any]) -> tuple[int, int]:
    """(finished, total) subtasks from GET /jobs/:id."""
    vertices = details.get("vertices", [])
    total = sum(int(vertex.get("parallelism", 0)) for vertex in vertices)
    finished = sum(int(vertex.get("tasks", {}).get("FINISHED", 0)) for vertex in vertices)
    return finished, total


def follow_job(client: JobClient, job_id: str, console: Console) -> JobStatus:
    """Show the job's progress until it ends; returns its final status."""

    def event_line(event: JobStatusEvent) -> str:
        stamp = datetime.datetime.fromtimestamp(event.timestamp).strftime("%H:%M:%S")
        return f"{stamp} Job {job_id} switched from {event.old_state.value} to {event.new_state.value}."

    since = 0
    if not console.is_terminal:
        # Plain lines for logs and pipes: one per state change, and one whenever more
        # subtasks have finished (checked every few seconds).
        reported = -1
        while True:
            page = client.poll_events(job_id, since, REFRESH_SECONDS * 5)
            since = page.next
            for event in page.events:
                console.print(event_line(event))
                if event.new_state.is_globally_terminal:
                    return event.new_state
            if not page.events and page.state.is_globally_terminal:
                return page.state
            if page.state is JobStatus.RUNNING:
                finished, total = task_counts(client.details(job_id))
                if finished != reported:
                    reported = finished
                    stamp = datetime.datetime.now().strftime("%H:%M:%S")
                    console.print(f"{stamp} Job {job_id} RUNNING: {finished}/{total} tasks finished.")

    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.fields[state]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        details = client.details(job_id)
        finished, total = task_counts(details)
        bar = progress.add_task(details.get("name", job_id), total=total or None, completed=finished, state="")
        while True:
            # The long poll returns on an event or after a second, whichever comes first,
            # so the bar moves between state changes too.
            page = client.poll_events(job_id, since, REFRESH_SECONDS)
            since = page.next
            details = client.details(job_id)
            finished, total = task_counts(details)
            progress.update(bar, total=total or None, completed=finished, state=details.get("state", ""))
            for event in page.events:
                progress.console.print(event_line(event))
                if event.new_state.is_globally_terminal:
                    return event.new_state
            if not page.events and page.state.is_globally_terminal:
                return page.state
