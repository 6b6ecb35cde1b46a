"""REST: the JobManager's process, in Flink 2.3's shapes.

`/jobmanager/environment` is Flink's EnvironmentInfo: `{"jvm": {"version", "arch",
"options", "javaVersion"}, "classpath": [...]}`, here the Python interpreter (its version,
architecture and command line) and sys.path. `/jobmanager/thread-dump` is Flink's
ThreadDumpInfo: `{"threadInfos": [{"threadName", "stringifiedThreadInfo"}]}`, one entry
per Python thread with its current stack (logs/thread_dump.py, which the TaskManagers'
dumps use too). Configuration, logs and metrics are served by cluster_routes.py,
log_routes.py and metric_routes.py.
"""

from __future__ import annotations

import platform
import re
import sys
from typing import Any

from fastapi import APIRouter

from flink_runtime.logs.thread_dump import thread_dump

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


def thread_dump_info(threads: list[tuple[str, str]]) -> dict[str, Any]:
    """Flink's ThreadDumpInfo of (thread name, stringified stack) pairs (logs/thread_dump.py)."""
    return {"threadInfos": [{"threadName": name, "stringifiedThreadInfo": text} for name, text in threads]}


def jobmanager_routes() -> APIRouter:
    router = APIRouter()

    @router.get("/jobmanager/environment", summary="The JobManager's environment (Flink's EnvironmentInfo)")
    async def environment() -> dict[str, Any]:
        return environment_info()

    @router.get("/jobmanager/thread-dump", summary="The JobManager's threads and their stacks (Flink's ThreadDumpInfo)")
    async def dump() -> dict[str, Any]:
        return thread_dump_info(thread_dump())

    return router
