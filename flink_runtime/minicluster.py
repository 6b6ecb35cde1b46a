"""MiniCluster: a JobManager, its REST API and N TaskManagers in one process.

The same actors as a standalone cluster, talking over loopback TCP exactly as
separate processes do; only the process boundary is missing. It runs on its own
event loop in a background thread, so a test, a notebook or an Airflow worker can
start one with `with MiniCluster() as cluster:` and submit to `cluster.rest_url`.

`flink-runtime minicluster` serves one in the foreground (see entrypoints), writing
its log files into `env.log.dir`. One started from Python writes them only when its
configuration sets `env.log.dir` (an embedding program keeps its own logging), and
takes its handler off the root logger again when it stops.

Supervision (rpc/supervision.py): the MiniCluster is the parent of its JobManager and
TaskManagers, and escalates what they cannot handle themselves. In a process of its own
(`flink-runtime minicluster`, the embedded cluster) its parent is the process's top,
which ends the process with the reason for the launcher to start a new one. Started
from Python it is the top itself: it must not end the program that hosts it, so it
shuts down (nothing keeps serving from an unknown state) and keeps the reason as
`failure`; from then on `rest_url`, `call` and `close` (so a `with` block) raise
MiniClusterFailed with it, and the REST URL refuses connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime import logs
from flink_runtime.configuration import Configuration
from flink_runtime.jobmanager.jobmanager import JobManager
from flink_runtime.minicluster_idle import stop_when_idle
from flink_runtime.rest.server import RestServer
from flink_runtime.rpc.supervision import Directive, Supervised, Supervisor, supervise
from flink_runtime.security.cluster_secret import new_secret
from flink_runtime.taskmanager.taskexecutor import TaskExecutor

log = logging.getLogger(__name__)

# Seconds "ready" waits at most for the TaskManagers' Spark warm-up (a JVM start is 7-16 s
# on 2 idle cores; minutes were seen on a loaded machine, where the rest goes on behind
# "ready"). Well inside the embedded cluster launcher's 120 s wait for "ready".
SPARK_WARM_UP_LIMIT = 60.0


class MiniClusterFailed(RuntimeError):
    """One of the MiniCluster's endpoints failed beyond repair and the cluster shut down;
    the message names which one and why (its cause is the original error). Start a new
    MiniCluster to go on."""


class MiniCluster:
    """A cluster in one process, and the supervisor of its endpoints (see above)."""

    name = "MiniCluster"

    def __init__(
        self,
        config: Configuration | None = None,
        num_taskmanagers: int | None = None,
        slots_per_taskmanager: int | None = None,
    ) -> None:
        config = config or Configuration()
        overrides: dict[str, Any] = {}
        # A MiniCluster must not collide with a real cluster on the default ports.
        if cfg.JOBMANAGER_RPC_PORT.key not in config:
            overrides[cfg.JOBMANAGER_RPC_PORT.key] = 0
        if cfg.REST_PORT.key not in config:
            overrides[cfg.REST_PORT.key] = 0
        if slots_per_taskmanager is not None:
            overrides[cfg.TASKMANAGER_SLOTS.key] = slots_per_taskmanager
        self.config = config.copy(overrides)
        self.num_taskmanagers = (
            num_taskmanagers if num_taskmanagers is not None else self.config.get(cfg.MINICLUSTER_TASKMANAGERS)
        )
        # The TaskManagers (and the JobManager) of this process share one SparkSession:
        # give it a core per slot of the whole cluster, whoever starts it first.
        if "spark.master" not in self.config and "spark.remote" not in self.config:
            slots = self.config.get(cfg.TASKMANAGER_SLOTS) or (os.cpu_count() or 1)
            self.config.set("spark.master", f"local[{slots * self.num_taskmanagers}]")
        # RPC is authenticated always: without a configured secret the cluster makes its
        # own, held only in this process's memory (no file, command line or environment
        # shows it), so no other process can register a TaskManager or send it commands.
        self._cluster_secret = str(self.config.get(cfg.CLUSTER_SECRET)) or new_secret()
        self.jobmanager: JobManager | None = None
        self.rest: RestServer | None = None
        self.taskmanagers: list[TaskExecutor] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._logs: logs.ProcessLogs | None = None
        # minicluster.idle-timeout: asked before the cluster stops itself, may refuse
        # (see minicluster_idle.stop_when_idle); the embedded cluster's lock goes here.
        self.may_stop_idle: Callable[[Callable[[], bool]], bool] | None = None
        self._idle_watch: asyncio.Task[None] | None = None
        # Where what the cluster cannot handle goes: None when the cluster is the top of
        # its host (started from Python); the process's top when it is the process.
        self.parent: Supervisor | None = None
        self._failure: MiniClusterFailed | None = None
        # Set once every TaskManager registered (before Spark's warm-up, see start()).
        self._registered = threading.Event()

    @property
    def rest_url(self) -> str:
        self._raise_if_failed()
        assert self.rest is not None, "MiniCluster not started"
        return self.rest.url

    @property
    def failure(self) -> MiniClusterFailed | None:
        """Why the cluster shut down on its own (an endpoint failed), None while it is fine."""
        return self._failure

    # -- supervision of its endpoints --------------------------------------------------------------

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        # An endpoint's own failure leaves the cluster's state unknown: nothing here can
        # restart a JobManager or TaskManager in place.
        return Directive.ESCALATE

    def escalate_failure(self, child: Supervised, error: BaseException) -> None:
        if self.parent is not None:
            supervise(self.parent, child, error)  # the process's top: it ends the process
            return
        if self._failure is not None:
            return  # already shutting down for the first failure
        failure = MiniClusterFailed(f"{child.name} failed: {type(error).__name__}: {error}")
        failure.__cause__ = error
        self._failure = failure
        log.critical("MiniCluster shutting down: %s", failure, exc_info=error)
        if self._stopped is None:
            self._stopped = asyncio.Event()
        self._stopped.set()  # main() (or the foreground's until_stopped_itself) stops it

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise self._failure

    # -- async core (the background thread here, or the foreground entry point) ---------------

    async def start_async(self) -> None:
        if cfg.LOG_DIR.key in self.config:
            self._logs = logs.acquire(self.config, "minicluster", logs.process_id_for(self.config))
        self._stopped = self._stopped or asyncio.Event()
        self.jobmanager = JobManager(self.config, embedded=True, cluster_secret=self._cluster_secret)
        self.jobmanager.parent = self
        await self.jobmanager.start()
        self.rest = RestServer(self.jobmanager, self.config)
        await self.rest.start()
        port = int(self.jobmanager.address.rsplit(":", 1)[1])
        tm_config = self.config.copy({cfg.JOBMANAGER_RPC_PORT.key: port})
        if cfg.PARTITION_SERVING.key not in self.config:
            # The TaskManagers share this process and its data directory: every partition
            # is visible to all of them, no network hop needed.
            tm_config = tm_config.copy({cfg.PARTITION_SERVING.key: "shared"})
        first_port = int(tm_config.get(cfg.TASKMANAGER_RPC_PORT))
        for index in range(self.num_taskmanagers):
            if first_port:
                # TaskManagers of one process cannot share a port: the i-th takes port + i.
                tm_config = tm_config.copy({cfg.TASKMANAGER_RPC_PORT.key: first_port + index})
            taskmanager = TaskExecutor(
                tm_config.copy({cfg.TASKMANAGER_RESOURCE_ID.key: f"minicluster-tm-{index}"}),
                jobmanager_address=self.jobmanager.address,
                cluster_secret=self._cluster_secret,
            )
            taskmanager.parent = self
            await taskmanager.start()
            self.taskmanagers.append(taskmanager)
        await self._until_registered_or_failed()
        self._registered.set()
        await self._until_spark_warm()
        log.info("MiniCluster ready: REST %s, %d TaskManagers", self.rest.url, len(self.taskmanagers))
        idle_timeout = self.config.get_seconds(cfg.MINICLUSTER_IDLE_TIMEOUT)
        if idle_timeout > 0:
            watch = stop_when_idle(idle_timeout, self._activity, self._stopped.set, self.may_stop_idle)
            self._idle_watch = asyncio.create_task(watch, name="minicluster-idle-timeout")

    async def _until_spark_warm(self) -> None:
        """taskmanager.spark.warm-up: "ready" means the shared SparkSession has started and
        run its tiny query, so the first job pays no JVM start. At most SPARK_WARM_UP_LIMIT:
        a slow start then goes on behind "ready" and the first job waits for the rest."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        for taskmanager in self.taskmanagers:
            left = max(0.0, SPARK_WARM_UP_LIMIT - (time.monotonic() - started))
            if not await loop.run_in_executor(None, taskmanager.spark_session.warmed.wait, left):
                log.warning("Spark is not warm after %.0f s; the MiniCluster reports ready anyway", SPARK_WARM_UP_LIMIT)
                return

    async def _until_registered_or_failed(self) -> None:
        registered = asyncio.ensure_future(asyncio.gather(*(tm.registered.wait() for tm in self.taskmanagers)))
        assert self._stopped is not None
        stopped = asyncio.ensure_future(self._stopped.wait())
        await asyncio.wait([registered, stopped], return_when=asyncio.FIRST_COMPLETED)
        for waiting in (registered, stopped):
            waiting.cancel()
        await asyncio.gather(registered, stopped, return_exceptions=True)
        self._raise_if_failed()

    def _activity(self) -> tuple[int, bool]:
        received, answering = self.rest.request_counts() if self.rest is not None else (0, 0)
        jobs = self.jobmanager.jobs.values() if self.jobmanager is not None else ()
        return received, answering > 0 or any(not job.status.is_globally_terminal for job in jobs)

    async def until_stopped_itself(self) -> None:
        """Returns when the cluster decided to stop (minicluster.idle-timeout, or a failure
        when it is the top of its host); never otherwise."""
        assert self._stopped is not None, "MiniCluster not started"
        await self._stopped.wait()

    async def stop_async(self) -> None:
        if self._idle_watch is not None:
            self._idle_watch.cancel()
            self._idle_watch = None
        for taskmanager in self.taskmanagers:
            await self._stop_part(taskmanager.name, taskmanager.stop)
        self.taskmanagers.clear()
        if self.rest is not None:
            await self._stop_part("REST server", self.rest.stop)
        if self.jobmanager is not None:
            await self._stop_part(self.jobmanager.name, self.jobmanager.stop)
        if self._logs is not None:
            logs.release(self._logs)
            self._logs = None

    async def _stop_part(self, name: str, stop: Callable[[], Awaitable[None]]) -> None:
        if self._failure is None:
            await stop()
            return
        # Shutting down after a failure: a part in an unknown state may fail to stop;
        # the others must stop all the same.
        try:
            await stop()
        except Exception as error:  # noqa: BLE001 - logged; the failure's reason is already kept
            log.warning("MiniCluster: stopping %s after the failure raised %s: %s", name, type(error).__name__, error)

    # -- background thread ---------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> MiniCluster:
        """`timeout`: until the TaskManagers registered; Spark's warm-up may take up to
        SPARK_WARM_UP_LIMIT more."""
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)

            async def main() -> None:
                self._stopped = asyncio.Event()
                try:
                    await self.start_async()
                except BaseException as exc:
                    failure.append(exc)
                    self._registered.set()
                    started.set()
                    await self.stop_async()
                    return
                started.set()
                assert self._stopped is not None
                await self._stopped.wait()
                await self.stop_async()

            try:
                loop.run_until_complete(main())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="minicluster", daemon=True)
        self._thread.start()
        registered = self._registered.wait(timeout)
        if not started.wait(SPARK_WARM_UP_LIMIT + 5 if registered else 0):
            raise TimeoutError(f"MiniCluster did not start within {timeout} s")
        if failure:
            self._thread.join(timeout)  # stopped what it had started
            if isinstance(failure[0], MiniClusterFailed):
                raise failure[0]  # an endpoint failed while it started: the reason as is
            raise RuntimeError(f"MiniCluster failed to start: {failure[0]}") from failure[0]
        return self

    def close(self, timeout: float = 30.0) -> None:
        """Stop the cluster. Raises MiniClusterFailed if it had shut down on its own
        after a failure (once stopped: the caller learns why its work may be lost)."""
        if self._loop is not None and self._thread is not None and self._stopped is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(timeout)
            self._thread = None
        self._raise_if_failed()

    def call(self, coroutine_factory: Any, timeout: float = 30.0) -> Any:
        """Run a coroutine on the cluster's loop (tests use it to reach the actors)."""
        self._raise_if_failed()
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine_factory(), self._loop).result(timeout)

    def __enter__(self) -> MiniCluster:
        return self.start()

    def __exit__(self, exc_type: Any, exc: BaseException | None, traceback: Any) -> None:
        try:
            self.close()
        except MiniClusterFailed as failure:
            if failure is not exc:  # the block is raising it already: once is enough
                raise
