"""Start, find, describe and stop the embedded cluster of a state dir (see the package docstring)."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.embedded import ports
from flink_runtime.embedded.state import (
    LOG_FILE,
    STATE_FILE,
    cluster_process,
    kill_group,
    locked,
    read_state,
    resident_bytes,
    resolve_state_dir,
    terminate,
    write_state,
)
from flink_runtime.security.secrets import is_secret_key

log = logging.getLogger(__name__)

#: An embedded cluster nobody used for an hour stops itself (minicluster.idle-timeout).
DEFAULT_IDLE_TIMEOUT = 3600.0

_READY_LINE = re.compile(r"MiniCluster ready rest=(\S+)")
# A cluster that answers slower than this is treated as hung, not as busy: the
# REST API runs on its own event loop and answers /overview in milliseconds.
_PROBE_TIMEOUT = 5.0


class EmbeddedClusterError(RuntimeError):
    """The embedded cluster could not be started (the message says why and what to do)."""


@dataclass(frozen=True)
class EmbeddedStatus:
    """What ``flink-runtime embedded status`` reports."""

    state_dir: Path
    log: Path
    running: bool
    pid: int | None = None
    rest_url: str | None = None
    started_at: float | None = None
    idle_timeout: float | None = None
    resident_bytes: int | None = None
    #: GET /overview (jobs-running, taskmanagers, ...); None when the REST API does not answer.
    overview: dict[str, Any] | None = None
    #: The pid a state file names whose process is gone (the cluster died or was killed).
    gone_pid: int | None = None


@dataclass(frozen=True)
class StopResult:
    pid: int
    rest_url: str
    signal: str  # SIGTERM: it shut down cleanly; SIGKILL: it did not within the timeout
    seconds: float


def ensure_embedded_cluster(
    taskmanagers: int = 2,
    slots: int = 2,
    state_dir: str | os.PathLike[str] | None = None,
    timeout: float = 120,
    config: Mapping[str, Any] | None = None,
    port: int | None = None,
    idle_timeout: float | None = None,
) -> str:
    """The REST URL of the embedded cluster, started now if none answers.

    ``port`` is its REST port (default ports.DEFAULT_PORT), fixed so that a restarted
    cluster answers at the same URL; ``idle_timeout`` the seconds it may sit unused
    before it stops itself (default 1 h, 0: never). Both, like the size, apply to a
    cluster started by this call: a running one is reused as it is. ``config`` holds
    extra ``-D key=value`` options for it. Raises EmbeddedClusterError when the port is
    taken by another process, or the process exits or is not ready within ``timeout`` s.
    """
    if taskmanagers < 1 or slots < 1:
        raise ValueError(f"taskmanagers and slots must be at least 1, got {taskmanagers} and {slots}")
    port = ports.DEFAULT_PORT if port is None else port
    if not 0 < port < 65536:
        raise ValueError(f"the embedded cluster's port must be 1..65535, got {port}")
    idle_timeout = DEFAULT_IDLE_TIMEOUT if idle_timeout is None else idle_timeout
    if not idle_timeout >= 0:
        raise ValueError(f"the embedded cluster's idle timeout must be 0 (never) or more seconds, got {idle_timeout}")
    config = dict(config or {})
    if cfg.REST_PORT.key in config:
        raise ValueError("set the embedded cluster's REST port with port=..., not config['rest.port']")
    directory = resolve_state_dir(state_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbeddedClusterError(
            f"the embedded cluster's state directory {directory} cannot be created ({exc.strerror}); "
            "point the connection's extra state_dir (or $AIRFLOW_HOME) at a writable directory"
        ) from exc
    with locked(directory):
        state = read_state(directory)
        if state is not None:
            if cluster_process(state) is not None and _answers(state["rest_url"]):
                if state.get("port", port) != port:
                    log.warning(
                        "The embedded cluster runs at %s, not on port %d as asked: stop it "
                        "(flink-runtime embedded stop --state-dir %s) to move it.",
                        state["rest_url"],
                        port,
                        directory,
                    )
                return str(state["rest_url"])
            if cluster_process(state) is None:
                # It died (a failure it could not handle ends it: rpc/supervision.py), or
                # was killed: say why in the task's log, where the user looks first.
                log.warning(
                    "The embedded cluster (pid %s) has exited%s; starting a new one. Its log: %s",
                    state["pid"],
                    _exit_reason(directory / LOG_FILE),
                    directory / LOG_FILE,
                )
            # Alive but mute means hung; a dead pid leaves only the file behind.
            terminate(state)
            (directory / STATE_FILE).unlink(missing_ok=True)
        bind_address = Configuration(config).get(cfg.REST_BIND_ADDRESS)
        # A hint only (the bind may still lose a race): _await_ready reads the real failure.
        if ports.port_in_use(bind_address, port):
            raise EmbeddedClusterError(ports.port_taken_message(port, directory))
        return _start(directory, taskmanagers, slots, port, idle_timeout, timeout, config)


def stop_embedded_cluster(state_dir: str | os.PathLike[str] | None = None, timeout: float = 30) -> bool:
    """Stop the embedded cluster of ``state_dir``; False when none was running."""
    return stop(state_dir, timeout) is not None


def stop(state_dir: str | os.PathLike[str] | None = None, timeout: float = 30) -> StopResult | None:
    """Stop the embedded cluster (SIGTERM, SIGKILL after ``timeout`` s); None when none runs."""
    directory = resolve_state_dir(state_dir)
    if not (directory / STATE_FILE).exists():
        return None
    started = time.monotonic()
    with locked(directory):
        state = read_state(directory)
        (directory / STATE_FILE).unlink(missing_ok=True)
        how = terminate(state, timeout) if state is not None else None
    if state is None or how is None:
        return None
    return StopResult(state["pid"], str(state["rest_url"]), how, time.monotonic() - started)


def status(state_dir: str | os.PathLike[str] | None = None) -> EmbeddedStatus:
    """Whether the embedded cluster of ``state_dir`` runs, and what it is doing. Starts nothing."""
    directory = resolve_state_dir(state_dir)
    log_path = directory / LOG_FILE
    state = read_state(directory)
    if state is None:
        return EmbeddedStatus(directory, log_path, running=False)
    process = cluster_process(state)
    if process is None:
        return EmbeddedStatus(directory, log_path, running=False, gone_pid=int(state["pid"]))
    overview: dict[str, Any] | None = None
    try:
        response = httpx.get(f"{state['rest_url']}/overview", timeout=_PROBE_TIMEOUT)
        if response.status_code == 200:
            overview = response.json()
    except (httpx.HTTPError, ValueError):
        pass
    return EmbeddedStatus(
        directory,
        log_path,
        running=True,
        pid=process.pid,
        rest_url=str(state["rest_url"]),
        started_at=state.get("started_at"),
        idle_timeout=state.get("idle_timeout"),
        resident_bytes=resident_bytes(process),
        overview=overview,
    )


# -- starting ----------------------------------------------------------------------------------------


def _start(
    directory: Path,
    taskmanagers: int,
    slots: int,
    port: int,
    idle_timeout: float,
    timeout: float,
    config: dict[str, Any],
) -> str:
    command = [sys.executable, "-m", "flink_runtime.embedded.foreground", "--state-dir", str(directory)]
    command += ["-n", str(taskmanagers), "-s", str(slots), "--port", str(port), "--idle-timeout", f"{idle_timeout:g}"]
    # Secrets (a cluster secret, a REST token, passwords) go through a pipe: a command
    # line is readable by every user of the host (ps, /proc/<pid>/cmdline).
    secret_values = {key: str(value) for key, value in config.items() if is_secret_key(key)}
    for key, value in config.items():
        if key not in secret_values:
            command += ["-D", f"{key}={value}"]
    if secret_values:
        command.append("--secrets-on-stdin")
    log_path = directory / LOG_FILE
    log.info(
        "Starting the embedded flink-runtime cluster on port %d (%d TaskManagers x %d slots; its output: %s). "
        "The first job waits for Spark to start (about 10 s).",
        port,
        taskmanagers,
        slots,
        log_path,
    )
    started = time.monotonic()
    # Appended: an earlier start's output (why it stopped) stays readable.
    start_offset = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if secret_values else subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=directory,
            # Its own session: no signal to the task's process group reaches it, and
            # it does not die with the task. close_fds (the default) matters too: an
            # inherited lock file descriptor would hold the lock for the cluster's life.
            start_new_session=True,
            close_fds=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        if process.stdin is not None:
            with process.stdin:
                process.stdin.write(json.dumps(secret_values).encode())
        rest_url = _await_ready(process, directory, port, start_offset, timeout)
    except BaseException:
        kill_group(process.pid, signal.SIGKILL)
        process.wait(10)
        raise
    state = {
        "pid": process.pid,
        "rest_url": rest_url,
        "port": port,
        "idle_timeout": idle_timeout,
        "started_at": time.time(),
        "create_time": psutil.Process(process.pid).create_time(),
        "taskmanagers": taskmanagers,
        "slots": slots,
        "log": str(log_path),
    }
    write_state(directory, state)
    log.info("The embedded cluster is ready at %s (%.1f s).", rest_url, time.monotonic() - started)
    return rest_url


def _await_ready(
    process: subprocess.Popen[bytes], directory: Path, port: int, start_offset: int, timeout: float
) -> str:
    """The REST URL from this start's ready line (after `start_offset` in the log)."""
    log_path = directory / LOG_FILE
    deadline = time.monotonic() + timeout
    while True:
        output = _output_since(log_path, start_offset)
        match = _READY_LINE.search(output)
        if match:
            return match.group(1)
        if process.poll() is not None:
            output = _output_since(log_path, start_offset)
            if ports.bind_failure_port(output) == port:
                # Taken between our check and its bind (or the check could not tell).
                raise EmbeddedClusterError(f"{ports.port_taken_message(port, directory)} (its log: {log_path})")
            raise EmbeddedClusterError(
                f"the embedded MiniCluster exited with code {process.returncode} before it was ready; "
                f"its log ({log_path}) ends with:\n{_tail(log_path)}"
            )
        if time.monotonic() > deadline:
            raise EmbeddedClusterError(
                f"the embedded MiniCluster was not ready within {timeout:g} s; "
                f"its log ({log_path}) ends with:\n{_tail(log_path)}"
            )
        time.sleep(0.1)


def _output_since(log_path: Path, offset: int) -> str:
    with open(log_path, "rb") as output:
        output.seek(offset)
        return output.read().decode(errors="replace")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _exit_reason(log_path: Path) -> str:
    """': <why>' from the last line a cluster wrote as it ended itself, or '' if none."""
    for line in reversed(_tail(log_path, 200).splitlines()):
        if "; exiting with code " in line:
            return f": {line.strip()}"
        if "MiniCluster ready" in line:
            break  # the last start ended without saying why (killed, say)
    return ""


def _answers(rest_url: str) -> bool:
    try:
        return httpx.get(f"{rest_url}/overview", timeout=_PROBE_TIMEOUT).status_code == 200
    except httpx.HTTPError:
        return False
