"""How the `flink-runtime` CLI writes for people: a rich console, job states in colour,
times, durations and sizes, and failures as one `error: ...` line.

A failure the JobManager explains with a stack trace (Flink's REST API sends one in its
`errors` list; a failed savepoint's `failure-cause` carries the server's traceback) is
still one line naming the problem, plus a one-line hint. The trace itself is printed only
when asked for: `FLINK_RUNTIME_CLI_VERBOSE=1` in the environment, or `--log-level DEBUG`
(which also shows the CLI's own traceback of an unexpected error).
"""

from __future__ import annotations

import datetime
import os
import sys
from typing import TextIO

from rich.console import Console
from rich.text import Text

from flink_runtime.client.errors import RestClientError, SavepointFailed

VERBOSE_ENV = "FLINK_RUNTIME_CLI_VERBOSE"

STATE_STYLES = {
    "FINISHED": "green",
    "RUNNING": "cyan",
    "FAILED": "red",
    "FAILING": "red",
    "CANCELED": "yellow",
    "CANCELLING": "yellow",
    "RESTARTING": "magenta",
}


def new_console(file: TextIO | None = None) -> Console:
    # Markup off: job names and exception texts are user data, not rich markup.
    console = Console(file=file or sys.stdout, markup=False, highlight=False)
    if not console.is_terminal:
        # Piped output: do not squeeze tables into 80 columns and break job ids.
        console = Console(file=file or sys.stdout, markup=False, highlight=False, width=200)
    return console


def styled_state(state: str) -> Text:
    return Text(state, style=STATE_STYLES.get(state, ""))


def format_time(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def format_duration(ms: int | float | None) -> str:
    if ms is None or ms < 0:
        return "-"
    seconds = ms / 1000
    if seconds < 1:
        return f"{int(ms)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def format_bytes(size: float) -> str:
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


def verbose_requested(log_level: str | None) -> bool:
    """Server-side stack traces wanted: FLINK_RUNTIME_CLI_VERBOSE=1 (or true/yes), or --log-level DEBUG."""
    flag = os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes")
    return flag or (log_level or "").upper() == "DEBUG"


def server_details(error: BaseException | None) -> list[str]:
    """The stack traces the JobManager sent with `error` (or with what it was raised from)."""
    while error is not None:
        if isinstance(error, RestClientError):
            return list(error.details)
        if isinstance(error, SavepointFailed):
            return [error.stack_trace] if error.stack_trace.strip() else []
        error = error.__cause__
    return []


def print_failure(message: str, details: list[str], verbose: bool, file: TextIO | None = None) -> None:
    """`error: message`; then the server's stack traces when verbose, else a hint that there are some."""
    out = file or sys.stderr
    print(f"error: {message}", file=out, flush=True)
    if not details:
        return
    if verbose:
        print("The JobManager's details:", file=out)
        for detail in details:
            print(detail.rstrip(), file=out)
        out.flush()
    else:
        print(
            f"(the JobManager sent a stack trace: {VERBOSE_ENV}=1 or --log-level DEBUG shows it)", file=out, flush=True
        )
