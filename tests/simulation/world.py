"""The simulated cluster: one JobManager and a few TaskManagers, real code, fake world.

What is real: JobManager, JobMaster (scheduling, failover, splits, reconciliation,
recovery), ResourceManager, TaskExecutor (registration, heartbeats, fencing, task
lifecycle). What stands in for the outside world:

- SimRpc (network.py) for ZeroMQ, on the virtual clock (clock.py);
- SimPlanner for the planner process: sources get `splits` input splits, and the
  terminal hook "publishes" the job's output, i.e. the chunks its subtasks committed;
- SimJobStore for the SQL job store: the same calls, kept in memory, surviving
  JobManager crashes as the database does;
- SimTask (tasks.py) for a task's thread and invokable.

Crashes are kill -9: the endpoint's mailbox and timers stop, its transport unbinds
(peers see the connection drop), nothing of on_stop runs; its tasks die with it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import os
import random
import tempfile
from collections.abc import Callable
from typing import Any

from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.invokable import Prepared
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobmanager.jobmanager import JobManager
from flink_runtime.jobmanager.jobstore_schema import TERMINAL_STATUSES, CheckpointRecord, JobRecord
from flink_runtime.planner import tasks as planner_tasks
from flink_runtime.rpc.endpoint import RpcEndpoint
from flink_runtime.taskmanager.taskexecutor import TaskExecutor
from tests.simulation.clock import InlineExecutor
from tests.simulation.network import SimNetwork, SimRpc
from tests.simulation.tasks import SimTask, TaskFaults

SECRET = "simulated-cluster-secret"
JOBMANAGER_ADDRESS = "sim://jobmanager:6123"

# Shared by every run (JobManagers mostly delete what they find there at a job's end).
_DATA_DIR = os.path.join(tempfile.gettempdir(), f"flink-runtime-simulation-{os.getuid()}")


def cluster_config(overrides: dict[str, Any] | None = None) -> Configuration:
    values: dict[str, Any] = {
        "heartbeat.interval": "1 s",
        "heartbeat.timeout": "5 s",
        "pekko.ask.timeout": "2 s",
        "cluster.registration.initial-timeout": "100 ms",
        "cluster.registration.max-timeout": "2 s",
        "cluster.registration.error-delay": "1 s",
        "cluster.registration.refused-registration-delay": "1 s",
        "slot.request.timeout": "20 s",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 1000,
        "restart-strategy.fixed-delay.delay": "500 ms",
        "task.cancellation.interval": "500 ms",
        "task.cancellation.timeout": "3 s",
        "jobmanager.planner.warm-up": False,
        "metrics.system-resource-probing-interval": "1 h",
        "io.tmp.dirs": _DATA_DIR,
        "blob.storage.directory": _DATA_DIR + "/blobs",
        "jobstore.expiration-time": "1 h",
        "execution.checkpointing.min-interval": "100 ms",
        "state.checkpoints.dir": _DATA_DIR + "/checkpoints",
    }
    values.update(overrides or {})
    return Configuration(values)


class SimPlanner:
    """The planner process's two calls, in-process and instant."""

    def __init__(self, world: World) -> None:
        self.world = world

    def warm_up(self) -> None:
        pass

    def close(self) -> None:
        pass

    def run(self, function: Callable[..., Any], *args: Any, timeout: float) -> Any:
        if function is planner_tasks.prepare_job:
            graph = JobGraph.from_json(args[0])
            return {
                vertex.id: Prepared(
                    splits=[InputSplit(split_number=n) for n in range(vertex.config["splits"])]
                    if "splits" in vertex.config
                    else []
                )
                for vertex in graph.vertices
            }
        if function is planner_tasks.run_terminal_hooks:
            job_graph_json, _config, _prepared, data_namespace, status = args[:5]
            if status is JobStatus.FINISHED:
                self.world.publish(JobGraph.from_json(job_graph_json), data_namespace)
            return None
        raise AssertionError(f"the simulated planner does not run {function.__name__}")


class SimJobStore:
    """The JobStore calls the JobManager makes, kept in memory (survives JobManager crashes)."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self._checkpoints: dict[str, list[CheckpointRecord]] = {}
        self._recovery_attempts: dict[str, int] = {}
        self._savepoint_requests: dict[str, dict[str, dict[str, Any]]] = {}

    def close(self) -> None:
        pass

    def add_job(self, job_id: str, name: str, job_graph_json: bytes | str, submitted_at: float) -> None:
        if isinstance(job_graph_json, bytes):
            job_graph_json = job_graph_json.decode()
        assert job_id not in self.jobs, f"job {job_id} stored twice"
        self.jobs[job_id] = JobRecord(job_id, name, job_graph_json, "INITIALIZING", submitted_at, submitted_at, None)

    def update_status(self, job_id: str, status: str, timestamp: float) -> None:
        record = self.jobs.get(job_id)
        if record is not None:
            ended = timestamp if str(status) in TERMINAL_STATUSES else None
            self.jobs[job_id] = dataclasses.replace(record, status=str(status), updated_at=timestamp, ended_at=ended)

    def archive(self, job_id: str, details: dict[str, Any], exceptions: dict[str, Any]) -> None:
        record = self.jobs.get(job_id)
        if record is not None:
            self.jobs[job_id] = dataclasses.replace(record, details=details, exceptions=exceptions)

    def _latest(self, record: JobRecord) -> JobRecord:
        checkpoints = self._checkpoints.get(record.job_id)
        return dataclasses.replace(record, latest_checkpoint=checkpoints[-1] if checkpoints else None)

    def recoverable_jobs(self) -> list[JobRecord]:
        records = [r for r in self.jobs.values() if r.status not in TERMINAL_STATUSES]
        return [self._latest(r) for r in sorted(records, key=lambda r: r.submitted_at)]

    def archived_jobs(self, limit: int = 1000) -> list[JobRecord]:
        records = [r for r in self.jobs.values() if r.status in TERMINAL_STATUSES]
        records.sort(key=lambda r: (r.ended_at or 0.0, r.submitted_at), reverse=True)
        return [self._latest(r) for r in records[:limit]]

    def prune(self, max_capacity: int, finished_before: float) -> int:
        return 0  # the simulation never runs long enough to expire a job

    def begin_recovery(self, job_id: str) -> int:
        self._recovery_attempts[job_id] = self._recovery_attempts.get(job_id, 0) + 1
        return self._recovery_attempts[job_id]

    def end_recovery(self, job_id: str) -> None:
        self._recovery_attempts.pop(job_id, None)

    def put_savepoint_request(self, job_id: str, request_id: str, status: dict[str, Any]) -> None:
        self._savepoint_requests.setdefault(job_id, {})[request_id] = copy.deepcopy(status)

    def savepoint_requests(self, job_id: str) -> dict[str, dict[str, Any]]:
        return copy.deepcopy(self._savepoint_requests.get(job_id, {}))

    def add_checkpoint(
        self,
        job_id: str,
        checkpoint_id: int,
        location: str,
        is_savepoint: bool,
        completed_at: float,
        size_bytes: int,
        metadata: dict[str, Any] | None = None,
        subsumed: list[str] | None = None,
    ) -> None:
        checkpoints = self._checkpoints.setdefault(job_id, [])
        assert all(c.checkpoint_id != checkpoint_id for c in checkpoints), f"checkpoint {checkpoint_id} stored twice"
        checkpoints.append(
            CheckpointRecord(job_id, checkpoint_id, location, is_savepoint, completed_at, size_bytes, metadata or {})
        )
        checkpoints.sort(key=lambda c: c.checkpoint_id)
        if subsumed:
            checkpoints[:] = [c for c in checkpoints if c.is_savepoint or c.location not in subsumed]

    def checkpoints(self, job_id: str) -> list[CheckpointRecord]:
        return list(self._checkpoints.get(job_id, []))


class _NoMetrics:
    """Instead of the TaskManager's sampler thread (psutil): no metrics, no thread."""

    latest: dict[str, float] = {}

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


@dataclasses.dataclass
class TaskManagerSlot:
    """One TaskManager position of the cluster; its process may be down or restarted."""

    index: int
    slots: int
    executor: TaskExecutor | None = None
    incarnation: int = 0

    @property
    def resource_id(self) -> str:
        return f"tm-{self.index}"


class World:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        rng: random.Random,
        trace: Callable[[str], None],
        config: Configuration,
        task_faults: TaskFaults,
    ) -> None:
        self.loop = loop
        self.rng = rng
        self.trace = trace
        self.config = config
        self.task_faults = task_faults
        self.network = SimNetwork(loop, rng, trace)
        self.store = SimJobStore()
        self.jobmanager: JobManager | None = None
        self.jobmanager_incarnation = 0
        self.task_managers: list[TaskManagerSlot] = []
        self.live_tasks: set[SimTask] = set()
        # (data namespace, vertex id, subtask index) -> split number -> attempt that committed it
        self.partitions: dict[tuple[str, str, int], dict[int, str]] = {}
        # data namespace -> what its job published: vertex id -> split -> subtask
        self.published: dict[str, dict[str, dict[int, int]]] = {}
        self.violations: list[str] = []
        # Things worth counting that break no invariant (a zombie attempt cancelled in time).
        self.notes: dict[str, int] = {}
        # Checked with the published output (invariants.py sets it).
        self.on_publish: Callable[[JobGraph, str], None] = lambda graph, namespace: None
        self.on_chunk: Callable[[SimTask, int], None] = lambda task, split: None

    def violate(self, kind: str, what: str) -> None:
        """An invariant broke: `kind` names which (the test tells known bugs by it)."""
        violation = f"[{kind}] {what}"
        if violation not in self.violations:  # checked after every step: once is enough
            self.trace(f"VIOLATION {violation}")
            self.violations.append(violation)

    def note(self, what: str) -> None:
        if what not in self.notes:
            self.trace(f"note: {what}")
        self.notes[what] = self.notes.get(what, 0) + 1

    # -- processes -------------------------------------------------------------------------------

    async def start_jobmanager(self) -> JobManager:
        self.jobmanager_incarnation += 1
        rpc = SimRpc(self.network, JOBMANAGER_ADDRESS)
        jobmanager = JobManager(self.config, cluster_secret=SECRET, rpc=rpc, planner=SimPlanner(self))
        jobmanager.job_store = self.store  # type: ignore[assignment]
        jobmanager._store_writer.shutdown(wait=False)
        jobmanager._store_writer = InlineExecutor()
        self.jobmanager = jobmanager
        self.trace(f"start JobManager #{self.jobmanager_incarnation} ({jobmanager.jobmanager_id[:8]})")
        await jobmanager.start()
        return jobmanager

    def crash_jobmanager(self) -> None:
        jobmanager = self.jobmanager
        if jobmanager is None:
            return
        self.trace(f"crash JobManager #{self.jobmanager_incarnation}")
        self.jobmanager = None
        _kill_endpoint(jobmanager)

    def add_task_manager(self, slots: int) -> TaskManagerSlot:
        slot = TaskManagerSlot(len(self.task_managers), slots)
        self.task_managers.append(slot)
        return slot

    async def start_task_manager(self, slot: TaskManagerSlot) -> None:
        slot.incarnation += 1
        address = f"sim://{slot.resource_id}-{slot.incarnation}:6122"
        config = self.config.copy(
            {"taskmanager.resource-id": slot.resource_id, "taskmanager.numberOfTaskSlots": slot.slots}
        )
        executor: TaskExecutor | None = None

        def task_factory(descriptor: Any, data_dir: str, **kwargs: Any) -> SimTask:
            assert executor is not None
            seed = self.rng.getrandbits(32)
            return SimTask(self, executor, descriptor, data_dir, rng=random.Random(seed), **kwargs)

        executor = TaskExecutor(
            config,
            JOBMANAGER_ADDRESS,
            cluster_secret=SECRET,
            rpc=SimRpc(self.network, address),
            task_factory=task_factory,  # type: ignore[arg-type]
        )
        executor.system_metrics = _NoMetrics()  # type: ignore[assignment]
        slot.executor = executor
        self.trace(f"start {slot.resource_id} #{slot.incarnation} ({slot.slots} slots)")
        await executor.start()

    def crash_task_manager(self, slot: TaskManagerSlot) -> None:
        executor = slot.executor
        if executor is None:
            return
        self.trace(f"crash {slot.resource_id} #{slot.incarnation}")
        slot.executor = None
        for task in list(self.live_tasks):
            if task.executor is executor:
                task.kill()
        _kill_endpoint(executor)

    # -- the data the tasks write ------------------------------------------------------------------

    def name_of(self, task: SimTask) -> str:
        d = task.descriptor
        return f"{d.job_name}/{d.vertex_id}[{d.subtask_index}]#{d.attempt_number}"

    def commit_chunk(self, task: SimTask, split: int) -> None:
        d = task.descriptor
        self.on_chunk(task, split)
        self.partitions.setdefault((task.namespace, d.vertex_id, d.subtask_index), {})[split] = d.execution_id

    def remove_unreported_chunks(self, task: SimTask, completed: set[int]) -> None:
        d = task.descriptor
        chunks = self.partitions.get((task.namespace, d.vertex_id, d.subtask_index), {})
        for split in [s for s in chunks if s not in completed]:
            del chunks[split]

    def publish(self, graph: JobGraph, namespace: str) -> None:
        output: dict[str, dict[int, int]] = {}
        for (chunk_namespace, vertex_id, subtask), chunks in self.partitions.items():
            if chunk_namespace == namespace:
                by_split = output.setdefault(vertex_id, {})
                for split in chunks:
                    if split in by_split:
                        self.violate(
                            "exactly-once",
                            f"split {split} of {graph.name}/{vertex_id} published twice: by subtasks "
                            f"{by_split[split]} and {subtask} (namespace {namespace})",
                        )
                    by_split[split] = subtask
        self.trace(f"publish {graph.name} ({namespace})")
        self.published[namespace] = output
        self.on_publish(graph, namespace)


def _kill_endpoint(endpoint: RpcEndpoint) -> None:
    """kill -9: no on_stop, no goodbye; the mailbox and every timer of the endpoint stop."""
    endpoint.rpc.crash()  # type: ignore[attr-defined]
    for task in list(endpoint._background):
        task.cancel()
    if endpoint._drainer is not None:
        endpoint._drainer.cancel()
    # Callbacks still queued for the mailbox (run_in_mailbox from a timer) find nobody.
    endpoint._mailbox = asyncio.Queue()
