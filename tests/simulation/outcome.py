"""How a schedule must end, checked once its jobs are terminal (or the liveness bound
passed): slots and tasks settled, cancels and stops answered as promised, and the state
dumped into the trace when a job never ended. The per-message invariants are in
invariants.py."""

from __future__ import annotations

import os

from flink_runtime.checkpoint.metadata import read_metadata
from tests.simulation.plan import Schedule
from tests.simulation.world import World, run_of


def check_stops(world: World, schedule: Schedule, job_ids: dict[str, str]) -> None:
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
        if spec.continuous:
            continue  # its rounds number their splits anew: check_continuous checks its files
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
            # wins (what a cancelled job may publish is check_cancelled's).
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


def check_continuous(world: World, schedule: Schedule, job_ids: dict[str, str]) -> None:
    """A continuous job ends by its stop (FINISHED) or a cancel. Stopped, its savepoint is
    where the next run of the pipeline resumes: every file it records as read must be
    published (else it is lost), and every file published must be recorded (else the
    next run reads it again), except one a run before a JobManager failover published
    after the checkpoint its successor recovered from: the successor reads it again
    (at-least-once, as a file sink without two-phase commit), counted."""
    for spec in schedule.jobs:
        if not spec.continuous:
            continue
        job_id = job_ids[spec.name]
        record = world.store.jobs.get(job_id)
        status = record.status if record is not None else "NOT STORED"
        sink = world.sinks.get(job_id, {})
        published = set(sink)
        if status == "CANCELED" and job_id in world.cancelled:
            world.note("continuous job cancelled")
            continue
        savepoints = [c for c in world.store.checkpoints(job_id) if c.is_savepoint]
        if status != "FINISHED" or not savepoints:
            world.violate(
                "continuous", f"{spec.name} ended {status} with {len(savepoints)} savepoints: only a stop ends it"
            )
            continue
        progress = read_metadata(savepoints[-1].location)
        source = progress.vertices.get("source")
        recorded = set(source.completed_files) if source is not None else set()
        world.note("continuous job stopped")
        stopped_run = run_of(world.stops[job_id][2]) if job_id in world.stops else None
        for file in sorted(published - recorded):
            if sink[file] != stopped_run:
                world.note("continuous: a file published before a JobManager failover is read again")
                published.discard(file)
        if recorded != published:
            world.violate(
                "continuous/savepoint",
                f"{spec.name}'s stop savepoint records {sorted(recorded)} as read, but the job published "
                f"{sorted(published)} (not published: {sorted(recorded - published)}; published, "
                f"not recorded: {sorted(published - recorded)})",
            )


def check_cancelled(world: World) -> None:
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


def all_terminal(world: World, job_ids: dict[str, str]) -> bool:
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


def check_settled(world: World) -> None:
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


def liveness_kind(world: World) -> str:
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


def dump(world: World) -> None:
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
