"""Processes a test run leaves behind.

Tests kill JobManagers with SIGKILL; a planner process or Spark JVM that outlived each
would add up to gigabytes over one `make test` run. Every process the run starts carries the run's marker
in its environment (`FLINK_RUNTIME_TEST_RUN=<uuid>`, set before any starts, inherited by
children, grandchildren and their JVMs), so at the end the run finds its own processes
and none of the other runs on the same machine, whatever their working directory.

At the end of the session every fixture has stopped what it started: a process of the
run still alive then (after a grace period for JVMs that exit on their parent's death)
outlives it. The exceptions are bound to pytest's own life: its in-process SparkSession's
JVM (which exits when pytest's end of its stdin closes), and multiprocessing's resource
tracker (likewise, on EOF).
"""

from __future__ import annotations

import contextlib
import multiprocessing.resource_tracker
import os
import subprocess
import sys
import uuid

import psutil

RUN_MARKER = "FLINK_RUNTIME_TEST_RUN"
GRACE_ENV = "FLINK_RUNTIME_TEST_LEFTOVER_GRACE"
# Seconds: a JVM notices its parent's death within about 2 s. A run whose only processes
# are plain sleepers (test_run_leftovers.py's inner run) sets less through GRACE_ENV, so
# the check of the check does not wait out a JVM's grace for a process that is no JVM.
GRACE = float(os.environ.get(GRACE_ENV, "10"))


def mark_run() -> str:
    """A new id for this run, in the environment every process it starts inherits (a
    fresh one even when a run starts a run: each checks its own)."""
    run_id = uuid.uuid4().hex
    os.environ[RUN_MARKER] = run_id
    return run_id


def processes_of_run(run_id: str) -> list[psutil.Process]:
    """The processes other than this one whose environment carries `run_id`."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            if process.environ().get(RUN_MARKER) == run_id:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def _bound_to_this_process() -> set[int]:
    """Children that end with this process by themselves (see the module's comment)."""
    pids: set[int] = set()
    tracker = getattr(multiprocessing.resource_tracker._resource_tracker, "_pid", None)  # noqa: SLF001
    if tracker:
        pids.add(tracker)
    context = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    gateway = getattr(getattr(context, "SparkContext", None), "_gateway", None)
    jvm = getattr(gateway, "proc", None)
    if jvm is not None and jvm.poll() is None:
        pids.add(jvm.pid)
        with contextlib.suppress(psutil.NoSuchProcess):
            pids.update(child.pid for child in psutil.Process(jvm.pid).children(recursive=True))
    return pids


def survivors(run_id: str, grace: float = GRACE) -> list[psutil.Process]:
    """The run's processes still alive after `grace` seconds, this process's own bound
    helpers excepted."""
    bound = _bound_to_this_process()
    candidates = [process for process in processes_of_run(run_id) if process.pid not in bound]
    _, alive = psutil.wait_procs(candidates, timeout=grace)
    return [process for process in alive if _alive(process)]


def describe(process: psutil.Process) -> str:
    try:
        parent = process.ppid()
        command = " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return f"pid {process.pid} (gone meanwhile)"
    return f"pid {process.pid} (parent {parent}{', orphaned' if parent == 1 else ''}): {command[:300]}"


def kill(processes: list[psutil.Process]) -> None:
    """SIGKILL each, its descendants first."""
    for process in processes:
        try:
            family = [*process.children(recursive=True), process]
        except psutil.NoSuchProcess:
            continue
        for member in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.kill()
    psutil.wait_procs(processes, timeout=10)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def python_driver(source: str, project_root: str) -> subprocess.Popen[str]:
    """`python -c source` in the project root, its stdout a pipe: the parent a kill -9 test
    kills, to see that what it started does not outlive it."""
    return subprocess.Popen(
        [sys.executable, "-c", source],
        cwd=project_root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": project_root},
    )
