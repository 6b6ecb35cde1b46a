"""A schedule drawn from one seed: the cluster, its jobs, the clients' requests and the
fault plan, all from `random.Random(seed)`, so a seed is the whole schedule (schedule.py
runs it, outcome.py checks how it ended)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from flink_runtime.jobgraph.jobgraph import DistributionPattern, JobGraph, JobVertex, Partitioner
from tests.simulation.network import NetworkFaults
from tests.simulation.tasks import TaskFaults

PROFILES = ("calm", "tasks", "taskmanagers", "jobmanager", "network", "chaos")


@dataclass
class Event:
    at: float
    kind: str  # crash-tm, restart-tm, crash-jm, restart-jm, isolate, heal
    target: int = 0  # TaskManager index (-1: the JobManager, for isolate/heal)

    def __str__(self) -> str:
        target = "jobmanager" if self.target < 0 else f"tm-{self.target}"
        return f"{self.kind} {target}" if self.kind in ("isolate", "heal") or "tm" in self.kind else self.kind


@dataclass
class JobSpec:
    name: str
    parallelism: int
    splits: int
    submit_at: float
    # A second vertex of this parallelism consuming the sources' BLOCKING result (0: none).
    consumers: int = 0
    all_to_all: bool = True  # else POINTWISE
    # When a client cancels the job (CancelJob), if it does.
    cancel_at: float | None = None
    # "trigger" (a savepoint) or "stop" (stop-with-savepoint), requested at savepoint_at.
    savepoint: str | None = None
    savepoint_at: float = 0.0
    # A continuous source (monitor_interval > 0): its input is `splits` files at submit,
    # and one more file at each of `arrivals`; it runs in rounds until a stop ends it.
    monitor_interval: float = 0.0
    arrivals: list[float] = field(default_factory=list)

    @property
    def continuous(self) -> bool:
        return self.monitor_interval > 0

    def files_at(self, now: float) -> list[str]:
        """The source's input files that exist at `now` (one split each)."""
        arrived = sum(1 for at in self.arrivals if at <= now)
        return [f"{self.name}-{number:03d}" for number in range(self.splits + arrived)]


@dataclass
class Schedule:
    seed: int
    profile: str
    task_managers: list[int]  # slots of each
    jobs: list[JobSpec]
    events: list[Event]
    network: NetworkFaults
    task_faults: TaskFaults
    faults_end: float
    checkpoint_interval: float | None = None  # periodic checkpoints (execution.checkpointing.interval)
    # Two JobManagers on one job store, one leading (the lease), with leader changes.
    high_availability: bool = False
    # How long a job keeps a slot its subtasks finished with (slot.idle.timeout): about as
    # long as a continuous job's gaps between files, so some of its rounds find their
    # slots kept and some given back; Flink's 50 s (nothing expires) in a third of them.
    # Derived from the seed, not drawn: every draw of a seed stays what it was.
    slot_idle_timeout: float = 50.0

    def describe(self) -> list[str]:
        lines = [
            f"seed {self.seed}: profile {self.profile}, TaskManagers with slots {self.task_managers}, "
            f"faults until t={self.faults_end:.3f}, checkpoints every {self.checkpoint_interval or '-'} s, "
            f"slot.idle.timeout {self.slot_idle_timeout:g} s"
            + (", two JobManagers (high availability)" if self.high_availability else ""),
            f"  network: {self.network}",
            f"  tasks: fail {self.task_faults.fail:.3f} hang {self.task_faults.hang:.3f} "
            f"stubborn {self.task_faults.stubborn:.3f}",
        ]
        for j in self.jobs:
            line = f"  job {j.name}: parallelism {j.parallelism}, {j.splits} splits, submitted at t={j.submit_at:.3f}"
            if j.consumers:
                pattern = "ALL_TO_ALL" if j.all_to_all else "POINTWISE"
                line += f", consumed by {j.consumers} subtasks ({pattern})"
            if j.cancel_at is not None:
                line += f", cancelled at t={j.cancel_at:.3f}"
            if j.savepoint is not None:
                line += f", {'stop-with-savepoint' if j.savepoint == 'stop' else 'savepoint'} at t={j.savepoint_at:.3f}"
            if j.continuous:
                arrivals = ", ".join(f"{at:.3f}" for at in j.arrivals)
                line += f", continuous (every {j.monitor_interval:.3f} s; files arrive at t={arrivals})"
            lines.append(line)
        lines += [f"  t={e.at:.3f} {e}" for e in self.events]
        return lines


def generate(seed: int, clients: bool = True, continuous: bool = True) -> Schedule:
    """clients=False: the schedule as it was before consumer vertices, cancels and
    savepoints were drawn (they are drawn last), for the seeds replayed as regression tests;
    continuous=False: before continuous sources were drawn (from an RNG of their own)."""
    rng = random.Random(seed)
    profile = PROFILES[rng.randrange(len(PROFILES))]
    task_managers = [rng.randint(1, 2) for _ in range(rng.randint(1, 3))]
    jobs = []
    for number in range(rng.randint(1, 2)):
        parallelism = rng.randint(2, 4)
        jobs.append(JobSpec(f"job{number}", parallelism, rng.randint(1, 2 * parallelism), rng.uniform(0.0, 2.0)))
    faults_end = rng.uniform(2.0, 12.0)
    network = NetworkFaults()
    task_faults = TaskFaults()
    events: list[Event] = []
    chaos = profile == "chaos"
    if profile in ("tasks", "chaos"):
        task_faults = TaskFaults(fail=rng.uniform(0, 0.3), hang=rng.uniform(0, 0.1), stubborn=rng.uniform(0, 0.5))
    if profile in ("taskmanagers", "chaos"):
        for _ in range(rng.randint(1, 3)):
            target = rng.randrange(len(task_managers))
            at = rng.uniform(0.0, faults_end)
            events.append(Event(at, "crash-tm", target))
            events.append(Event(min(at + rng.uniform(0.1, 10.0), faults_end), "restart-tm", target))
    if profile in ("jobmanager", "chaos"):
        for _ in range(rng.randint(1, 2)):
            at = rng.uniform(0.0, faults_end)
            events.append(Event(at, "crash-jm"))
            events.append(Event(min(at + rng.uniform(0.05, 5.0), faults_end), "restart-jm"))
    if profile in ("network", "chaos"):
        network = NetworkFaults(slow=rng.uniform(0, 0.05), slow_latency=rng.uniform(0.1, 4.0))
        for _ in range(rng.randint(1, 3)):
            target = rng.randrange(-1, len(task_managers))
            at = rng.uniform(0.0, faults_end)
            events.append(Event(at, "isolate", target))
            events.append(Event(min(at + rng.uniform(0.1, 12.0), faults_end), "heal", target))
    if chaos and rng.random() < 0.3:
        # Beyond what TCP does: messages lost on a live connection, delivered twice, reordered.
        network.drop = rng.uniform(0, 0.02)
        network.duplicate = rng.uniform(0, 0.02)
        network.fifo = rng.random() < 0.5
    events.sort(key=lambda e: e.at)
    # Drawn last, so that adding it left every earlier draw (and so each seed's faults) as it was.
    checkpoint_interval = rng.choice([None, None, 0.3, 1.0])
    high_availability = profile in ("jobmanager", "chaos") and rng.random() < 0.5
    if high_availability:
        for _ in range(rng.randint(1, 2)):
            events.append(Event(rng.uniform(0.0, faults_end), "depose"))
        events.sort(key=lambda e: e.at)
    # Drawn after everything above (so each seed's faults stay what they were): consumer
    # vertices, and clients that cancel a job.
    for spec in jobs if clients else ():
        if rng.random() < 0.4:
            spec.consumers = rng.randint(1, 2)
            spec.all_to_all = rng.random() < 0.6
        if rng.random() < 0.08:
            spec.cancel_at = spec.submit_at + rng.uniform(0.0, 6.0)
        # Not of a job with a consumer: its savepoint copies the finished partitions from
        # the TaskManagers serving them (served_partitions.py) with a blocking ask from a
        # worker thread, which the simulator's inline executor cannot serve (a deadlock).
        if checkpoint_interval and not spec.consumers and rng.random() < 0.3:
            spec.savepoint = rng.choice(["trigger", "stop"])
            spec.savepoint_at = spec.submit_at + rng.uniform(0.05, 1.5)
    if clients and continuous:
        _draw_continuous_sources(random.Random(seed * 7907 + 3), jobs)
    return Schedule(
        seed,
        profile,
        task_managers,
        jobs,
        events,
        network,
        task_faults,
        faults_end,
        checkpoint_interval,
        high_availability,
        slot_idle_timeout=(0.5, 2.0, 50.0)[seed % 3],
    )


def _draw_continuous_sources(rng: random.Random, jobs: list[JobSpec]) -> None:
    """Some jobs watch their input: files arrive while they run, and a client stops them
    with a savepoint (what a DAG does to end a run of a continuous job). From an RNG of
    its own, so that every other draw of a seed is what it was before. Not a job with a
    consumer: its stop's savepoint copies finished partitions with a blocking ask from a
    worker thread, which the simulator's inline executor cannot serve."""
    for spec in jobs:
        if spec.consumers or rng.random() >= 0.15:
            continue
        spec.monitor_interval = rng.uniform(0.1, 1.0)
        spec.arrivals = sorted(spec.submit_at + rng.uniform(0.2, 8.0) for _ in range(rng.randint(1, 4)))
        spec.savepoint = "stop"  # nothing else ends it
        spec.savepoint_at = spec.submit_at + rng.uniform(0.5, 10.0)


def job_graph(spec: JobSpec, job_id: str) -> JobGraph:
    vertex = JobVertex(
        id="source",
        name=f"{spec.name}-source",
        invokable="noop",
        parallelism=spec.parallelism,
        config={"splits": spec.splits},
    )
    if spec.continuous:
        vertex.config["continuous"] = {"monitor_interval": spec.monitor_interval}
    graph = JobGraph(name=spec.name, vertices=[vertex], job_id=job_id)
    if spec.consumers:
        sink = graph.add_vertex(
            JobVertex(id="sink", name=f"{spec.name}-sink", invokable="noop", parallelism=spec.consumers)
        )
        if spec.all_to_all:
            graph.connect(vertex, sink, DistributionPattern.ALL_TO_ALL, Partitioner.HASH)
        else:
            graph.connect(vertex, sink, DistributionPattern.POINTWISE, Partitioner.REBALANCE)
    return graph
