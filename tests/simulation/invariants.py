"""The invariants, checked after every delivered message and at the end of a run.

- exactly once: a finished job's published output holds every split of every source
  exactly once (World.publish sees each chunk of its data namespace);
- one attempt per subtask: no attempt the JobManager superseded commits a chunk;
- fencing: no message of an older JobManager epoch or a superseded attempt is
  accepted (answered ok / handed a split), and no TaskManager accepts a task from a
  JobManager it is not registered with;
- slots: the slot pool adds up (free + allocated = total = sum of the registered
  TaskManagers' slots), and no TaskManager runs more tasks of the leader than the
  leader has slots allocated on it (a slot freed while its task still runs); a job
  that ended holds no slot (its idle ones included); a continuous job's slots kept
  between rounds are counted: the next round deployed into them, or given back first
  (slot.idle.timeout, another job's request, a lost TaskManager);
- checkpoint ids strictly increase per job, across JobManager epochs;
- at the end: every job terminal within the bound after faults stop (liveness), and
  once settled no slot stays allocated and no task runs;
- restore/missing-checkpoint, at the end: no job FAILED because the checkpoint or
  savepoint the job store pointed it at could not be read (a JobManager deleted a
  folder the store still named; the simulation never submits from a savepoint).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.rpc.messages import (
    Acknowledge,
    AcknowledgeTaskExecutionStates,
    Message,
    NextInputSplit,
    RequestNextInputSplit,
    ScheduleOrUpdateConsumers,
    SubmitTask,
    SubmitTasks,
    TaskOperationResult,
    TaskOperationResults,
    TriggerCheckpoint,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
)

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmanager import JobManager
    from flink_runtime.jobmanager.jobmaster import JobMaster
    from tests.simulation.network import SimRpc
    from tests.simulation.tasks import SimTask
    from tests.simulation.world import World

_FROM_TASKS = (UpdateTaskExecutionState, UpdateTaskExecutionStates, RequestNextInputSplit, ScheduleOrUpdateConsumers)


class Invariants:
    def __init__(self, world: World) -> None:
        self.world = world
        self.checkpoint_ids: dict[str, dict[str, int]] = {}  # job -> JobManager epoch -> highest id triggered
        self.checkpoint_owners: dict[str, dict[int, str]] = {}  # job -> checkpoint id -> epoch that triggered it
        self.triggered: set[tuple[str, str, int]] = set()
        self.first_checkpoint_ids: dict[str, dict[str, int]] = {}  # job -> JobManager epoch -> first id triggered
        # JobManager epoch -> (fencing token, order first seen): the order epochs began leading
        self.epoch_ranks: dict[str, tuple[int, int]] = {}
        world.network.after_delivery = self.check_step
        world.network.observer = self
        world.on_publish = self._published
        world.on_chunk = self._chunk
        world.on_read = self._read
        # (JobManager epoch, job id) -> (round, allocations it kept idle when it began waiting)
        self.kept: dict[tuple[str, str], tuple[int, set[str]]] = {}

    def violate(self, kind: str, what: str) -> None:
        self.world.violate(kind, what)

    # -- per step ----------------------------------------------------------------------------------

    def check_step(self) -> None:
        jobmanager = self.world.jobmanager
        if jobmanager is None:
            return
        pool = jobmanager.slot_pool
        registered = jobmanager.task_managers
        if pool.free_slots + pool.allocated_slots != pool.total_slots or pool.free_slots < 0:
            self.violate(
                "slot-pool",
                f"slot pool does not add up: {pool.free_slots} free + {pool.allocated_slots} allocated "
                f"!= {pool.total_slots} total",
            )
        offered = sum(registration.slots for registration in registered.values())
        if offered != pool.total_slots:
            self.violate(
                "slot-pool", f"slot pool counts {pool.total_slots} slots, registered TaskManagers offer {offered}"
            )
        leader = jobmanager.jobmanager_id
        for slot in self.world.task_managers:
            executor = slot.executor
            if executor is None or not executor.tasks or executor.jobmanager_id != leader:
                continue
            registration = registered.get(executor.resource_id)
            if registration is None or registration.address != executor.address:
                continue
            # A slot runs one subtask of each vertex (slot sharing): count per vertex.
            per_vertex: dict[tuple[str, str], int] = {}
            for task in executor.tasks.values():
                if task.descriptor.jobmanager_id == leader:
                    key = (task.descriptor.job_id, task.descriptor.vertex_id)
                    per_vertex[key] = per_vertex.get(key, 0) + 1
            # Slots are not shared between jobs: the slots they need add up.
            by_job: dict[str, int] = {}
            for (job_id, _vertex), count in per_vertex.items():
                by_job[job_id] = max(by_job.get(job_id, 0), count)
            running = sum(by_job.values())
            if running > executor.slots:
                self.violate(
                    "oversubscribed",
                    f"{executor.resource_id} runs {running} tasks of the leader on {executor.slots} slots: "
                    f"{sorted(self.world.name_of(t) for t in executor.tasks.values())}",  # type: ignore[arg-type]
                )
            allocated = sum(1 for s in pool.slots_of(executor.resource_id) if s.allocation_id is not None)
            if running > allocated:
                # Not fatal by itself (a late SubmitTask: the leader gave up on it and freed its
                # slot; the zombie is cancelled once its first update is refused), counted.
                self.world.note("task running in a slot the leader freed")
        self._check_job_slots(jobmanager)

    def _check_job_slots(self, jobmanager: JobManager) -> None:
        for job in jobmanager.jobs.values():
            slots = job.deployer.slots
            if job.status.is_terminal:
                if slots.held_slots:
                    self.violate(
                        "idle-slots", f"{job.name} is {job.status.value} and still holds {slots.held_slots} slot(s)"
                    )
                continue
            if not job.is_continuous or job.graph is None:
                continue
            key = (jobmanager.jobmanager_id, job.job_id)
            watched = self.kept.get(key)
            if job.rounds.idle:
                idle = set(slots.idle_allocations())
                if watched is None:
                    self.kept[key] = (job.rounds.round, idle)
                elif watched[1] and not watched[1] & idle:
                    self.world.note("continuous: the slots kept between rounds were given back before the next")
                    self.kept[key] = (watched[0], set())
            elif watched is not None and job.rounds.round > watched[0]:
                del self.kept[key]
                used = {v.current_execution.assigned_resource for v in job.graph.all_execution_vertices()}
                if watched[1] & used:
                    self.world.note("continuous: a round deployed into the slots its job kept")

    # -- fencing: watched messages -------------------------------------------------------------------

    def watch(self, receiver: SimRpc, message: Message, reply: Callable[[Message], None] | None) -> Any:
        jobmanager = self.world.jobmanager_at(receiver) if isinstance(message, _FROM_TASKS) else None
        if reply is None:
            return None
        if jobmanager is not None and isinstance(message, UpdateTaskExecutionStates):
            # A batch: each entry is checked as if it came alone, against its own answer.
            entries = [self._fencing_check(jobmanager, update) for update in message.updates]

            def checked_batch(answer: Message) -> None:
                if isinstance(answer, AcknowledgeTaskExecutionStates):
                    if len(answer.answers) != len(entries):
                        self.violate("batch", f"{len(entries)} state updates answered with {len(answer.answers)}")
                    for check, entry_answer in zip(entries, answer.answers, strict=False):
                        check(entry_answer)
                reply(answer)

            return checked_batch
        if jobmanager is not None:
            check = self._fencing_check(jobmanager, message)

            def checked(answer: Message) -> None:
                check(answer)
                reply(answer)

            return checked
        if isinstance(message, SubmitTask | SubmitTasks):
            executor = next(
                (s.executor for s in self.world.task_managers if s.executor is not None and s.executor.rpc is receiver),
                None,
            )
            if executor is None:
                return reply
            # A batch: each entry is checked as if it came alone, against its own answer.
            submits = message.tasks if isinstance(message, SubmitTasks) else [message]

            def checked_submit(answer: Message) -> None:
                if isinstance(message, SubmitTasks) and isinstance(answer, TaskOperationResults):
                    if len(answer.results) != len(submits):
                        self.violate("batch", f"{len(submits)} tasks submitted, answered with {len(answer.results)}")
                    results = answer.results
                else:
                    results = [answer]
                for submit, result in zip(submits, results, strict=False):
                    token = submit.descriptor.jobmanager_id
                    if isinstance(result, TaskOperationResult) and result.success and token != executor.jobmanager_id:
                        self.violate("fencing", f"{executor.resource_id} accepted a task of JobManager {token}")
                reply(answer)

            return checked_submit
        return reply

    def _fencing_check(self, jobmanager: Any, message: Any) -> Callable[[Message], None]:
        """Judges the answer to a task's message: one of an older JobManager epoch or of a
        superseded attempt (as the JobManager stands when it arrives) must be refused."""
        stale_epoch = message.jobmanager_id != jobmanager.jobmanager_id
        job = jobmanager.jobs.get(message.job_id)
        superseded = job is None or job.graph is None or job.graph.execution(message.execution_id) is None

        def check(answer: Message) -> None:
            if (stale_epoch or superseded) and _accepted(message, answer):
                why = "an older JobManager epoch" if stale_epoch else "a superseded attempt"
                self.violate(
                    "fencing", f"{type(message).__name__} of {why} ({message.execution_id}) accepted: {answer}"
                )

        return check

    def sent(self, sender: SimRpc, message: Message) -> None:
        """Checked when sent (a JobManager's decision), not when delivered: deliveries to
        different TaskManagers take different times."""
        if isinstance(message, TriggerCheckpoint):
            self._rank_epoch(sender, message.jobmanager_id)
            self._checkpoint_triggered(message)

    def _rank_epoch(self, sender: SimRpc, epoch: str) -> None:
        """Epochs in the order they began leading: by fencing token with high availability
        (a deposed leader that has not noticed yet still holds its older lease), else (one
        JobManager at a time, each restart a new epoch) in the order first seen."""
        if epoch in self.epoch_ranks:
            return
        jobmanager = self.world.jobmanager_at(sender)
        lease = jobmanager.leadership.leader_lease if jobmanager is not None else None
        token = lease.token if lease is not None and self.world.high_availability else 0
        self.epoch_ranks[epoch] = (token, len(self.epoch_ranks))

    def _checkpoint_triggered(self, message: TriggerCheckpoint) -> None:
        """One checkpoint is triggered on every task (one id, many messages, maybe resent).
        Within a JobManager epoch ids strictly increase; an epoch's first checkpoint takes
        a higher id than every epoch that led before it triggered, and no id is ever
        triggered by two epochs. (A deposed leader that has not noticed yet may still
        trigger ids of its own, reserved, block after its successor began, even its first
        ones: lower, never the same. So "before" is the order of leadership, not of the
        first checkpoint seen: seed 5031.)"""
        key = (message.job_id, message.jobmanager_id, message.checkpoint_id)
        if key in self.triggered:
            return
        self.triggered.add(key)
        job, epoch, checkpoint_id = message.job_id, message.jobmanager_id, message.checkpoint_id
        rank = self.epoch_ranks.get(epoch, (0, len(self.epoch_ranks)))
        by_epoch = self.checkpoint_ids.setdefault(job, {})
        earlier = {e: highest for e, highest in by_epoch.items() if self.epoch_ranks.get(e, rank) < rank}
        owner = self.checkpoint_owners.setdefault(job, {}).setdefault(checkpoint_id, epoch)
        if owner != epoch:
            self.violate(
                "checkpoint-ids/reused",
                f"checkpoint {checkpoint_id} of job {job} triggered by JobManager {epoch[:8]} and by "
                f"JobManager {owner[:8]}: ids must never be reused",
            )
        if epoch in by_epoch:
            if checkpoint_id <= by_epoch[epoch]:
                self.violate(
                    "checkpoint-ids",
                    f"checkpoint {checkpoint_id} of job {job} triggered (JobManager {epoch[:8]}) after its "
                    f"checkpoint {by_epoch[epoch]}: ids must strictly increase",
                )
        elif earlier and checkpoint_id <= max(earlier.values()):
            self.violate(
                # Another JobManager epoch counted from where the store's completed ones end.
                "checkpoint-ids/reused",
                f"the first checkpoint {checkpoint_id} of job {job} JobManager {epoch[:8]} triggered is not "
                f"after checkpoint {max(earlier.values())} an earlier JobManager triggered",
            )
        first_ids = self.first_checkpoint_ids.setdefault(job, {})
        later = {e: first for e, first in first_ids.items() if self.epoch_ranks.get(e, rank) > rank}
        if later and checkpoint_id >= min(later.values()):
            self.violate(
                "checkpoint-ids/reused",
                f"checkpoint {checkpoint_id} of job {job} triggered by JobManager {epoch[:8]} is not below "
                f"checkpoint {min(later.values())} a later JobManager triggered first: a deposed leader's ids "
                "must come from its own reserved block",
            )
        first_ids.setdefault(epoch, checkpoint_id)
        by_epoch[epoch] = max(checkpoint_id, by_epoch.get(epoch, 0))

    # -- output --------------------------------------------------------------------------------------------

    def _current_job_of(self, task: SimTask) -> JobMaster | None:
        """The task's job at the leading JobManager, if the task was deployed by that
        JobManager into the job's current run; None for anything older."""
        jobmanager = self.world.jobmanager
        if jobmanager is None or task.descriptor.jobmanager_id != jobmanager.jobmanager_id:
            return None
        job = jobmanager.jobs.get(task.job_id)
        if job is None or job.graph is None or task.descriptor.data_namespace != job.data_namespace:
            return None
        return job

    def _chunk(self, task: SimTask, split: int) -> None:
        job = self._current_job_of(task)
        if job is None:
            return
        if job.graph.execution(task.execution_id) is None:
            self.violate(
                "two-attempts",
                f"{self.world.name_of(task)} ({task.execution_id}) commits split {split}, but the JobManager "
                f"superseded that attempt: two attempts of one subtask write its partition",
            )

    def _read(self, task: SimTask, vertex_id: str, subtask: int, producer: str) -> None:
        """A current consumer attempt reads only the partition of its producer's current,
        finished attempt (the one the JobMaster named in its descriptor)."""
        job = self._current_job_of(task)
        if job is None:
            return
        if job.graph.execution(task.execution_id) is None:
            return  # a superseded consumer: if it commits, _chunk reports it
        vertex = next(
            (
                v
                for v in job.graph.all_execution_vertices()
                if v.job_vertex.id == vertex_id and v.subtask_index == subtask
            ),
            None,
        )
        current = vertex.current_execution if vertex is not None else None
        # Its producer reported the partition (ScheduleOrUpdateConsumers) before FINISHED.
        if current is None or current.attempt_id != producer or current.state.value not in ("RUNNING", "FINISHED"):
            self.violate(
                "superseded-input",
                f"{self.world.name_of(task)} reads the partition of {vertex_id}[{subtask}] attempt {producer}, "
                f"but its current attempt is {current.attempt_id if current else None} "
                f"({current.state.value if current else '-'})",
            )

    def _published(self, graph: JobGraph, namespace: str) -> None:
        output = self.world.published[namespace]
        producers = {dataset.producer: dataset.id for dataset in graph.intermediate_datasets}
        consumed = {edge.target: edge.source for edge in graph.edges}
        upstream = {dataset_id: producer for producer, dataset_id in producers.items()}
        by_id = {vertex.id: vertex for vertex in graph.vertices}
        for vertex in graph.vertices:
            if vertex.id in producers:
                continue  # read by its consumers, not published
            source = vertex
            while source.id in consumed:  # a sink publishes every split its source read
                source = by_id[upstream[consumed[source.id]]]
            if "splits" not in source.config or "continuous" in source.config:
                continue  # a continuous source's files are checked in World.publish_files
            expected = set(range(source.config["splits"]))
            got = set(output.get(vertex.id, {}))
            stop = self.world.stops.get(graph.job_id)
            if stop is not None and (namespace == stop[2] or "/round-" in namespace):
                # Stopped: what it read so far (the rest, if the stop fails, in a later
                # round); checked whole once the stop's outcome is known (schedule.py).
                expected &= got
            if got != expected:
                self.violate(
                    "exactly-once",
                    f"{graph.name}/{vertex.id} published splits {sorted(got)}, expected each of "
                    f"{sorted(expected)} once (missing {sorted(expected - got)}, extra {sorted(got - expected)})",
                )
        for task in self.world.live_tasks:
            if task.namespace == namespace and task.job_id == graph.job_id and task.state.value != "FINISHED":
                # Harmless for what was published (a chunk written later is never read), counted.
                self.world.note("job published while a superseded attempt of it still ran")


def _accepted(message: Message, answer: Message) -> bool:
    if isinstance(message, RequestNextInputSplit):
        return isinstance(answer, NextInputSplit) and answer.split is not None
    return isinstance(answer, Acknowledge) and answer.ok


def check_restores(world: World, job_ids: dict[str, str]) -> None:
    """restore/missing-checkpoint: a job recovered from the store's latest checkpoint (or a
    savepoint it lists) must find it; a FAILED job whose root exception is the restore's
    SavepointRestoreError lost that checkpoint to a JobManager that deleted it while the
    store still pointed at it (seed 265: a deposed leader's job-end cleanup)."""
    for name, job_id in job_ids.items():
        record = world.store.jobs.get(job_id)
        if record is None or record.status != "FAILED" or not record.exceptions:
            continue
        root = str(record.exceptions.get("root-exception") or "")
        if root.startswith("SavepointRestoreError"):
            stored = [c.location for c in world.store.checkpoints(job_id)]
            world.violate(
                "restore/missing-checkpoint",
                f"{name} FAILED restoring what the job store points at ({stored}): {root.splitlines()[0]}",
            )
