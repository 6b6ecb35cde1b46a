"""Process entry points: a standalone JobManager, TaskManager or MiniCluster.

Each runs its actors on one asyncio loop in the foreground until SIGINT or SIGTERM,
then shuts down cleanly (a TaskManager tells the JobManager it is leaving, so its
slots are freed at once rather than after a heartbeat timeout).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import tempfile
from collections.abc import Awaitable, Callable

from flink_runtime.configuration import Configuration
from flink_runtime.rpc.supervision import ProcessSupervisor

log = logging.getLogger(__name__)


def run_until_signal(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
        try:
            await start()
            await stopping.wait()
        finally:
            await stop()

    asyncio.run(main())


def run_jobmanager(config: Configuration) -> None:
    from flink_runtime.jobmanager.jobmanager import JobManager
    from flink_runtime.rest.server import RestServer

    if config.raw("jobstore.url") is None:
        # A standalone JobManager keeps its jobs across restarts by default.
        cluster_id = str(config.raw("high-availability.cluster-id") or "default").strip("/") or "default"
        store = os.path.join(tempfile.gettempdir(), "flink-runtime", f"jobstore-{cluster_id}.db")
        config.set("jobstore.url", f"sqlite:///{store}")
    jobmanager = JobManager(config)
    jobmanager.parent = ProcessSupervisor()  # what it cannot handle ends the process
    rest = RestServer(jobmanager, config)

    async def start() -> None:
        await jobmanager.start()
        await rest.start()
        # One parseable line for scripts and tests that start us and need the addresses.
        print(f"JobManager ready rpc={jobmanager.address} rest={rest.url}", flush=True)

    async def stop() -> None:
        await rest.stop()
        await jobmanager.stop()

    run_until_signal(start, stop)


def run_taskmanager(config: Configuration) -> None:
    from flink_runtime.taskmanager.taskexecutor import TaskExecutor

    taskmanager = TaskExecutor(config)
    taskmanager.parent = ProcessSupervisor()  # what it cannot handle ends the process

    async def start() -> None:
        await taskmanager.start()
        print(
            f"TaskManager {taskmanager.resource_id} ready rpc={taskmanager.address} "
            f"jobmanager={taskmanager.jobmanager_address} slots={taskmanager.slots}",
            flush=True,
        )

    run_until_signal(start, taskmanager.stop)


def run_minicluster(config: Configuration, num_taskmanagers: int | None = None) -> None:
    from flink_runtime.minicluster import MiniCluster

    cluster = MiniCluster(config, num_taskmanagers=num_taskmanagers)

    async def start() -> None:
        await cluster.start_async()
        print(f"MiniCluster ready rest={cluster.rest_url} taskmanagers={len(cluster.taskmanagers)}", flush=True)

    run_until_signal(start, cluster.stop_async)
