"""Seeded schedules: a cluster, jobs and a fault plan drawn from one seed, run and checked.

`run(seed)` draws the schedule (plan.py) from `random.Random(seed)`, runs it on a fresh virtual
loop and returns a Result: the violations found (empty when every invariant held), the
trace of steps (what was delivered, dropped, crashed, started, published), and what
became of each job. Everything random comes from the seed (the schedule, the network's
latencies and faults, the tasks' behaviour, every uuid4), so a seed replays exactly.
Here: the run itself and the clients' requests and faults it plays; how a run must end
is checked in outcome.py.
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
from tests.simulation.outcome import (
    all_terminal,
    check_cancelled,
    check_continuous,
    check_settled,
    check_stops,
    dump,
    liveness_kind,
)
from tests.simulation.plan import Event, JobSpec, Schedule, generate, job_graph
from tests.simulation.tasks import TaskFaults
from tests.simulation.world import DATA_ROOT, World, cluster_config

# Once faults stop, every job must be terminal within this many (virtual) seconds: heartbeat
# timeout, registration backoff, restart delays and task cancellation timeouts fit well inside.
LIVENESS_BOUND = 120.0
# After the last job ended: time for slots to come back and tasks to stop (past
# task.cancellation.timeout), then checked.
SETTLE = 5.0


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


def run(
    seed: int,
    record: bool = True,
    transport_faults: bool = False,
    verbose: bool = False,
    clients: bool = True,
    continuous: bool = True,
) -> Result:
    """transport_faults: let chaos schedules also drop, duplicate and reorder messages on a
    live connection, which TCP and ZeroMQ never do (the runtime relies on per-connection
    order); off by default, for exploring what the protocol would need to survive it.
    clients/continuous: see plan.generate (False replays a seed as it was when its bug
    was found)."""
    schedule = generate(seed, clients, continuous)
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
    overrides = {"slot.idle.timeout": f"{int(schedule.slot_idle_timeout * 1000)} ms"}
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
    world.specs = {job_ids[spec.name]: spec for spec in schedule.jobs}
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
        if all_terminal(world, job_ids):
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
            dump(world)
            lost = [name for name, j in job_ids.items() if j in acknowledged and j not in world.store.jobs]
            if lost:
                world.violate(
                    "acknowledged-job-lost",
                    f"the submission of {lost} was answered Success, yet no JobManager has or stores the job",
                )
                return
            world.violate(
                liveness_kind(world),
                f"{LIVENESS_BOUND:.0f} s after the faults stopped, jobs are not all terminal: {states}",
            )
            return
    world.trace("every job is terminal; settling")
    await asyncio.sleep(SETTLE)
    check_settled(world)
    check_restores(world, job_ids)
    check_cancelled(world)
    check_stops(world, schedule, job_ids)
    check_continuous(world, schedule, job_ids)


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
    """A client's savepoint or stop. A continuous job ends only by a stop: its client (a
    DAG's stop task, retried) stops it again until the job store says it ended."""
    for _ in range(60 if spec.continuous else 1):
        await _savepoint_once(world, spec, job_id, target)
        record = world.store.jobs.get(job_id)
        if not spec.continuous or (record is not None and record.is_terminal):
            return
        await asyncio.sleep(1.0)


async def _savepoint_once(world: World, spec: JobSpec, job_id: str, target: str) -> None:
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
