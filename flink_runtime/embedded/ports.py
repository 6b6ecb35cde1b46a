"""The embedded cluster's fixed REST port: is it free, and if not, who holds it.

The port is fixed (not 0) so that a restarted cluster answers at the same URL as the
one before it, and the links Airflow stored to its jobs keep working.
"""

from __future__ import annotations

import contextlib
import errno
import re
import shlex
import socket
from pathlib import Path

import psutil

# Flink's 8081 plus 10000. Not 8081 itself: that is where a real JobManager (Flink's,
# `flink-runtime jobmanager`, the docker compose cluster) or a Spark standalone worker's
# UI listens, and an embedded cluster started by some Airflow task must neither take
# the port from them nor answer `flink-runtime list` in their place. Below Linux's
# ephemeral range (32768-60999), so no OS-picked port (port 0) lands on it.
DEFAULT_PORT = 18081

# RestServer.start's message when its bind fails (flink_runtime/rest/server.py).
_BIND_FAILURE = re.compile(r"cannot bind the REST API to (\S+):(\d+)")


def port_in_use(host: str, port: int) -> bool:
    """Whether binding ``host:port`` would fail because something listens there.

    Only a hint (the port may be taken between this check and the cluster's bind):
    the cluster's own bind failure is what counts, see bind_failure_port.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the REST server binds: a port in TIME_WAIT after our last cluster is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def bind_failure_port(output: str) -> int | None:
    """The port a cluster's output says it could not bind its REST API to, if any."""
    match = _BIND_FAILURE.search(output)
    return int(match.group(2)) if match else None


def describe_holder(port: int) -> str:
    """Who listens on ``port``, as far as this user can see: "pid 123 (cmdline)"."""
    try:
        listeners = [
            c for c in psutil.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN and c.laddr.port == port
        ]
    except (psutil.Error, OSError):
        listeners = []
    pids = sorted({c.pid for c in listeners if c.pid})
    if not pids:
        return "another process (one this user cannot see; `sudo ss -ltnp` names it)"
    return ", ".join(_describe_process(pid) for pid in pids)


def _describe_process(pid: int) -> str:
    try:
        process = psutil.Process(pid)
        command = shlex.join(process.cmdline()) or process.name()
    except psutil.Error:
        return f"pid {pid}"
    if len(command) > 160:
        command = command[:157] + "..."
    embedded = _embedded_state_dir(process)
    if embedded is not None:
        return f"pid {pid}, the embedded cluster of state dir {embedded}"
    return f"pid {pid} ({command})"


def _embedded_state_dir(process: psutil.Process) -> Path | None:
    """The state dir of an embedded cluster process (`... embedded.foreground --state-dir DIR`)."""
    with contextlib.suppress(psutil.Error, ValueError, IndexError):
        command = process.cmdline()
        if "flink_runtime.embedded.foreground" in command and "--state-dir" in command:
            return Path(command[command.index("--state-dir") + 1])
    return None


def port_taken_message(port: int, directory: Path) -> str:
    return (
        f"port {port}, the embedded cluster's REST port, is in use by {describe_holder(port)}, "
        f"which is not the embedded cluster of {directory}. Give the embedded cluster another port "
        "(the Airflow connection's Port field), or stop that process"
    )
