"""`flink-runtime embedded status|stop`: the embedded cluster Airflow starts, seen as a service.

::

    flink-runtime embedded status [--state-dir DIR] [--json]
    flink-runtime embedded stop   [--state-dir DIR] [--timeout SECONDS]

``status`` exits 0 when the cluster runs and answers, 1 when its process runs but its
REST API does not answer, and 3 when it is not running (the LSB init-script code for
"program is not running"), so scripts can test it. ``stop`` exits 0 whether or not a
cluster was running. Neither starts a cluster, and neither imports Airflow.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from collections.abc import Callable
from pathlib import Path

from flink_runtime import embedded
from flink_runtime.client.cli_output import format_bytes, format_duration

EXIT_RUNNING = 0
EXIT_NOT_ANSWERING = 1
EXIT_NOT_RUNNING = 3


def add_embedded_parser(add: Callable[..., argparse.ArgumentParser], positive_seconds: Callable[[str], float]) -> None:
    """Register `embedded status|stop` (``add`` is cli_arguments.build_parser's helper,
    ``positive_seconds`` its argument type for timeouts)."""
    parser = add("embedded", "Look at or stop the embedded cluster that Airflow starts for 'embedded' connections.")
    actions = parser.add_subparsers(dest="embedded_action", metavar="ACTION", required=True, parser_class=type(parser))
    state_dir_help = (
        "the cluster's state directory (default: $AIRFLOW_HOME/flink-runtime, else <tmp>/flink-runtime-airflow; "
        "the connection's extra state_dir if it sets one)"
    )
    status = actions.add_parser(
        "status",
        help="whether it runs: pid, REST URL, uptime, memory, jobs (exit 0 running, 3 not running)",
        description="Show whether the embedded cluster runs. Exit code: 0 running, 1 running but its REST API "
        "does not answer, 3 not running.",
    )
    status.add_argument("--state-dir", type=Path, metavar="DIR", help=state_dir_help)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    stop = actions.add_parser(
        "stop",
        help="stop it (SIGTERM, then SIGKILL after --timeout); nothing to stop is not an error",
        description="Stop the embedded cluster: SIGTERM (it shuts down cleanly), SIGKILL if it has not "
        "stopped after --timeout seconds. Exit code 0, also when none was running.",
    )
    stop.add_argument("--state-dir", type=Path, metavar="DIR", help=state_dir_help)
    stop.add_argument(
        "--timeout", type=positive_seconds, default=30.0, metavar="SECONDS", help="wait before SIGKILL (default: 30)"
    )


def cmd_embedded(args: argparse.Namespace) -> int:
    if args.embedded_action == "stop":
        return _stop(args.state_dir, args.timeout)
    return _status(args.state_dir, args.json)


def _status(state_dir: Path | None, as_json: bool) -> int:
    status = embedded.status(state_dir)
    if not status.running:
        code = EXIT_NOT_RUNNING
    else:
        code = EXIT_RUNNING if status.overview is not None else EXIT_NOT_ANSWERING
    if as_json:
        print(json.dumps(_as_json(status), indent=2))
        return code
    if not status.running:
        reason = ""
        if status.gone_pid is not None:
            reason = f": its state file names pid {status.gone_pid}, which has exited"
        print(f"The embedded cluster is not running{reason}.")
        print(f"  State dir:    {status.state_dir}")
        if status.log.exists():
            print(f"  Log:          {status.log} (why the last one stopped)")
        print("  The next Airflow task that uses an 'embedded' connection starts it.")
        return code
    overview = status.overview
    print("The embedded cluster is running." if overview is not None else _not_answering(status))
    print(f"  PID:          {status.pid}")
    print(f"  REST URL:     {status.rest_url}")
    if status.started_at is not None:
        started = datetime.datetime.fromtimestamp(status.started_at).strftime("%Y-%m-%d %H:%M:%S")
        print(f"  Uptime:       {format_duration((time.time() - status.started_at) * 1000)} (since {started})")
    if overview is not None:
        print(
            f"  Jobs running: {overview.get('jobs-running', 0)} "
            f"({overview.get('taskmanagers', 0)} TaskManagers, "
            f"{overview.get('slots-available', 0)} of {overview.get('slots-total', 0)} slots free)"
        )
    if status.resident_bytes is not None:
        memory = format_bytes(status.resident_bytes)
        print(f"  Memory:       {memory} resident (its process and children, such as the Spark JVM)")
    if status.idle_timeout is not None:
        idle = "off" if not status.idle_timeout else f"{status.idle_timeout:g} s with no job and no REST request"
        print(f"  Idle timeout: {idle}")
    print(f"  State dir:    {status.state_dir}")
    print(f"  Log:          {status.log}")
    return code


def _not_answering(status: embedded.EmbeddedStatus) -> str:
    return (
        f"The embedded cluster's process runs, but its REST API at {status.rest_url} does not answer "
        f"(hung, or stopping); `flink-runtime embedded stop` ends it, its log may say why."
    )


def _as_json(status: embedded.EmbeddedStatus) -> dict[str, object]:
    overview = status.overview or {}
    return {
        "running": status.running,
        "answering": status.overview is not None,
        "pid": status.pid,
        "rest-url": status.rest_url,
        "uptime-seconds": None if status.started_at is None else round(time.time() - status.started_at, 1),
        "jobs-running": overview.get("jobs-running"),
        "resident-bytes": status.resident_bytes,
        "idle-timeout-seconds": status.idle_timeout,
        "state-dir": str(status.state_dir),
        "log": str(status.log),
    }


def _stop(state_dir: Path | None, timeout: float) -> int:
    result = embedded.stop(state_dir, timeout)
    directory = state_dir or embedded.default_state_dir()
    if result is None:
        print(f"The embedded cluster is not running (state dir {directory}); nothing to stop.")
    elif result.signal == "SIGKILL":
        print(
            f"Killed the embedded cluster (pid {result.pid}, {result.rest_url}) with SIGKILL: it had not "
            f"stopped {timeout:g} s after SIGTERM."
        )
    else:
        print(f"Stopped the embedded cluster (pid {result.pid}, {result.rest_url}) in {result.seconds:.1f} s.")
    return 0
