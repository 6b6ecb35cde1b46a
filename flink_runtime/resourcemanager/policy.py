"""When to start and stop TaskManagers: the active resource manager's decisions, pure.

Flink's ActiveResourceManager asks its SlotManager (through a ResourceAllocationStrategy,
DefaultResourceAllocationStrategy by default) which workers the declared slot
requirements need, and a ResourceManagerDriver (Kubernetes, YARN) starts or releases
them. Here the decisions are one object fed stimuli with the time passed in, as
heartbeat/manager.py and registration/retrying.py are, and the shell
(resourcemanager/active.py) executes what it returns:

- `decide(now, view)`: what the cluster looks like now (requests waiting for a slot,
  free slots, which TaskManagers are registered and hold allocations, what each job
  needs) -> start N workers of size S, stop an idle or never-registered worker, or fail
  a job whose need no allowed cluster could ever meet (with the numbers);
- `worker_terminated(worker_id, now)`: a worker's process or container ended. One that
  was not asked to stop counts as a failed start; the requests its tasks leave behind
  (the job restarts them) make the next `decide` start its replacement.

Workers are sized by taskmanager.numberOfTaskSlots slots; their cores and heap follow the
biggest profile among the waiting requests (1 core per slot when no request says), as
Flink derives a worker's TaskExecutorProcessSpec from the default slot profile. Bounds
(resourcemanager.max-taskmanagers, slotmanager.number-of-slots.max,
slotmanager.max-total-resource.cpu / .memory) cap what is started; starts that keep
failing pause after resourcemanager.start-worker.max-failure-rate per minute for
resourcemanager.start-worker.retry-interval.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "Action",
    "Bounds",
    "ClusterView",
    "FailJob",
    "ResourceAllocationPolicy",
    "SlotProfile",
    "StartWorker",
    "StopWorker",
    "WorkerSpec",
]

# What a slot whose request names no cores counts (Flink's default: 1 core per slot).
DEFAULT_CPU_PER_SLOT = 1.0
FAILURE_RATE_WINDOW = 60.0  # max-failure-rate is per minute


@dataclass(frozen=True)
class SlotProfile:
    """What one slot request asks for; 0 means unknown (Flink's ResourceProfile.UNKNOWN)."""

    cpu_cores: float = 0.0
    task_heap_memory_mb: int = 0


UNKNOWN_PROFILE = SlotProfile()


@dataclass(frozen=True)
class WorkerSpec:
    """A TaskManager to start: its slots and the resources it gets (its whole size)."""

    slots: int
    cpu_cores: float
    task_heap_memory_mb: int = 0


@dataclass(frozen=True)
class Bounds:
    """Upper limits of what the resource manager starts; None: unbounded."""

    max_workers: int | None = None
    max_slots: int | None = None  # over the whole cluster, registered TaskManagers included
    max_cpu_cores: float | None = None
    max_memory_mb: int | None = None


@dataclass(frozen=True)
class ClusterView:
    """The cluster as the JobManager sees it at one moment."""

    pending: tuple[SlotProfile, ...] = ()  # requests waiting for a slot
    free_slots: int = 0  # free slots of registered TaskManagers
    registered: frozenset[str] = frozenset()  # registered TaskManagers (any origin)
    busy: frozenset[str] = frozenset()  # registered TaskManagers holding an allocated slot
    external_slots: int = 0  # slots of registered TaskManagers this policy did not start
    job_slots: Mapping[str, int] = field(default_factory=dict)  # per job: slots held + waited for
    # Per job being prepared, the slots it will ask for once prepared: started for as waiting
    # requests are, and idle workers are kept for them.
    declared: Mapping[str, tuple[SlotProfile, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class StartWorker:
    worker_id: str
    spec: WorkerSpec


@dataclass(frozen=True)
class StopWorker:
    worker_id: str
    reason: str
    registered: bool  # the shell unregisters it first (its slots leave the pool)


@dataclass(frozen=True)
class FailJob:
    """The job needs more slots at once than the bounds allow: fail its waiting requests."""

    job_id: str
    reason: str


Action = StartWorker | StopWorker | FailJob


@dataclass
class _Worker:
    spec: WorkerSpec
    started_at: float
    registered_at: float | None = None
    idle_since: float | None = None
    stopping: bool = False


class ResourceAllocationPolicy:
    def __init__(
        self,
        slots_per_worker: int,
        bounds: Bounds = Bounds(),
        idle_timeout: float = 30.0,
        registration_timeout: float = 300.0,
        max_failure_rate: float = 10.0,
        retry_interval: float = 3.0,
        id_prefix: str = "tm-active",
    ) -> None:
        if slots_per_worker < 1:
            raise ValueError(f"slots_per_worker must be at least 1, got {slots_per_worker}")
        self.slots_per_worker = slots_per_worker
        self.bounds = bounds
        self.idle_timeout = idle_timeout
        self.registration_timeout = registration_timeout
        self.max_failure_rate = max_failure_rate
        self.retry_interval = retry_interval
        self.id_prefix = id_prefix
        self._workers: dict[str, _Worker] = {}
        self._failures: deque[float] = deque()
        self._started = 0
        # Counts for the REST/metrics views and the tests.
        self.started_total = 0
        self.stopped_total = 0
        self.failed_total = 0

    # -- queries ----------------------------------------------------------------------------------

    @property
    def workers(self) -> dict[str, WorkerSpec]:
        """Workers started and not yet terminated, with their size."""
        return {worker_id: worker.spec for worker_id, worker in self._workers.items()}

    def is_worker(self, worker_id: str) -> bool:
        return worker_id in self._workers

    def is_stopping(self, worker_id: str) -> bool:
        worker = self._workers.get(worker_id)
        return worker is not None and worker.stopping

    @property
    def starting_slots(self) -> int:
        """Slots of the workers started and not yet registered (nor being stopped)."""
        return sum(w.spec.slots for w in self._workers.values() if w.registered_at is None and not w.stopping)

    # -- stimuli ----------------------------------------------------------------------------------

    def worker_terminated(self, worker_id: str, now: float) -> bool:
        """A worker's process or container ended; True if nobody asked it to (a failure)."""
        worker = self._workers.pop(worker_id, None)
        if worker is None:
            return False
        if worker.stopping:
            self.stopped_total += 1
            return False
        self.failed_total += 1
        self._failures.append(now)
        return True

    def decide(self, now: float, view: ClusterView) -> list[Action]:
        actions: list[Action] = []
        self._track_registrations(now, view)
        actions += self._registration_timeouts(now)
        failing = self._jobs_past_bounds(view)
        actions += failing
        declared = self._declared_within_bounds(view)
        if not failing:  # their requests go first; the next decision sees what is left
            actions += self._starts(now, view, declared)
        actions += self._idle_stops(now, len(declared))
        return actions

    # -- the decisions --------------------------------------------------------------------------

    def _track_registrations(self, now: float, view: ClusterView) -> None:
        for worker_id, worker in self._workers.items():
            if worker_id not in view.registered:
                continue
            if worker.registered_at is None:
                worker.registered_at = now
            if worker_id in view.busy:
                worker.idle_since = None
            elif worker.idle_since is None:
                worker.idle_since = now

    def _registration_timeouts(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for worker_id, worker in self._workers.items():
            if worker.stopping or worker.registered_at is not None:
                continue
            if now - worker.started_at >= self.registration_timeout:
                worker.stopping = True
                # Counted as a failed start although asked to stop: it never came up.
                self.failed_total += 1
                self._failures.append(now)
                actions.append(
                    StopWorker(
                        worker_id,
                        f"not registered within {self.registration_timeout:g} s "
                        "(resourcemanager.taskmanager-registration.timeout)",
                        registered=False,
                    )
                )
        return actions

    def _idle_stops(self, now: float, kept_for_declared: int) -> list[Action]:
        """Idle workers past the timeout stop, but for `kept_for_declared` slots' worth of
        them: the requests of a job being prepared will take those."""
        actions: list[Action] = []
        for worker_id, worker in self._workers.items():
            if worker.stopping or worker.idle_since is None or now - worker.idle_since < self.idle_timeout:
                continue
            if kept_for_declared > 0:
                kept_for_declared -= worker.spec.slots
            else:
                worker.stopping = True
                actions.append(
                    StopWorker(
                        worker_id,
                        f"idle for {now - worker.idle_since:.1f} s (resourcemanager.taskmanager-timeout is "
                        f"{self.idle_timeout:g} s)",
                        registered=True,
                    )
                )
        return actions

    def _starts(self, now: float, view: ClusterView, declared: tuple[SlotProfile, ...]) -> list[Action]:
        wanted = view.pending + declared
        unmet = len(wanted) - view.free_slots - self.starting_slots
        if unmet <= 0 or self._paused(now):
            return []
        spec = self._spec_for(wanted)
        actions: list[Action] = []
        for _ in range(math.ceil(unmet / spec.slots)):
            if not self._fits(spec, view.external_slots):
                break
            self._started += 1
            self.started_total += 1
            worker_id = f"{self.id_prefix}-{self._started}"
            self._workers[worker_id] = _Worker(spec, started_at=now)
            actions.append(StartWorker(worker_id, spec))
        return actions

    def _declared_within_bounds(self, view: ClusterView) -> tuple[SlotProfile, ...]:
        """The declared slots of the jobs the bounds can serve: a job that needs more fails
        once its requests come, with the numbers (_jobs_past_bounds), and starts nothing."""
        within: tuple[SlotProfile, ...] = ()
        for profiles in view.declared.values():
            if len(profiles) <= self.capacity(self._spec_for(profiles), view.external_slots)[0]:
                within += profiles
        return within

    def _paused(self, now: float) -> bool:
        """Too many failed starts in the last minute: wait retry_interval after the last one."""
        while self._failures and now - self._failures[0] > FAILURE_RATE_WINDOW:
            self._failures.popleft()
        if len(self._failures) < self.max_failure_rate:
            return False
        return now - self._failures[-1] < self.retry_interval

    def _spec_for(self, pending: tuple[SlotProfile, ...]) -> WorkerSpec:
        cpu = max((p.cpu_cores for p in pending), default=0.0) or DEFAULT_CPU_PER_SLOT
        heap = max((p.task_heap_memory_mb for p in pending), default=0)
        return WorkerSpec(self.slots_per_worker, cpu * self.slots_per_worker, heap * self.slots_per_worker)

    def _active(self) -> list[WorkerSpec]:
        return [w.spec for w in self._workers.values() if not w.stopping]

    def _fits(self, spec: WorkerSpec, external_slots: int) -> bool:
        """Whether one more worker of `spec` stays within every bound."""
        active = self._active()
        b = self.bounds
        if b.max_workers is not None and len(active) + 1 > b.max_workers:
            return False
        if b.max_slots is not None and external_slots + sum(s.slots for s in active) + spec.slots > b.max_slots:
            return False
        if b.max_cpu_cores is not None and sum(s.cpu_cores for s in active) + spec.cpu_cores > b.max_cpu_cores + 1e-9:
            return False
        used_memory = sum(s.task_heap_memory_mb for s in active)
        return b.max_memory_mb is None or used_memory + spec.task_heap_memory_mb <= b.max_memory_mb

    def capacity(self, spec: WorkerSpec, external_slots: int) -> tuple[float, list[str]]:
        """The most slots the cluster may ever have with workers of `spec`, and the bounds
        that set it, worded with their numbers (for the failure message)."""
        per = spec.slots
        b = self.bounds
        limits: list[tuple[float, str]] = []
        if b.max_workers is not None:
            limits.append(
                (
                    external_slots + b.max_workers * per,
                    f"resourcemanager.max-taskmanagers {b.max_workers} x taskmanager.numberOfTaskSlots {per}"
                    + (f" + {external_slots} slots of other TaskManagers" if external_slots else ""),
                )
            )
        if b.max_slots is not None:
            limits.append((b.max_slots, f"slotmanager.number-of-slots.max {b.max_slots}"))
        if b.max_cpu_cores is not None:
            workers = math.floor(b.max_cpu_cores / spec.cpu_cores + 1e-9) if spec.cpu_cores > 0 else math.inf
            limits.append(
                (
                    external_slots + workers * per,
                    f"slotmanager.max-total-resource.cpu {b.max_cpu_cores:g} / {spec.cpu_cores:g} cores per "
                    f"TaskManager = {workers} TaskManagers of {per} slots",
                )
            )
        if b.max_memory_mb is not None and spec.task_heap_memory_mb > 0:
            workers = math.floor(b.max_memory_mb / spec.task_heap_memory_mb)
            limits.append(
                (
                    external_slots + workers * per,
                    f"slotmanager.max-total-resource.memory {b.max_memory_mb} MB / {spec.task_heap_memory_mb} MB "
                    f"per TaskManager = {workers} TaskManagers of {per} slots",
                )
            )
        if not limits:
            return math.inf, []
        lowest = min(limit for limit, _ in limits)
        return lowest, [text for limit, text in limits if limit == lowest]

    def _jobs_past_bounds(self, view: ClusterView) -> list[Action]:
        if not view.pending:
            return []
        capacity, why = self.capacity(self._spec_for(view.pending), view.external_slots)
        actions: list[Action] = []
        for job_id, needed in sorted(view.job_slots.items()):
            if needed > capacity:
                actions.append(
                    FailJob(
                        job_id,
                        f"NoResourceAvailableException: job {job_id} needs {needed} slots at once, but the resource "
                        f"manager may provide at most {int(capacity)} ({'; '.join(why)}); raise the bound or lower "
                        "the job's parallelism",
                    )
                )
        return actions
