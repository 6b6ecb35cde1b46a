"""A TaskManager resolves Spark plans for the JobManager's planner (ResolvePlan).

The planner process checks each Spark vertex's chain at submit by running Spark's
analyzer on empty DataFrames (operators/spark/plan.py). A JVM of its own for that costs
the JobManager's host ~260 MB for as long as the planner lives; a TaskManager has a warm
one for its tasks, and runs the job's code (its transforms) on real data anyway. So the
planner asks a TaskManager, and starts its own JVM only when none answers
(planner/remote_plan.py).

Here the plan is resolved as the planner would: the job's libraries made importable (as
a task activates them), on a child session of the TaskManager's SparkSession (its own
temporary views: the chain's `sql` views never meet a running task's), in a thread of
its own, never in the mailbox. The job's code gets `timeout` seconds: past them the
answer is `timed_out`, and the thread is interrupted (an exception raised in it, as a
cancelled task's thread is: it stops a loop of Python code, not a call stuck in C).

What the job's code raises is answered as the planner describes it (PlanRefused with
user_code); what keeps this TaskManager from trying (a library it cannot fetch, a file
outside its allowed directories, a Spark Connect session) is answered with user_code
false, and the planner resolves the plan itself then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

from flink_runtime.blob import BlobServer, LibraryError, activate_libraries_lazily
from flink_runtime.planner.user_code import describe
from flink_runtime.rpc.messages import PlanRefused, PlanResolved, ResolvePlan
from flink_runtime.security.paths import AllowedDirectories
from flink_runtime.taskmanager.task_threads import raise_in_thread

log = logging.getLogger(__name__)


class CannotResolve(Exception):
    """This TaskManager cannot resolve the plan (not the job's code's fault)."""


class PlanResolution:
    """Answers ResolvePlan off the mailbox (TaskExecutor delegates to it)."""

    def __init__(
        self,
        spark: Callable[[], Any],
        blob_server: Callable[[], BlobServer],
        blob_cache_dir: str,
        allowed_directories: list[str],
        name: str,
    ) -> None:
        """spark: the TaskManager's SparkSession (started on first use); blob_server: the
        current JobManager's library download (read in the event loop)."""
        self._spark = spark
        self._blob_server = blob_server
        self._blob_cache_dir = blob_cache_dir
        self._allowed = AllowedDirectories(allowed_directories)
        self._name = name

    async def resolve(self, message: ResolvePlan) -> PlanResolved | PlanRefused:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[PlanResolved | PlanRefused] = loop.create_future()
        blob_server = self._blob_server()

        def run() -> None:
            result = self._resolve(message, blob_server)
            # An interrupted thread ends after its answer went (timed_out), maybe after the
            # loop closed (the TaskManager stopped): nobody waits for this result then.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: answer.done() or answer.set_result(result))

        # A daemon thread, not the loop's executor: a transform that never returns must
        # not hold up the TaskManager's exit.
        thread = threading.Thread(target=run, name=f"resolve-plan-{message.job_id}", daemon=True)
        thread.start()
        try:
            return await asyncio.wait_for(asyncio.shield(answer), message.timeout)
        except TimeoutError:
            _interrupt(thread)
            log.warning(
                "%s: the plan of job %s was not resolved within %g s (the job's code does not return); "
                "its thread was interrupted",
                self._name,
                message.job_id,
                message.timeout,
            )
            return PlanRefused(error=f"not resolved within {message.timeout:g} s", timed_out=True)

    def _resolve(self, message: ResolvePlan, blob_server: BlobServer) -> PlanResolved | PlanRefused:
        from flink_runtime.operators.spark.plan import resolve_vertex
        from flink_runtime.spark.session import is_connect

        try:
            try:
                spark = activate_libraries_lazily(
                    message.libraries, cache_dir=self._blob_cache_dir, blob_server=blob_server, spark=self._spark
                )()
            except LibraryError as exc:
                raise CannotResolve(f"the job's libraries: {exc}") from None
            if spark is None or is_connect(spark):
                raise CannotResolve("no classic SparkSession here")
            for path in message.files:
                if problem := self._allowed.problem(path):
                    raise CannotResolve(f"input file {path}: {problem}")
        except CannotResolve as exc:
            return PlanRefused(error=str(exc), user_code=False)
        except Exception as exc:  # noqa: BLE001 - Spark's start failed here: the planner tries its own
            return PlanRefused(error=f"{type(exc).__name__}: {exc}", user_code=False)
        try:
            resolved, output_schema = resolve_vertex(
                spark.newSession(), message.config, list(message.input_schemas), list(message.files)
            )
            return PlanResolved(resolved=resolved, output_schema=output_schema)
        except BaseException as exc:  # noqa: BLE001 - sys.exit in the job's code included
            return PlanRefused(
                error=describe(exc), cause_name=type(exc).__name__, cause_trace="".join(traceback.format_exception(exc))
            )


class PlanResolutionTimeout(BaseException):
    """Raised in a resolving thread past its time (BaseException: the job's code's
    `except Exception` does not swallow it)."""


def _interrupt(thread: threading.Thread) -> None:
    if thread.ident is not None and thread.is_alive():
        raise_in_thread(thread.ident, PlanResolutionTimeout)
