"""What holds the planner process to its JobManager: it dies with it, and its Python side
has a memory limit.

Dying with the parent. A planner that outlives a JobManager killed with SIGKILL keeps its
Spark JVM (~500 MB) and the JobManager's log file (its stderr) for ever: nothing else
ever stops it. So, first thing in the planner process:

- it becomes the leader of a process group of its own, which its Spark JVM and whatever
  the job's code starts inherit, so one `killpg` ends all of them (the JobManager's
  `PlannerPool` kills the group when it abandons a planner, too);
- on Linux, `prctl(PR_SET_PDEATHSIG, SIGTERM)`: the kernel signals it when its parent
  dies, and the handler kills the group. The signal is tied to the parent *thread* that
  started the process, so the pool starts planners from a thread that lives as long as
  the pool;
- the parent may have died between the fork and the prctl: the parent pid it was given
  is compared with `getppid()` once the signal is armed;
- a watch thread compares `getppid()` with it every half second, for platforms without
  prctl and for a signal that could not run its handler.

A JVM that is running its gateway exits by itself when its Python parent dies (PySpark's
gateway reads its stdin to EOF); one stuck before that (a debugger's `suspend=y`, a hung
start) does not, which is why the whole group is killed.

Memory. `jobmanager.planner.memory` becomes the planner's RLIMIT_DATA (its private
writable memory: heap, malloc arenas, thread stacks): an allocation past it fails at
once with MemoryError, which the job's code cannot mistake for success, and the planner
stays up and warm for the next job. RLIMIT_AS would count address space the JVM only
reserves (gigabytes for its heap, code cache and class space), and watching the RSS
from outside is a race an allocation of a few GB at once wins (from inside, the watcher
needs the GIL the allocating call holds). The JVM inherits rlimits, so the limit is lifted
while the planner starts its SparkSession: the JVM's heap is Spark's to bound
(`spark.driver.memory`, 1g by default).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_WATCH_INTERVAL = 0.5

# The limit this process runs with (bytes; 0: none) and its configured text, for messages.
_limit = 0
_limit_text = ""


def bind_to_parent(parent_pid: int) -> None:
    """Runs first in the planner process (its main thread): end it and everything it
    started when `parent_pid` dies."""
    os.setpgrp()
    signal.signal(signal.SIGTERM, _end_group)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            log.warning(
                "prctl(PR_SET_PDEATHSIG) failed (errno %d): the parent watch alone ends this planner",
                ctypes.get_errno(),
            )
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        _end_group()
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="parent-watch", daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_WATCH_INTERVAL)
    _end_group()


def _end_group(*_: object) -> None:
    # SIGKILL to the group this process leads: its JVM, what the job's code started, itself.
    try:
        os.killpg(os.getpid(), signal.SIGKILL)
    except OSError:  # not a group leader after all: at least this process goes
        os.kill(os.getpid(), signal.SIGKILL)


def kill_group(pid: int) -> None:
    """From the JobManager: kill the process group planner `pid` leads (nothing if it has
    not made it yet, or it is gone)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# -- memory --------------------------------------------------------------------------------------


def limit_memory(limit: int, text: str) -> None:
    """Limit this process's data segment to `limit` bytes (0: no limit); `text` is the
    configured value, as the messages quote it."""
    global _limit, _limit_text
    if limit <= 0:
        return
    _limit, _limit_text = limit, text
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (_within(limit, hard), hard))


@contextlib.contextmanager
def memory_limit_lifted() -> Iterator[None]:
    """While this process starts a child that must not inherit the limit (the Spark JVM)."""
    if _limit <= 0:
        yield
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (_within(_limit, hard), hard))


def _within(limit: int, hard: int) -> int:
    return limit if hard == resource.RLIM_INFINITY else min(limit, hard)


def memory_limit_reason(limit_text: str | None = None) -> str:
    """Why a MemoryError in the planner process happened, naming the limit and its key."""
    text = limit_text or _limit_text
    return (
        f"the job's code ran out of memory in the planner process, whose memory is limited to {text} "
        "(jobmanager.planner.memory): it tried to allocate more while the plan was prepared. Allocate less "
        "when the plan is resolved (a transform is called on an empty DataFrame there), or raise "
        "jobmanager.planner.memory in the cluster's configuration"
    )


def memory_limited() -> bool:
    """Whether this process runs with a memory limit."""
    return _limit > 0
