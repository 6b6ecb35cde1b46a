"""The embedded cluster's state directory: its lock, its state file, its process.

Shared by the launcher (``ensure_embedded_cluster``/``stop``/``status``, any process) and by the
cluster process itself, which takes the same lock when it stops itself for being idle.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import psutil

STATE_FILE = "minicluster.json"
LOG_FILE = "minicluster.log"
LOCK_FILE = "minicluster.lock"

# Lock files an idle-stopping cluster holds until it exits (see release_for_idle_stop).
_held_until_exit: list[IO[str]] = []


def default_state_dir() -> Path:
    airflow_home = os.environ.get("AIRFLOW_HOME")
    if airflow_home:
        return Path(airflow_home) / "flink-runtime"
    return Path(tempfile.gettempdir()) / "flink-runtime-airflow"


def resolve_state_dir(state_dir: str | os.PathLike[str] | None) -> Path:
    return Path(state_dir) if state_dir is not None else default_state_dir()


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    # flock, not a lock file's existence: the kernel releases it when a holder dies.
    with open(directory / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_state(directory: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("pid"), int) or not state.get("rest_url"):
        return None
    return state


def write_state(directory: Path, state: dict[str, Any]) -> None:
    # Written aside and renamed, so a reader never sees half a file.
    temporary = directory / f".{STATE_FILE}.{os.getpid()}"
    temporary.write_text(json.dumps(state, indent=2))
    os.replace(temporary, directory / STATE_FILE)


def release_for_idle_stop(directory: Path, still_idle: Callable[[], bool]) -> bool:
    """Called by the cluster process when it has been idle long enough: may it stop?

    It may when it gets the state directory's lock at once and is still idle then; it
    removes its state file and keeps the lock until the process exits. So a caller
    that probed the cluster before this (its probe is a REST request: activity) keeps
    it running, and one that comes after waits on the lock until the cluster is gone
    and starts a new one, instead of being handed a cluster about to stop.
    """
    lock = open(directory / LOCK_FILE, "a")  # noqa: SIM115 - held past this function on success
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()  # a caller is checking or starting the cluster right now: not idle
        return False
    if not still_idle():
        lock.close()  # closing the only descriptor releases the flock
        return False
    state = read_state(directory)
    if state is not None and state["pid"] == os.getpid():
        (directory / STATE_FILE).unlink(missing_ok=True)
    _held_until_exit.append(lock)
    return True


# -- the process -------------------------------------------------------------------------------------


def cluster_process(state: Mapping[str, Any]) -> psutil.Process | None:
    """The cluster's process, or None if it is gone (a reused pid does not count)."""
    try:
        process = psutil.Process(int(state["pid"]))
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        create_time = state.get("create_time")
        if create_time is not None and abs(process.create_time() - float(create_time)) > 1.0:
            return None
        return process
    except (psutil.Error, ValueError, TypeError, KeyError):
        return None


def resident_bytes(process: psutil.Process) -> int:
    """Resident memory of the cluster and its children (the Spark JVM is one)."""
    total = 0
    for member in [process, *_children(process)]:
        with contextlib.suppress(psutil.Error):
            total += member.memory_info().rss
    return total


def _children(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def terminate(state: Mapping[str, Any], timeout: float = 30) -> str | None:
    """SIGTERM the cluster (it shuts down cleanly), SIGKILL it after ``timeout`` s.

    Returns None when no such process runs, else "SIGTERM" or "SIGKILL": what ended it.
    """
    process = cluster_process(state)
    if process is None:
        return None
    kill_group(process.pid, signal.SIGTERM)
    if _wait_gone(process, timeout):
        return "SIGTERM"
    kill_group(process.pid, signal.SIGKILL)
    _wait_gone(process, 10)
    return "SIGKILL"


def _wait_gone(process: psutil.Process, timeout: float) -> bool:
    """Wait until the process has exited. Not psutil's wait(): for a process that is not
    our child it waits until the pid is gone, and a cluster whose parent (the task that
    started it) lives on stays a zombie until that parent reaps it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    with contextlib.suppress(ChildProcessError):  # reap it if we started it
        os.waitpid(process.pid, os.WNOHANG)
    return True


def kill_group(pid: int, signum: int) -> None:
    # The cluster leads its own session, so its group id is its pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)
