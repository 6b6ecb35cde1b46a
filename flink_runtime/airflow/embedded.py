"""An embedded MiniCluster for Airflow: a detached process shared by tasks and DAG runs.

A connection whose host is ``embedded`` (or whose extra says ``"embedded": true``)
needs a cluster that outlives the task asking for it: under a real executor a
task's threads and children die with the task, and the sensor that waits on the job
runs in another task, maybe another process. So the cluster is a process of its own
(``flink-runtime minicluster`` in a new session, no parent to die with) and is found
again through a small JSON state file::

    <state_dir>/minicluster.json   {"pid", "rest_url", "started_at", "create_time", ...}
    <state_dir>/minicluster.log    the cluster's stdout and stderr, appended across starts
    <state_dir>/log/               its log files (env.log.dir): the tasks' tagged lines
    <state_dir>/jobstore.db        its job store (jobstore.url): the history outlives restarts
    <state_dir>/minicluster.lock   held while a caller checks or starts the cluster

The state directory defaults to ``$AIRFLOW_HOME/flink-runtime`` (else
``<tmp>/flink-runtime-airflow``). The first caller picks the size; later callers
reuse whatever runs there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import psutil

__all__ = ["EmbeddedClusterError", "default_state_dir", "ensure_embedded_cluster", "stop_embedded_cluster"]

STATE_FILE = "minicluster.json"
LOG_FILE = "minicluster.log"
LOCK_FILE = "minicluster.lock"

log = logging.getLogger(__name__)

_READY_LINE = re.compile(r"MiniCluster ready rest=(\S+)")
# A cluster that answers slower than this is treated as hung, not as busy: the
# REST API runs on its own event loop and answers /overview in milliseconds.
_PROBE_TIMEOUT = 5.0


class EmbeddedClusterError(RuntimeError):
    """The embedded cluster could not be started (the message holds its log's tail)."""


def default_state_dir() -> Path:
    airflow_home = os.environ.get("AIRFLOW_HOME")
    if airflow_home:
        return Path(airflow_home) / "flink-runtime"
    return Path(tempfile.gettempdir()) / "flink-runtime-airflow"


def ensure_embedded_cluster(
    taskmanagers: int = 2,
    slots: int = 2,
    state_dir: str | os.PathLike[str] | None = None,
    timeout: float = 120,
    config: Mapping[str, Any] | None = None,
) -> str:
    """The REST URL of the embedded cluster, started now if none answers.

    ``config`` holds extra ``-D key=value`` options for a cluster started by this
    call; ``state.savepoints.dir`` defaults to ``<state_dir>/savepoints`` so that
    savepoints without a target directory work. Raises EmbeddedClusterError when the
    process exits or is not ready within ``timeout`` seconds.
    """
    if taskmanagers < 1 or slots < 1:
        raise ValueError(f"taskmanagers and slots must be at least 1, got {taskmanagers} and {slots}")
    directory = Path(state_dir) if state_dir is not None else default_state_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        state = _read_state(directory)
        if state is not None:
            if _is_alive(state) and _answers(state["rest_url"]):
                return str(state["rest_url"])
            # Alive but mute means hung; a dead pid leaves only the file behind.
            _terminate(state)
            (directory / STATE_FILE).unlink(missing_ok=True)
        return _start(directory, taskmanagers, slots, timeout, dict(config or {}))


def stop_embedded_cluster(state_dir: str | os.PathLike[str] | None = None, timeout: float = 30) -> bool:
    """Stop the embedded cluster of ``state_dir``; False when none was running."""
    directory = Path(state_dir) if state_dir is not None else default_state_dir()
    if not (directory / STATE_FILE).exists():
        return False
    with _locked(directory):
        state = _read_state(directory)
        (directory / STATE_FILE).unlink(missing_ok=True)
        return state is not None and _terminate(state, timeout)


# -- starting ----------------------------------------------------------------------------------------


def _start(directory: Path, taskmanagers: int, slots: int, timeout: float, config: dict[str, Any]) -> str:
    config.setdefault("state.savepoints.dir", str(directory / "savepoints"))
    # Log files, so a failed task's log can show the failing subtask's lines.
    config.setdefault("env.log.dir", str(directory / "log"))
    # A job store, so the job history (and the extra links to it) survive a restart.
    config.setdefault("jobstore.url", f"sqlite:///{directory / 'jobstore.db'}")
    # Port 0 lets the OS pick free ports at bind time; the ready line says which.
    # Choosing a free port here and passing it on would race with other processes.
    config.setdefault("rest.port", 0)
    config.setdefault("jobmanager.rpc.port", 0)
    command = [sys.executable, "-m", "flink_runtime.client.cli", "minicluster", "-n", str(taskmanagers)]
    command += ["-s", str(slots)]
    for key, value in config.items():
        command += ["-D", f"{key}={value}"]
    log_path = directory / LOG_FILE
    log.info(
        "Starting the embedded flink-runtime cluster (%d TaskManagers x %d slots; its output: %s). "
        "The first job waits for Spark to start (about 10 s).",
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
            stdin=subprocess.DEVNULL,
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
        rest_url = _await_ready(process, log_path, start_offset, timeout)
    except BaseException:
        _kill_group(process.pid, signal.SIGKILL)
        process.wait(10)
        raise
    state = {
        "pid": process.pid,
        "rest_url": rest_url,
        "started_at": time.time(),
        "create_time": psutil.Process(process.pid).create_time(),
        "taskmanagers": taskmanagers,
        "slots": slots,
        "log": str(log_path),
    }
    _write_state(directory, state)
    log.info("The embedded cluster is ready at %s (%.1f s).", rest_url, time.monotonic() - started)
    return rest_url


def _await_ready(process: subprocess.Popen[bytes], log_path: Path, start_offset: int, timeout: float) -> str:
    """The REST URL from this start's ready line (after `start_offset` in the log)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(log_path, "rb") as output:
            output.seek(start_offset)
            match = _READY_LINE.search(output.read().decode(errors="replace"))
        if match:
            return match.group(1)
        if process.poll() is not None:
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


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- the state file ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    # flock, not a lock file's existence: the kernel releases it when a holder dies.
    with open(directory / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read_state(directory: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("pid"), int) or not state.get("rest_url"):
        return None
    return state


def _write_state(directory: Path, state: dict[str, Any]) -> None:
    # Written aside and renamed, so a reader never sees half a file.
    temporary = directory / f".{STATE_FILE}.{os.getpid()}"
    temporary.write_text(json.dumps(state, indent=2))
    os.replace(temporary, directory / STATE_FILE)


# -- the process -------------------------------------------------------------------------------------


def _process(state: Mapping[str, Any]) -> psutil.Process | None:
    """The cluster's process, or None if it is gone (a reused pid does not count)."""
    try:
        process = psutil.Process(int(state["pid"]))
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        create_time = state.get("create_time")
        if create_time is not None and abs(process.create_time() - float(create_time)) > 1.0:
            return None
        return process
    except (psutil.Error, ValueError, TypeError):
        return None


def _is_alive(state: Mapping[str, Any]) -> bool:
    return _process(state) is not None


def _answers(rest_url: str) -> bool:
    try:
        return httpx.get(f"{rest_url}/overview", timeout=_PROBE_TIMEOUT).status_code == 200
    except httpx.HTTPError:
        return False


def _terminate(state: Mapping[str, Any], timeout: float = 30) -> bool:
    """SIGTERM the cluster (it shuts down cleanly), SIGKILL it after ``timeout`` s."""
    process = _process(state)
    if process is None:
        return False
    _kill_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except psutil.TimeoutExpired:
        _kill_group(process.pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            process.wait(10)
    except psutil.Error:
        pass
    return True


def _kill_group(pid: int, signum: int) -> None:
    # The cluster leads its own session, so its group id is its pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)
