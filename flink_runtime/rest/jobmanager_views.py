"""REST: the JobManager's process, in Flink 2.3's shapes.

`/jobmanager/environment` is Flink's EnvironmentInfo: `{"jvm": {"version", "arch",
"options", "javaVersion"}, "classpath": [...]}`, here the Python interpreter (its version,
architecture and command line) and sys.path. `/jobmanager/thread-dump` is Flink's
ThreadDumpInfo: `{"threadInfos": [{"threadName", "stringifiedThreadInfo"}]}`, one entry
per Python thread with its current stack. (Configuration, logs and metrics are served by
cluster_routes.py, log_routes.py and metric_routes.py.)
"""

from __future__ import annotations

import platform
import re
import sys
import threading
import traceback
from typing import Any

from fastapi import APIRouter

_SECRET = re.compile(r"(token|password|secret|credential|key)", re.IGNORECASE)


def _masked(argument: str) -> str:
    """A command-line argument, its value hidden when its name says it is a secret."""
    name, sep, _ = argument.partition("=")
    return f"{name}{sep}******" if sep and _SECRET.search(name) else argument


def environment_info() -> dict[str, Any]:
    """Flink's EnvironmentInfo for this Python process."""
    return {
        "jvm": {
            "version": f"{platform.python_implementation()} {platform.python_version()} ({sys.version})",
            "arch": platform.machine(),
            "options": [_masked(argument) for argument in getattr(sys, "orig_argv", [sys.executable, *sys.argv])],
            "javaVersion": platform.python_version(),
        },
        "classpath": [entry for entry in sys.path if entry],
    }


def thread_dump() -> dict[str, Any]:
    """Flink's ThreadDumpInfo: each thread's name, state and stack (innermost frame last)."""
    frames = sys._current_frames()  # noqa: SLF001 - the only way to read other threads' stacks
    infos = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident) if thread.ident is not None else None
        stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
        header = f'"{thread.name}" Id={thread.ident}{" daemon" if thread.daemon else ""} RUNNABLE\n'
        infos.append({"threadName": thread.name, "stringifiedThreadInfo": header + stack})
    return {"threadInfos": infos}


def jobmanager_routes() -> APIRouter:
    router = APIRouter()

    @router.get("/jobmanager/environment", summary="The JobManager's environment (Flink's EnvironmentInfo)")
    async def environment() -> dict[str, Any]:
        return environment_info()

    @router.get("/jobmanager/thread-dump", summary="The JobManager's threads and their stacks (Flink's ThreadDumpInfo)")
    async def dump() -> dict[str, Any]:
        return thread_dump()

    return router
