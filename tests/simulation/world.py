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
import contextvars
import dataclasses
import functools
import os
import random
import tempfile
from collections.abc import Callable
from typing import Any

from flink_runtime.configuration import Configuration
from flink_runtime.highavailability.lease_store import LeaderLease
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobmanager.jobmanager import JobManager
from flink_runtime.rpc.endpoint import RpcEndpoint
from flink_runtime.rpc.messages import TaskDeploymentDescriptor
from flink_runtime.rpc.supervision import Directive
from flink_runtime.taskmanager.taskexecutor import TaskExecutor
from tests.simulation.clock import InlineExecutor
from tests.simulation.network import SimNetwork, SimRpc
from tests.simulation.stand_ins import SimJobStore, SimPlanner
from tests.simulation.tasks import SimTask, TaskFaults

SECRET = "simulated-cluster-secret"
JOBMANAGER_ADDRESS = "sim://jobmanager:6123"
# High availability: two JobManagers on one job store, one leading at a time.
HA_ADDRESSES = ("sim://jobmanager-a:6123", "sim://jobmanager-b:6123")
# How long a dead leader's lease keeps the standby waiting (high-availability lease duration).
LEASE_DURATION = 2.0

# Each run gets a folder of its own under this one, removed after the run: what a run
# leaves there (a checkpoint folder) must not reach the next run of the same seed. In
# memory (tmpfs) where there is one: a schedule writes and deletes dozens of checkpoint
# files, a fifth of its CPU time on a journaled disk.
_TMPFS = "/dev/shm"
DATA_ROOT = os.path.join(
    _TMPFS if os.path.isdir(_TMPFS) and os.access(_TMPFS, os.W_OK) else tempfile.gettempdir(),
    f"flink-runtime-simulation-{os.getuid()}",
)


def cluster_config(data_dir: str, overrides: dict[str, Any] | None = None) -> Configuration:
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
        # Simulated TaskManagers run no Spark: a warm-up would start a real JVM per schedule.
        "taskmanager.spark.warm-up": False,
        "metrics.system-resource-probing-interval": "1 h",
        "io.tmp.dirs": data_dir,
        "blob.storage.directory": data_dir + "/blobs",
        "jobstore.expiration-time": "1 h",
        "execution.checkpointing.min-interval": "100 ms",
        "state.checkpoints.dir": data_dir + "/checkpoints",
    }
    values.update(overrides or {})
    return Configuration(values)


class _SimElection:
    """What the JobManager asks of its LeaderElectionService (leadership.py)."""

    def __init__(self, world: World, jobmanager: JobManager) -> None:
        self.world = world
        self.jobmanager = jobmanager

    def start(self) -> None:
        pass

    def stop(self, release: bool = False) -> None:
        pass

    def step_down(self, lease: LeaderLease, reason: str) -> None:
        self.world.trace(f"{self.jobmanager.address} steps down: {reason}")
        self.world.loop.call_soon(self.world.lease_lost, self.jobmanager, lease)


class SimTaskExecutor(TaskExecutor):
    """The real TaskExecutor, whose tasks are simulated (create_task is its seam for them)."""

    def __init__(self, world: World, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.world = world
        # Their clocks default to the real time.monotonic, bound when their module was
        # imported (before clock.deterministic patched it): the virtual clock instead.
        self.connection._clock = world.loop.time
        self.task_table._clock = world.loop.time

    def create_task(self, descriptor: TaskDeploymentDescriptor) -> SimTask:
        rng = random.Random(self.world.rng.getrandbits(32))
        return SimTask(self.world, self, descriptor, self.data_dir, self.task_table.report_from_task_thread, rng=rng)


class _SimProcess:
    """The top of a simulated process (instead of ProcessSupervisor, which would end the
    simulator's own process): an endpoint failure escalated this far is a handler that
    raised, a bug; it is recorded, and the process dies as exit 70 would end it."""

    name = "process"

    def __init__(self, world: World, endpoint: RpcEndpoint) -> None:
        self.world = world
        self.endpoint = endpoint

    def child_failed(self, child: Any, error: BaseException) -> Directive:
        return Directive.ESCALATE

    def escalate_failure(self, child: Any, error: BaseException) -> None:
        self.world.violate("supervision", f"{child.name} failed, its process ends: {type(error).__name__}: {error}")
        self.world.loop.call_soon(self.world.crash_endpoint, self.endpoint)


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
        high_availability: bool = False,
    ) -> None:
        self.loop = loop
        self.high_availability = high_availability
        # Every JobManager position by address (None: its process is down).
        self.jobmanagers: dict[str, JobManager | None] = dict.fromkeys(
            HA_ADDRESSES if high_availability else (JOBMANAGER_ADDRESS,)
        )
        self.lease: LeaderLease | None = None
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
        # Continuous sources: job id -> its JobSpec (the files that have arrived), and
        # (data namespace, split number) -> the file the split read there.
        self.specs: dict[str, Any] = {}
        self.split_files: dict[tuple[str, int], str] = {}
        # A continuous job's sink: job id -> file -> the run (data namespace's run) that
        # published it; and the jobs whose sink holds the published-rounds marker.
        self.sinks: dict[str, dict[str, str]] = {}
        self.sink_markers: set[str] = set()
        # Its staged chunks, as folders the checkpoints list (committed_chunks.sink_chunks):
        # a restored chunk's folder -> its file; data namespace -> the files restored into it.
        self.restored_chunk_files: dict[str, str] = {}
        self.restored_files: dict[str, set[str]] = {}
        loop.work_duration = self._work_duration
        self.violations: list[str] = []
        # Job id -> when a client's CancelJob was answered CancellationSuccess, and by whom.
        self.cancelled: dict[str, tuple[float, str]] = {}
        # Job id -> a stop-with-savepoint's outcome:
        # ("pending" / "failed" / the savepoint's location, the JobManager that accepted it,
        # the data namespace of the run it stops, its request id)
        self.stops: dict[str, tuple[str, str, str, str]] = {}
        # Data namespace -> when its job's output was published.
        self.publish_times: dict[str, float] = {}
        # Things worth counting that break no invariant (a zombie attempt cancelled in time).
        self.notes: dict[str, int] = {}
        # Checked with the published output (invariants.py sets it).
        self.on_publish: Callable[[JobGraph, str], None] = lambda graph, namespace: None
        self.on_chunk: Callable[[SimTask, int], None] = lambda task, split: None
        self.on_read: Callable[[SimTask, str, int, str], None] = lambda task, vertex, subtask, producer: None

    def _work_duration(self, func: Callable[..., Any]) -> float:
        """A continuous job's publish (its terminal hooks, in a worker) takes a while: a
        stop or cancel can arrive while a round's output is being published."""
        while isinstance(func, functools.partial):  # asyncio.to_thread: partial(ctx.run, f, *args)
            runs_in_context = isinstance(getattr(func.func, "__self__", None), contextvars.Context)
            func = func.args[0] if runs_in_context else func.func
        owner = getattr(func, "__self__", None)
        if getattr(func, "__name__", "") == "run_terminal_hooks" and getattr(owner, "is_continuous", False):
            return self.rng.uniform(0.0, 0.5)
        return 0.0

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

    @property
    def leader_address(self) -> str:
        """Where clients and TaskManagers find the leader (the lease names it)."""
        if not self.high_availability:
            return JOBMANAGER_ADDRESS
        return self.lease.rpc_address if self.lease is not None else HA_ADDRESSES[0]

    def jobmanager_at(self, rpc: Any) -> JobManager | None:
        return next((jm for jm in self.jobmanagers.values() if jm is not None and jm.rpc is rpc), None)

    async def start_jobmanager(self, address: str | None = None) -> JobManager:
        address = address or next(a for a, jm in self.jobmanagers.items() if jm is None)
        self.jobmanager_incarnation += 1
        rpc = SimRpc(self.network, address)
        jobmanager = JobManager(self.config, cluster_secret=SECRET, rpc=rpc, planner=SimPlanner(self))
        persistence, leadership = jobmanager.persistence, jobmanager.leadership
        persistence._writer.shutdown(wait=False)
        persistence._writer = InlineExecutor()
        persistence._store = self.store  # type: ignore[assignment]
        persistence.job_store = self.store  # type: ignore[assignment]
        if self.high_availability:
            # A standby until the simulated election grants it the lease (leadership.py).
            leadership.high_availability = True
            leadership._election = _SimElection(self, jobmanager)  # type: ignore[assignment]
            persistence._fencing_cluster = leadership.cluster_id
            persistence.fence(None)
        else:
            self.jobmanager = jobmanager
        jobmanager.parent = _SimProcess(self, jobmanager)
        self.jobmanagers[address] = jobmanager
        self.trace(f"start JobManager #{self.jobmanager_incarnation} at {address} ({jobmanager.jobmanager_id[:8]})")
        await jobmanager.start()
        if self.high_availability and self.jobmanager is None and self.lease is None:
            self.elect()
        return jobmanager

    def crash_jobmanager(self, address: str | None = None) -> None:
        address = address or self.leader_address
        jobmanager = self.jobmanagers.get(address)
        if jobmanager is None:
            return
        self.trace(f"crash JobManager at {address}")
        self.jobmanagers[address] = None
        if jobmanager is self.jobmanager:
            self.jobmanager = None
            if self.high_availability:
                # The standby takes over once the dead leader's lease ran out.
                self.lease = None
                self.loop.call_later(LEASE_DURATION, self.elect)
        _kill_endpoint(jobmanager)

    # -- high availability: the lease, as the database's lease row holds it --------------------------

    def elect(self, excluding: JobManager | None = None) -> None:
        """Grant the lease to a live JobManager (not `excluding`) if nobody holds it."""
        if not self.high_availability or (self.jobmanager is not None and excluding is None):
            return
        candidates = [jm for jm in self.jobmanagers.values() if jm is not None and jm is not excluding]
        if not candidates:
            return
        jobmanager = self.rng.choice(candidates)
        self.store.lease_token += 1
        now = self.loop.time()
        self.lease = lease = LeaderLease(
            "default", jobmanager.address, self.store.lease_token, jobmanager.address, "", now, now
        )
        self.jobmanager = jobmanager
        self.trace(f"lease {lease.token} granted to {jobmanager.address}")
        jobmanager.run_in_mailbox(jobmanager.leadership._grant, lease)
        for slot in self.task_managers:
            if slot.executor is not None:
                self._announce_leader(slot.executor)

    def _announce_leader(self, executor: TaskExecutor) -> None:
        """A TaskManager reads the lease (it polls: high-availability.retry-period): the lease
        as it is when read, never an older one after a newer."""

        def read() -> None:
            if self.lease is not None:
                executor.run_in_mailbox(executor.connection._leader_seen, self.lease, None)

        self.loop.call_later(self.rng.uniform(0.0, 1.0), read)

    def depose(self) -> None:
        """The leader stalls (a long pause) past its lease: the standby is granted it, and the
        old leader learns it lost the lease only later; meanwhile both think they lead."""
        old = self.jobmanager
        if not self.high_availability or old is None or old.leadership.leader_lease is None:
            return
        old_lease = old.leadership.leader_lease
        self.trace(f"depose {old.address} (lease {old_lease.token})")
        self.elect(excluding=old)
        if self.jobmanager is old:
            return  # no standby up: it keeps the lease
        self.loop.call_later(
            self.rng.uniform(0.0, 3.0), old.run_in_mailbox, old.leadership._revoke, old_lease, "its lease was taken"
        )

    def lease_lost(self, jobmanager: JobManager, lease: LeaderLease) -> None:
        """A leader stepped down (its recovery failed): the lease goes free."""
        if self.lease is not None and self.lease.token == lease.token:
            self.lease = None
            self.jobmanager = None
            jobmanager.run_in_mailbox(jobmanager.leadership._revoke, lease, "stepped down")
            self.loop.call_later(LEASE_DURATION, self.elect)

    def crash_endpoint(self, endpoint: RpcEndpoint) -> None:
        """The process of `endpoint` ends (supervision escalated to its top)."""
        for address, jobmanager in self.jobmanagers.items():
            if jobmanager is endpoint:
                self.crash_jobmanager(address)
        for slot in self.task_managers:
            if slot.executor is endpoint:
                self.crash_task_manager(slot)

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
        executor = SimTaskExecutor(
            self, config, self.leader_address, cluster_secret=SECRET, rpc=SimRpc(self.network, address)
        )
        executor.system_metrics = _NoMetrics()  # type: ignore[assignment]
        executor.parent = _SimProcess(self, executor)
        slot.executor = executor
        self.trace(f"start {slot.resource_id} #{slot.incarnation} ({slot.slots} slots)")
        await executor.start()
        if self.high_availability:
            self._announce_leader(executor)

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

    def commit_chunk(self, task: SimTask, split: int, payload: Any = None) -> None:
        d = task.descriptor
        self.on_chunk(task, split)
        if isinstance(payload, dict) and payload.get("files"):
            self.split_files[(task.namespace, split)] = payload["files"][0]
            # The staged chunk a checkpoint records (SparkTask commits one per split).
            os.makedirs(
                os.path.join(self.sink_staging_dir(task.job_id), task.namespace, f"split-{split}"), exist_ok=True
            )
        self.partitions.setdefault((task.namespace, d.vertex_id, d.subtask_index), {})[split] = d.execution_id

    def partition_location(self, task: SimTask, subpartitions: int) -> str:
        """The location a producer reports for its partition (ScheduleOrUpdateConsumers):
        whose chunks, and into how many subpartitions they split."""
        d = task.descriptor
        return f"sim://{task.namespace}|{d.vertex_id}|{d.subtask_index}|{subpartitions}"

    def serves(self, address: str) -> bool:
        """Whether a live TaskManager process has this address (serves its partitions)."""
        return any(slot.executor is not None and slot.executor.address == address for slot in self.task_managers)

    def read_partition(self, task: SimTask, location: str, subpartition: int, producer: str) -> list[int]:
        """The splits of one subpartition of the partition at `location` (a split goes to
        subpartition split % subpartitions, as the hash partitioner spreads records)."""
        namespace, vertex_id, subtask, subpartitions = location.removeprefix("sim://").split("|")
        self.on_read(task, vertex_id, int(subtask), producer)
        chunks = self.partitions.get((namespace, vertex_id, int(subtask)), {})
        return [split for split in chunks if split % int(subpartitions) == subpartition]

    def commit_output(self, task: SimTask, consumed: dict[int, str]) -> None:
        """A consumer commits its whole output at once (ResultPartitionWriter.commit): what it
        read, replacing what an earlier attempt of its subtask committed."""
        d = task.descriptor
        for split in consumed:
            self.on_chunk(task, split)
        self.trace(f"task {self.name_of(task)} commits splits {sorted(consumed)}")
        self.partitions[(task.namespace, d.vertex_id, d.subtask_index)] = dict.fromkeys(consumed, d.execution_id)

    def remove_unreported_chunks(self, task: SimTask, completed: set[int]) -> None:
        d = task.descriptor
        chunks = self.partitions.get((task.namespace, d.vertex_id, d.subtask_index), {})
        for split in [s for s in chunks if s not in completed]:
            del chunks[split]

    def publish(self, graph: JobGraph, namespace: str) -> None:
        output: dict[str, dict[int, int]] = {}
        # What a job publishes is its sinks' output; what its producers wrote was read by them.
        producers = {dataset.producer for dataset in graph.intermediate_datasets}
        for (chunk_namespace, vertex_id, subtask), chunks in self.partitions.items():
            if chunk_namespace == namespace and vertex_id not in producers:
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
        self.publish_times[namespace] = self.loop.time()
        self.on_publish(graph, namespace)

    # -- a continuous job's sink (SparkTask's rules, operators/spark/io.py) ------------------------

    def sink_staging_dir(self, job_id: str) -> str:
        return os.path.join(str(self.config.raw("io.tmp.dirs")), "sinks", job_id, "_flink_staging")

    def restore_sink_chunks(self, graph: JobGraph, namespace: str, chunks: list[str]) -> None:
        """A checkpoint's staged chunks become part of the run restored from it (copied in
        as `restored-<name>`); their files are published with the run's."""
        staging = self.sink_staging_dir(graph.job_id or "")
        for chunk in chunks:
            name = os.path.basename(chunk.rstrip("/"))
            if name.startswith("restored-"):
                file = self.restored_chunk_files.get(chunk)
            else:
                chunk_namespace = os.path.relpath(os.path.dirname(chunk.rstrip("/")), staging)
                file = self.split_files.get((chunk_namespace, int(name.removeprefix("split-"))))
            if file is None:
                self.violate("continuous/unknown-chunk", f"{graph.name} restores chunk {chunk}, of no file")
                continue
            copy = os.path.join(staging, namespace, f"restored-{name.removeprefix('restored-')}")
            os.makedirs(copy, exist_ok=True)
            self.restored_chunk_files[copy] = file
            self.restored_files.setdefault(namespace, set()).add(file)

    def check_sink_target(self, graph: JobGraph) -> None:
        """Preparing a run of the job: a sink holding output refuses it (mode 'error')
        unless the job published it in rounds (the marker): a recovered run goes on."""
        job_id = graph.job_id or ""
        if self.sinks.get(job_id) and job_id not in self.sink_markers:
            self.violate(
                "continuous/refused", f"a run of {graph.name} is refused: its sink holds output (mode 'error')"
            )
            raise ValueError("output path already exists and is not empty (mode 'error')")

    def publish_files(
        self, graph: JobGraph, namespace: str, status: Any, continuation: bool, more_rounds: bool
    ) -> None:
        """The files the round in `namespace` read move into the job's sink; a file the same
        run published before is a duplicate (a run recovered from a checkpoint older than a
        publish reads that input again: at-least-once, counted)."""
        job_id = graph.job_id or ""
        if status.value != "FINISHED":
            self.sink_markers.discard(job_id)  # discard_sink_staging
            return
        sink = self.sinks.setdefault(job_id, {})
        if sink and not continuation and job_id not in self.sink_markers:
            self.violate("continuous/refused", f"{graph.name} publishes {namespace} over its own earlier output")
            raise ValueError("output path already exists and is not empty (mode 'error')")
        if more_rounds:
            self.sink_markers.add(job_id)
        run = run_of(namespace)
        splits = self.published.get(namespace, {}).get("source", {})
        files = [self.split_files.get((namespace, split)) for split in splits]
        for split, file in [
            *zip(splits, files, strict=True),
            *((-1, f) for f in self.restored_files.get(namespace, ())),
        ]:
            if file is None:
                self.violate(
                    "continuous/unknown-split",
                    f"{graph.name} publishes split {split} of {namespace}, read from no file",
                )
                continue
            if file in sink:
                if sink[file] == run:
                    self.violate("exactly-once", f"{graph.name} published {file} twice in one run ({namespace})")
                else:
                    self.note("a file published again by a run recovered from a checkpoint older than the publish")
            sink[file] = run


def run_of(namespace: str) -> str:
    """Which run of its job a data namespace belongs to: the first, or one recovered after
    a JobManager restart (`<job>/run-<hex>`, and its rounds inside it)."""
    parts = namespace.split("/")
    return parts[1] if len(parts) > 1 and parts[1].startswith("run-") else "first"


def _kill_endpoint(endpoint: RpcEndpoint) -> None:
    """kill -9: no on_stop, no goodbye; the mailbox and every timer of the endpoint stop."""
    endpoint.rpc.crash()  # type: ignore[attr-defined]
    for task in list(endpoint._background):
        task.cancel()
    if endpoint._drainer is not None:
        endpoint._drainer.cancel()
    # Callbacks still queued for the mailbox (run_in_mailbox from a timer) find nobody.
    endpoint._mailbox = asyncio.Queue()
