"""How the `flink-runtime` CLI writes for people: a rich console, job states in colour,
times, durations and sizes."""

from __future__ import annotations

import datetime
import sys
from typing import TextIO

from rich.console import Console
from rich.text import Text

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
