"""Process entry points: a standalone JobManager, TaskManager or MiniCluster, and a
JobManager for one job (application mode).

Each runs its actors on one asyncio loop in the foreground until SIGINT or SIGTERM,
then shuts down cleanly (a TaskManager tells the JobManager it is leaving, so its
slots are freed at once rather than after a heartbeat timeout). Each writes its log
and a copy of its stdout into `env.log.dir` (flink_runtime/logs) from its first line on.

Each is the top of its actors' supervision (rpc/supervision.py): a failure they cannot
handle ends the process at once with exit status 70 and the reason logged, for whoever
started it (systemd, Docker, Kubernetes, the embedded cluster's launcher) to start it
afresh, instead of serving on from a state nobody knows.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from flink_runtime import configuration as cfg
from flink_runtime import logs
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.planner import guard
from flink_runtime.resourcemanager.driver import PARENT_PID_ENV
from flink_runtime.rpc.messages import JobStatusChanged, JobSubmissionFailure, SubmitJob
from flink_runtime.rpc.supervision import ProcessSupervisor

if TYPE_CHECKING:
    from flink_runtime.minicluster import MiniCluster
    from flink_runtime.taskmanager.taskexecutor import TaskExecutor

log = logging.getLogger(__name__)


def run_until_signal(
    start: Callable[[], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    until: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Run until SIGINT or SIGTERM, or until ``until()`` returns (a process that stops itself)."""

    async def main() -> None:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
        try:
            await start()
            # What the process holds once started (modules, the REST app, its configuration)
            # lives as long as it does: out of the cyclic collector's sight from now on. A
            # full collection otherwise walks all of it again each time the objects a busy
            # process makes add up (~50 ms a time in a JobManager, several times per job of
            # 10,000 subtasks, its loop stopped meanwhile). What of it later becomes cyclic
            # garbage is never freed: a one-off, bounded by the start's own objects.
            gc.freeze()
            waits = [asyncio.ensure_future(stopping.wait())]
            if until is not None:
                waits.append(asyncio.ensure_future(until()))
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for wait in waits:
                wait.cancel()
        finally:
            await stop()

    asyncio.run(main())


def run_jobmanager(config: Configuration) -> None:
    with _log_files(config, "jobmanager", logs.process_id_for(config)):
        _run_jobmanager(config)


def _run_jobmanager(config: Configuration) -> None:
    from flink_runtime.jobmanager.jobmanager import JobManager
    from flink_runtime.rest.server import RestServer

    if config.get(cfg.JobStoreOptions.URL) is None:
        # A standalone JobManager keeps its jobs across restarts by default.
        cluster_id = config.get(cfg.HA_CLUSTER_ID).strip("/") or "default"
        store = os.path.join(tempfile.gettempdir(), "flink-runtime", f"jobstore-{cluster_id}.db")
        config.set(cfg.JobStoreOptions.URL.key, f"sqlite:///{store}")
    jobmanager = JobManager(config)
    jobmanager.parent = ProcessSupervisor()  # the default, said here: what it cannot handle ends the process
    rest = RestServer(jobmanager, config)

    async def start() -> None:
        await jobmanager.start()
        await rest.start()
        jobmanager.start_leader_election()  # with standbys; the lease names the REST URL
        # One parseable line for scripts and tests that start us and need the addresses.
        print(f"JobManager ready rpc={jobmanager.address} rest={rest.url}", flush=True)

    async def stop() -> None:
        await rest.stop()
        await jobmanager.stop()

    run_until_signal(start, stop)


def run_taskmanager(config: Configuration) -> None:
    from flink_runtime.taskmanager.taskexecutor import TaskExecutor

    parent = os.environ.pop(PARENT_PID_ENV, "")
    if parent.isdigit():
        # Started by a JobManager's process driver: end with it, even when it is SIGKILLed.
        guard.bind_to_parent(int(parent))
    if not config.get(cfg.TASKMANAGER_RESOURCE_ID):
        # Chosen here rather than by the TaskExecutor: the log file is named after it.
        config.set(cfg.TASKMANAGER_RESOURCE_ID.key, f"tm-{uuid.uuid4().hex[:12]}")
    with _log_files(config, "taskexecutor", config.get(cfg.TASKMANAGER_RESOURCE_ID)), logs.queued_root_handlers():
        # Task threads only queue their lines; one writer thread writes them (logs/queued.py).
        _run_taskmanager(TaskExecutor(config))


def _run_taskmanager(taskmanager: TaskExecutor) -> None:
    taskmanager.parent = ProcessSupervisor()  # the default, said here: what it cannot handle ends the process

    async def start() -> None:
        await taskmanager.start()
        print(
            f"TaskManager {taskmanager.resource_id} ready rpc={taskmanager.address} "
            f"jobmanager={taskmanager.jobmanager_address} slots={taskmanager.slots}",
            flush=True,
        )

    run_until_signal(start, taskmanager.stop)


def run_application(config: Configuration, document: dict[str, Any]) -> JobStatus | str:
    """Application mode (Flink's per-job/application cluster): a JobManager for one job
    that starts its TaskManagers on demand (resourcemanager.driver process unless docker
    is asked for), runs the job, and stops everything when the job ends. Returns the
    job's terminal state, or why it was not accepted (a str)."""
    from flink_runtime.jobgraph.jobgraph import new_job_id
    from flink_runtime.jobgraph.validation import InvalidJobGraph, decode_job_graph
    from flink_runtime.jobmanager.jobmanager import JobManager
    from flink_runtime.rest.server import RestServer

    if config.get(cfg.ResourceManagerOptions.DRIVER) == "standalone":
        config.set(cfg.ResourceManagerOptions.DRIVER.key, "process")
    with _log_files(config, "jobmanager", logs.process_id_for(config)):
        jobmanager = JobManager(config)
        jobmanager.parent = ProcessSupervisor()
        try:
            job_graph = decode_job_graph(json.dumps(document))
            jobmanager.validate(job_graph)
            job_graph.job_id = job_graph.job_id or new_job_id()
        except InvalidJobGraph as exc:
            jobmanager.planner.close()
            return str(exc)
        rest = RestServer(jobmanager, config)
        outcome: list[JobStatus | str] = []

        async def start() -> None:
            await jobmanager.start()
            await rest.start()
            print(f"JobManager ready rpc={jobmanager.address} rest={rest.url}", flush=True)

        async def run_the_job() -> None:
            ended = asyncio.Event()

            def status_changed(event: JobStatusChanged) -> None:
                if event.job_id == job_graph.job_id and JobStatus(event.new_state).is_globally_terminal:
                    outcome.append(JobStatus(event.new_state))
                    ended.set()

            jobmanager.status_listeners.append(status_changed)
            # The answer comes once the sources run, or never if the job fails first.
            submitted = asyncio.ensure_future(jobmanager.ask_self(SubmitJob(job_graph=job_graph)))
            done = asyncio.ensure_future(ended.wait())
            print(f"Job {job_graph.job_id} submitted; REST API at {rest.url}", flush=True)
            await asyncio.wait([submitted, done], return_when=asyncio.FIRST_COMPLETED)
            if submitted.done() and isinstance(submitted.result(), JobSubmissionFailure):
                outcome.append(submitted.result().reason)
                done.cancel()
                return
            await done
            submitted.cancel()

        async def stop() -> None:
            await rest.stop()
            await jobmanager.stop()

        run_until_signal(start, stop, run_the_job)
    return outcome[0] if outcome else "stopped by a signal before the job ended"


def run_minicluster(
    config: Configuration,
    num_taskmanagers: int | None = None,
    may_stop_idle: Callable[[Callable[[], bool]], bool] | None = None,
) -> None:
    """Serve a MiniCluster until a signal, or until minicluster.idle-timeout stops it
    (``may_stop_idle`` may refuse that, see MiniCluster.may_stop_idle)."""
    from flink_runtime.minicluster import MiniCluster

    with _log_files(config, "minicluster", logs.process_id_for(config)):
        cluster = MiniCluster(config, num_taskmanagers=num_taskmanagers)
        cluster.may_stop_idle = may_stop_idle
        # The cluster is this process: what it escalates ends the process, for whoever
        # started it (systemd, Docker, the embedded cluster's launcher) to start anew.
        cluster.parent = ProcessSupervisor()
        _run_minicluster(cluster)


def _run_minicluster(cluster: MiniCluster) -> None:
    async def start() -> None:
        await cluster.start_async()
        print(f"MiniCluster ready rest={cluster.rest_url} taskmanagers={len(cluster.taskmanagers)}", flush=True)

    run_until_signal(start, cluster.stop_async, cluster.until_stopped_itself)


@contextlib.contextmanager
def _log_files(config: Configuration, role: str, process_id: str) -> Iterator[None]:
    """The process's log files and stdout copy for as long as it runs."""
    process_logs = logs.acquire(config, role, process_id, capture_stdout=True)
    try:
        yield
    finally:
        logs.release(process_logs)
