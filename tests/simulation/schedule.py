"""Seeded schedules: a cluster, jobs and a fault plan drawn from one seed, run and checked.

`run(seed)` builds the schedule from `random.Random(seed)`, runs it on a fresh virtual
loop and returns a Result: the violations found (empty when every invariant held), the
trace of steps (what was delivered, dropped, crashed, started, published), and what
became of each job. Everything random comes from the seed (the schedule, the network's
latencies and faults, the tasks' behaviour, every uuid4), so a seed replays exactly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flink_runtime.jobgraph.jobgraph import DistributionPattern, JobGraph, JobVertex, Partitioner
from flink_runtime.rpc.messages import (
    CancelJob,
    CancellationSuccess,
    JobSubmissionFailure,
    Message,
    SubmitJob,
    Success,
)
from flink_runtime.rpc.service import RpcException
from tests.simulation.clock import SimulationStuck, VirtualTimeLoop, deterministic
from tests.simulation.invariants import Invariants, check_restores
from tests.simulation.network import NetworkFaults, SimRpc
from tests.simulation.tasks import TaskFaults
from tests.simulation.world import DATA_ROOT, World, cluster_config

# Once faults stop, every job must be terminal within this many (virtual) seconds: heartbeat
# timeout, registration backoff, restart delays and task cancellation timeouts fit well inside.
LIVENESS_BOUND = 120.0
# After the last job ended: time for slots to come back and tasks to stop (past
# task.cancellation.timeout), then checked.
SETTLE = 5.0

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

    def describe(self) -> list[str]:
        lines = [
            f"seed {self.seed}: profile {self.profile}, TaskManagers with slots {self.task_managers}, "
            f"faults until t={self.faults_end:.3f}, checkpoints every {self.checkpoint_interval or '-'} s"
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
            lines.append(line)
        lines += [f"  t={e.at:.3f} {e}" for e in self.events]
        return lines


def generate(seed: int, clients: bool = True) -> Schedule:
    """clients=False: the schedule as it was before consumer vertices, cancels and
    savepoints were drawn (they are drawn last), for the seeds replayed as regression tests."""
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
    )


@dataclass
class Result:
    seed: int
    schedule: Schedule
    violations: list[str]
    trace: list[tuple[float, str]]
    job_states: dict[str, str] = field(default_factory=dict)
    delivered: int = 0
    notes: dict[str, int] = field(default_factory=dict)
    end_time: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations

    def format_trace(self) -> str:
        lines = self.schedule.describe()
        lines += [f"{at:10.4f}  {what}" for at, what in self.trace]
        return "\n".join(lines)


def job_graph(spec: JobSpec, job_id: str) -> JobGraph:
    vertex = JobVertex(
        id="source",
        name=f"{spec.name}-source",
        invokable="noop",
        parallelism=spec.parallelism,
        config={"splits": spec.splits},
    )
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


def run(
    seed: int, record: bool = True, transport_faults: bool = False, verbose: bool = False, clients: bool = True
) -> Result:
    """transport_faults: let chaos schedules also drop, duplicate and reorder messages on a
    live connection, which TCP and ZeroMQ never do (the runtime relies on per-connection
    order); off by default, for exploring what the protocol would need to survive it."""
    schedule = generate(seed, clients)
    if not transport_faults:
        schedule.network.drop = schedule.network.duplicate = 0.0
        schedule.network.fifo = True
    loop = VirtualTimeLoop()
    data_dir = os.path.join(DATA_ROOT, f"{seed}-{os.getpid()}")
    trace: list[tuple[float, str]] = []
    append: Callable[[str], None] = (lambda what: trace.append((loop.time(), what))) if record else (lambda what: None)
    logging.disable(logging.CRITICAL)  # the runtime's own logs: thousands of lines per schedule
    result = Result(seed, schedule, [], trace)
    try:
        with deterministic(loop, seed):
            try:
                loop.run_until_complete(_run(schedule, loop, append, result, verbose, data_dir))
            finally:
                _cancel_everything(loop)
    finally:
        loop.close()
        logging.disable(logging.NOTSET)
        shutil.rmtree(data_dir, ignore_errors=True)
    return result


def _cancel_everything(loop: asyncio.AbstractEventLoop) -> None:
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


async def _run(
    schedule: Schedule,
    loop: VirtualTimeLoop,
    trace: Callable[[str], None],
    result: Result,
    verbose: bool,
    data_dir: str,
) -> None:
    rng = random.Random(schedule.seed * 7919 + 1)
    overrides = {}
    if schedule.checkpoint_interval:
        overrides["execution.checkpointing.interval"] = f"{int(schedule.checkpoint_interval * 1000)} ms"
    world = World(
        loop,
        rng,
        trace,
        cluster_config(data_dir, overrides),
        dataclasses.replace(schedule.task_faults),
        high_availability=schedule.high_availability,
    )
    world.network.faults = dataclasses.replace(schedule.network)
    world.network.verbose = verbose
    Invariants(world)
    for _ in world.jobmanagers:
        await world.start_jobmanager()
    for slots in schedule.task_managers:
        await world.start_task_manager(world.add_task_manager(slots))
    client = SimRpc(world.network, "sim://client:1")
    await client.start(lambda message, reply: None)
    client.world = world  # type: ignore[attr-defined]  # where the leader is
    client.acknowledged = set()  # type: ignore[attr-defined]  # jobs whose submission was answered Success
    job_ids = {spec.name: f"{schedule.seed % 0xFFFFFFFF:08x}{number:024x}" for number, spec in enumerate(schedule.jobs)}
    background: set[asyncio.Task[Any]] = set()

    def spawn(coroutine: Any) -> None:
        task = loop.create_task(coroutine)
        background.add(task)
        task.add_done_callback(background.discard)

    savepoints = os.path.join(data_dir, "savepoints")
    for spec in schedule.jobs:
        loop.call_at(spec.submit_at, lambda s=spec: spawn(_submit(client, s, job_ids[s.name], trace)))
        if spec.cancel_at is not None:
            loop.call_at(spec.cancel_at, lambda s=spec: spawn(_cancel(client, world, s, job_ids[s.name])))
        if spec.savepoint is not None:
            loop.call_at(spec.savepoint_at, lambda s=spec: spawn(_savepoint(world, s, job_ids[s.name], savepoints)))
    faults = [loop.call_at(event.at, lambda e=event: spawn(_apply(world, e))) for event in schedule.events]
    calm = asyncio.Event()
    faults.append(loop.call_at(schedule.faults_end, lambda: spawn(_calm(world, calm))))
    try:
        await _until_done(world, schedule, job_ids, calm, faults, client.acknowledged)  # type: ignore[attr-defined]
    except SimulationStuck as exc:
        world.violate("stuck", str(exc))
    world.trace = lambda what: None  # what the teardown cancels is no step of the schedule
    result.violations = world.violations
    result.delivered = world.network.delivered
    result.notes = world.notes
    result.end_time = loop.time()
    for name, job_id in job_ids.items():
        record = world.store.jobs.get(job_id)
        result.job_states[name] = record.status if record is not None else "NOT STORED"


async def _until_done(
    world: World,
    schedule: Schedule,
    job_ids: dict[str, str],
    calm: asyncio.Event,
    faults: list[asyncio.TimerHandle],
    acknowledged: set[str],
) -> None:
    loop = world.loop
    deadline = schedule.faults_end + LIVENESS_BOUND
    while True:
        await asyncio.sleep(0.5)
        if world.violations:
            return
        if _all_terminal(world, job_ids):
            if not calm.is_set():
                # Every job ended before the faults did: what is left of them would only
                # exercise a cluster without jobs. Stop them now (and save the time).
                for handle in faults:
                    handle.cancel()
                await _calm(world, calm)
            break
        if loop.time() > deadline:
            states = {
                name: (world.store.jobs[j].status if j in world.store.jobs else "not stored")
                for name, j in job_ids.items()
            }
            _dump(world)
            lost = [name for name, j in job_ids.items() if j in acknowledged and j not in world.store.jobs]
            if lost:
                world.violate(
                    "acknowledged-job-lost",
                    f"the submission of {lost} was answered Success, yet no JobManager has or stores the job",
                )
                return
            world.violate(
                _liveness_kind(world),
                f"{LIVENESS_BOUND:.0f} s after the faults stopped, jobs are not all terminal: {states}",
            )
            return
    world.trace("every job is terminal; settling")
    await asyncio.sleep(SETTLE)
    _check_settled(world)
    check_restores(world, job_ids)
    _check_cancelled(world)
    _check_stops(world, schedule, job_ids)


def _check_stops(world: World, schedule: Schedule, job_ids: dict[str, str]) -> None:
    """A stop-with-savepoint that succeeded ended its job FINISHED with a savepoint in the
    store and published part of the input, each split once; one that failed left the job
    running, and it went on to publish the rest: each split once over all it published.
    A stop of a job cancelled meanwhile fails and the job ends CANCELED.
    A stop whose JobManager died before the client saw it complete: its request still
    answers (from the store), and the job recovered from it publishes every split (the
    partial publish is allowed only in the stopped run's namespace: invariants.py); no
    savepoint folder is left that the store does not list (a half-written one)."""
    jobmanager = world.jobmanager
    leader = jobmanager.jobmanager_id if jobmanager is not None else None
    stored = {c.location for job_id in job_ids.values() for c in world.store.checkpoints(job_id) if c.is_savepoint}
    folder = os.path.join(os.path.dirname(str(world.config.raw("state.checkpoints.dir"))), "savepoints")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        if os.path.join(folder, name) not in stored:
            world.violate(
                "savepoint-left-behind",
                f"savepoint folder {name} is left behind, and the job store lists no such savepoint",
            )
    for spec in schedule.jobs:
        job_id = job_ids[spec.name]
        if job_id not in world.stops:
            continue
        outcome, accepted_by, _namespace, request = world.stops[job_id]
        if outcome == "pending" or accepted_by != leader:
            world.note("stop-with-savepoint whose JobManager died")
            if jobmanager is None:
                continue
            try:
                answer = jobmanager.operations.savepoint_status(job_id, request)
            except Exception as exc:  # noqa: BLE001 - JobNotFound, RequestNotFound: what REST answers 404
                world.violate("stop", f"the stop of {spec.name} is forgotten after its JobManager died: {exc}")
                continue
            if answer["status"]["id"] != "COMPLETED":
                record = world.store.jobs.get(job_id)
                ended = record.status if record is not None else "NOT STORED"
                kind, why = (
                    ("stop", "after its JobManager died")
                    if accepted_by != leader
                    else ("stop/never-completed", f"after the job ended {ended}, its JobManager alive")
                )
                world.violate(kind, f"the stop of {spec.name} is still {answer} {why}")
            continue
        record = world.store.jobs.get(job_id)
        status = record.status if record is not None else "NOT STORED"
        published = [ns for ns in world.published if ns.startswith(job_id)]
        by_split: dict[int, str] = {}
        for namespace in published:
            for split in world.published[namespace].get("sink" if spec.consumers else "source", {}):
                if split in by_split:
                    world.violate(
                        "stop", f"split {split} of {spec.name} published by {by_split[split]} and {namespace}"
                    )
                by_split[split] = namespace
        if outcome == "failed" and status == "CANCELED" and job_id in world.cancelled:
            # Cancelled before the stop's savepoint was written: the stop fails, the cancel
            # wins (what a cancelled job may publish is _check_cancelled's).
            world.note("stop-with-savepoint failed: the job was cancelled meanwhile")
        elif outcome == "failed":
            world.note("stop-with-savepoint failed")
            if status != "FINISHED" or set(by_split) != set(range(spec.splits)):
                world.violate(
                    "stop",
                    f"the stop of {spec.name} failed, yet the job ended {status} having published "
                    f"{sorted(by_split)} of {spec.splits} splits",
                )
        else:
            world.note("stop-with-savepoint succeeded")
            savepoints = [c for c in world.store.checkpoints(job_id) if c.is_savepoint]
            if status != "FINISHED" or not savepoints:
                world.violate(
                    "stop",
                    f"the stop of {spec.name} succeeded ({outcome}), yet it ended {status} "
                    f"with {len(savepoints)} savepoints stored",
                )


def _check_cancelled(world: World) -> None:
    """A job whose CancelJob was answered CancellationSuccess by the JobManager that still
    leads ends CANCELED and publishes nothing after that answer."""
    leader = world.jobmanager.jobmanager_id if world.jobmanager is not None else None
    for job_id, (at, answered_by) in world.cancelled.items():
        if answered_by != leader:
            # As Flink's (202 Accepted): a cancel acknowledged is under way, not stored. The
            # JobManager that accepted it lost its leadership or died before the job ended
            # CANCELED; its successor recovered the job from the store and ran it on.
            world.note("cancel accepted, then lost with its JobManager")
            continue
        record = world.store.jobs.get(job_id)
        status = record.status if record is not None else "NOT STORED"
        if status != "CANCELED":
            world.violate(
                "cancel", f"job {job_id[:8]} was cancelled at t={at:.3f} (answered success), yet ended {status}"
            )
        late = [t for namespace, t in world.publish_times.items() if namespace.startswith(job_id) and t >= at]
        if late:
            world.violate("cancel", f"job {job_id[:8]} was cancelled at t={at:.3f}, yet published at t={late[0]:.3f}")


def _all_terminal(world: World, job_ids: dict[str, str]) -> bool:
    jobmanager = world.jobmanager
    if jobmanager is None:
        return False
    for job_id in job_ids.values():
        record = world.store.jobs.get(job_id)
        if record is None or not record.is_terminal:
            return False
        job = jobmanager.jobs.get(job_id)
        if job is not None and not job.status.is_globally_terminal:
            return False
    return True


def _check_settled(world: World) -> None:
    jobmanager = world.jobmanager
    assert jobmanager is not None
    pool = jobmanager.slot_pool
    if pool.allocated_slots or pool.pending_requests:
        world.violate(
            "settled",
            f"settled, yet the slot pool holds {pool.allocated_slots} allocated slots and "
            f"{pool.pending_requests} pending requests",
        )
    for slot in world.task_managers:
        if slot.executor is not None and slot.executor.tasks:
            names = sorted(world.name_of(t) for t in slot.executor.tasks.values())  # type: ignore[arg-type]
            world.violate("settled", f"settled, yet {slot.resource_id} still runs {names}")


def _liveness_kind(world: World) -> str:
    """liveness, or the known way to lose it: a running job whose subtask ended CANCELED
    although nobody cancelled the job (a TaskManager cancelled it on its own), which no
    failover restarts."""
    jobmanager = world.jobmanager
    if jobmanager is not None:
        for job in jobmanager.jobs.values():
            if job.graph is None or job.status.value != "RUNNING":
                continue
            if any(v.current_execution.state.value == "CANCELED" for v in job.graph.all_execution_vertices()):
                return "liveness/canceled-subtask"
    return "liveness"


def _dump(world: World) -> None:
    jobmanager = world.jobmanager
    if jobmanager is None:
        world.trace("state: no JobManager")
        return
    world.trace(
        f"state: registered TaskManagers {sorted(jobmanager.task_managers)}, pool free "
        f"{jobmanager.slot_pool.free_slots}/{jobmanager.slot_pool.total_slots}, pending "
        f"{jobmanager.slot_pool.pending_requests}"
    )
    for job in jobmanager.jobs.values():
        states = []
        if job.graph is not None:
            for vertex in job.graph.all_execution_vertices():
                e = vertex.current_execution
                states.append(f"{vertex.task_name_with_subtask}#{e.attempt_number}={e.state.value}@{e.task_manager_id}")
        world.trace(f"state: job {job.name} {job.status.value}: {states}")
    for slot in world.task_managers:
        executor = slot.executor
        if executor is None:
            world.trace(f"state: {slot.resource_id} down")
        else:
            world.trace(
                f"state: {slot.resource_id} registered with {str(executor.jobmanager_id)[:8]}, tasks "
                f"{[world.name_of(t) for t in executor.tasks.values()]}"  # type: ignore[arg-type]
            )


async def _submit(client: SimRpc, spec: JobSpec, job_id: str, trace: Callable[[str], None]) -> None:
    """A client that retries its submission (same job id) until the JobManager answers."""
    while True:
        trace(f"submit {spec.name} ({job_id[:8]})")
        leader = client.world.leader_address  # type: ignore[attr-defined]
        try:
            answer: Message = await client.ask(leader, SubmitJob(job_graph=job_graph(spec, job_id)), 30.0)
        except RpcException as exc:
            trace(f"submit {spec.name}: {exc}")
            await asyncio.sleep(1.0)
            continue
        trace(f"submit {spec.name}: {type(answer).__name__}")
        if isinstance(answer, JobSubmissionFailure) and "standby" in answer.reason:
            await asyncio.sleep(1.0)  # asked a JobManager that lost the lease: ask the leader
            continue
        if isinstance(answer, JobSubmissionFailure) and "could not be stored" in answer.reason:
            await asyncio.sleep(1.0)  # a deposed leader's store refused it (not started): ask again
            continue
        if isinstance(answer, JobSubmissionFailure) and answer.kind != "duplicate":
            trace(f"submit {spec.name} refused: {answer.reason}")
        if isinstance(answer, Success):
            client.acknowledged.add(job_id)  # type: ignore[attr-defined]
        return


async def _cancel(client: SimRpc, world: World, spec: JobSpec, job_id: str) -> None:
    """A client cancels the job (CancelJob, as the REST handler and the CLI send it); it
    asks again while no JobManager answers, and stops once one answers either way."""
    for _ in range(10):
        world.trace(f"cancel {spec.name} ({job_id[:8]})")
        address = world.leader_address
        asked = world.jobmanagers.get(address)
        try:
            answer: Message = await client.ask(address, CancelJob(job_id=job_id), 10.0)
        except RpcException as exc:
            world.trace(f"cancel {spec.name}: {exc}")
            await asyncio.sleep(1.0)
            continue
        world.trace(f"cancel {spec.name}: {answer}")
        if isinstance(answer, CancellationSuccess):
            world.cancelled[job_id] = (world.loop.time(), asked.jobmanager_id if asked is not None else "")
            return
        if "not found" not in getattr(answer, "reason", ""):
            return  # already ending: too late to cancel
        await asyncio.sleep(1.0)  # not submitted (or not recovered) yet: ask again


async def _savepoint(world: World, spec: JobSpec, job_id: str, target: str) -> None:
    """A client triggers a savepoint or stops the job with one, as the REST handlers do
    (JobManager.operations, in its mailbox), then polls the request's status; it asks
    again while the job is not running yet (or its JobManager is down), a few times."""
    kind = spec.savepoint
    for _ in range(10):
        jobmanager = world.jobmanager
        if jobmanager is None or job_id not in jobmanager.jobs:
            await asyncio.sleep(0.5)
            continue
        operations = jobmanager.operations
        try:
            if kind == "stop":
                request = await operations.stop_with_savepoint(job_id, target, False)
            else:
                request = await operations.trigger_savepoint(job_id, target, False)
        except Exception as exc:  # noqa: BLE001 - refused (not running, busy...): what REST answers 4xx
            why = str(exc)
            world.trace(f"{kind} savepoint of {spec.name} refused: {type(exc).__name__}: {why}")
            if "not found" in why or "INITIALIZING" in why or "CREATED" in why:
                await asyncio.sleep(0.5)  # not running yet: ask again
                continue
            return
        world.trace(f"{kind} savepoint of {spec.name}: request {request[:8]}")
        if kind == "stop":
            namespace = jobmanager.jobs[job_id].data_namespace
            world.stops[job_id] = ("pending", jobmanager.jobmanager_id, namespace, request)
        while True:
            await asyncio.sleep(0.2)
            if world.jobmanager is not jobmanager or jobmanager.rpc.closed:  # type: ignore[attr-defined]
                return  # its JobManager is gone: the outcome stays unknown
            try:
                status = operations.savepoint_status(job_id, request)
            except Exception:  # noqa: BLE001 - the job is gone from this JobManager
                return
            if status["status"]["id"] == "COMPLETED":
                location = status["operation"].get("location")
                world.trace(f"{kind} savepoint of {spec.name}: {'at ' + location if location else 'failed'}")
                if kind == "stop":
                    world.stops[job_id] = (location or "failed", *world.stops[job_id][1:])
                return


async def _apply(world: World, event: Event) -> None:
    if event.kind == "crash-tm":
        world.crash_task_manager(world.task_managers[event.target])
    elif event.kind == "restart-tm":
        slot = world.task_managers[event.target]
        if slot.executor is None:
            await world.start_task_manager(slot)
    elif event.kind == "crash-jm":
        world.crash_jobmanager()
    elif event.kind == "restart-jm":
        if None in world.jobmanagers.values():
            await world.start_jobmanager()
    elif event.kind == "depose":
        world.depose()
    elif event.kind in ("isolate", "heal"):
        address = _address_of(world, event.target)
        if address is None:
            return
        world.trace(f"{event.kind} {address}")
        if event.kind == "isolate":
            world.network.isolated.add(address)
        else:
            world.network.isolated.discard(address)


def _address_of(world: World, target: int) -> str | None:
    if target < 0:
        return world.leader_address
    executor = world.task_managers[target].executor
    return executor.address if executor is not None else None


async def _calm(world: World, calm: asyncio.Event) -> None:
    """Faults stop: the network heals and behaves, tasks stop failing, every process is up."""
    world.trace("faults stop")
    world.network.faults = NetworkFaults()
    world.network.isolated.clear()
    world.task_faults = TaskFaults()
    for task in list(world.live_tasks):
        task.unhang()
    while None in world.jobmanagers.values():
        await world.start_jobmanager()
    world.elect()
    for slot in world.task_managers:
        if slot.executor is None:
            await world.start_task_manager(slot)
    calm.set()
