"""The job's own code, run for the JobMaster in the planner process (planner/): the
vertices' preparation (input splits, plan checks), a continuous job's new scan of its
sources, and the terminal hooks that publish or discard what the sinks staged.

`JobPlanning` owns what the preparation returned (`prepared`, per vertex). Its calls
block: the JobMaster runs them in a worker thread, never in the mailbox.

A preparation names a registered TaskManager to the planner: it resolves the Spark
plans there while the planner process has no JVM of its own (planner/remote_plan.py).

A JobManager that starts TaskManagers itself (resourcemanager.driver process or docker)
is told, while a job is prepared, the slots the job will then ask for: their TaskManagers
start during the preparation, not after it. With none registered, the preparation of a
job with Spark plans waits for the first of them to register (at most
resourcemanager.taskmanager-registration.timeout, or half of jobmanager.planner.timeout)
and has its plans resolved there: on a cluster whose TaskManagers start on demand, the
job then waits for its TaskManagers' JVM starts alone, not first for the planner's own
(15-17 s on 2 cores) and then theirs.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from flink_runtime import configuration as cfg
from flink_runtime.invokable import BUILTIN_INVOKABLES
from flink_runtime.planner import tasks as planner_tasks
from flink_runtime.planner.remote_plan import TaskManagerTarget, choose_task_manager
from flink_runtime.scheduler.slot_sharing import job_slot_requests

if TYPE_CHECKING:
    from flink_runtime.configuration import Configuration
    from flink_runtime.executiongraph import JobStatus
    from flink_runtime.invokable import Prepared
    from flink_runtime.jobgraph.jobgraph import JobGraph
    from flink_runtime.planner import Planner
    from flink_runtime.resourcemanager import ActiveResourceManager
    from flink_runtime.resourcemanager.active import PlanningDemand

T = TypeVar("T")

log = logging.getLogger(__name__)

SPARK_INVOKABLES = ("spark", BUILTIN_INVOKABLES["spark"])
# Seconds between looks at the registry while a preparation waits for a TaskManager.
REGISTRATION_POLL = 0.05


class PlannerGateway(Protocol):
    planner: Planner
    planner_timeout: float  # seconds
    blob_dir: str  # where uploaded libraries live on the JobManager
    task_managers: Mapping[str, Any]  # the registered TaskManagers (RegisteredTaskManager)
    cluster_secret: str  # the RPC's: the planner asks a TaskManager with it
    active_resources: ActiveResourceManager | None  # starts TaskManagers on demand (None: standalone)


class JobPlanning:
    def __init__(
        self,
        job_graph: JobGraph,
        config: Configuration,
        gateway: PlannerGateway,
        job_alive: Callable[[], bool] = lambda: True,
    ) -> None:
        """Made in the JobManager's mailbox (the planning demand captures its loop).
        job_alive: False once the job ended (cancelled while prepared): a wait for a
        TaskManager stops then."""
        self._job_graph = job_graph
        self._job_alive = job_alive
        self._config = config
        self._gateway = gateway
        self.prepared: dict[str, Prepared] = {}
        self._planning_demand = self._demand_of(gateway.active_resources)
        spark_plans = any(vertex.invokable in SPARK_INVOKABLES for vertex in job_graph.vertices)
        # A warm planner has its JVM: its plans need no TaskManager.
        self._plans_wait_for_a_taskmanager = spark_plans and not config.get(cfg.PLANNER_WARM_UP)

    @staticmethod
    def _demand_of(active: ActiveResourceManager | None) -> PlanningDemand | None:
        if active is None:
            return None
        try:
            return active.planning_demand()
        except RuntimeError:  # made outside the JobManager's loop: the job declares nothing
            log.warning("a JobMaster made outside the JobManager's event loop declares no slots", exc_info=True)
            return None

    @property
    def is_continuous(self) -> bool:
        """A source watches its input (monitor_interval): the job runs in rounds."""
        return any(p.monitor_interval for p in self.prepared.values())

    def split_counts(self) -> dict[str, int]:
        """How many input splits each vertex was prepared with; not a continuous source's
        (its rounds bring more)."""
        return {vertex_id: len(p.splits) for vertex_id, p in self.prepared.items() if p.monitor_interval is None}

    def prepare_job(self, restored: Mapping[str, Any], data_namespace: str) -> dict[str, Prepared]:
        """Every vertex's preparation (restored: what a savepoint says of each vertex)."""
        with self._declared_slots() as task_manager:
            return self._in_planner(
                planner_tasks.prepare_job, restored, data_namespace, self._gateway.blob_dir, task_manager
            )

    def prepare_sources(self, processed: dict[str, list[str]], data_namespace: str) -> dict[str, Prepared]:
        """The sources again, without the files processed already."""
        return self._in_planner(planner_tasks.prepare_sources, processed, data_namespace, self._task_manager())

    def _in_planner(self, call: Callable[..., T], *args: Any) -> T:
        """`call(job graph JSON, config, *args)` in the planner, within jobmanager.planner.timeout."""
        return self._gateway.planner.run(
            call, self._job_graph.to_json(), self._config, *args, timeout=self._gateway.planner_timeout
        )

    def _task_manager(self) -> TaskManagerTarget | None:
        """The TaskManager the planner asks to resolve Spark plans (None: none registered).
        Read in a worker thread: list() copies the registry in one step under the GIL."""
        return choose_task_manager(
            list(self._gateway.task_managers.values()), self._gateway.cluster_secret, self._config.get(cfg.FRAMESIZE)
        )

    @contextlib.contextmanager
    def _declared_slots(self) -> Iterator[TaskManagerTarget | None]:
        """While the job is prepared, its slots declared to the active resource manager (if
        any; see the module's docstring); yields the TaskManager to resolve its plans."""
        demand, job_id = self._planning_demand, self._job_graph.job_id or ""
        try:
            starting = demand is not None and demand.declare(job_id, job_slot_requests(self._job_graph))
        except Exception as exc:  # noqa: BLE001 - the JobManager stopping: prepare as without
            log.warning("Job %s: its slots were not declared (%s)", job_id, exc)
            demand, starting = None, False
        try:
            target = self._task_manager()
            if target is None and starting and demand is not None and self._plans_wait_for_a_taskmanager:
                target = self._registered_within(self._registration_wait(), job_id, demand.closed)
            yield target
        finally:
            if demand is not None:
                try:
                    demand.withdraw(job_id)
                except Exception:  # noqa: BLE001 - as above
                    log.debug("the declared slots of job %s not withdrawn", job_id, exc_info=True)

    def _registration_wait(self) -> float:
        registration = self._config.get_seconds(cfg.ResourceManagerOptions.TASKMANAGER_REGISTRATION_TIMEOUT)
        return min(registration, self._gateway.planner_timeout / 2)

    def _registered_within(self, limit: float, job_id: str, closed: threading.Event) -> TaskManagerTarget | None:
        """A registered TaskManager once there is one, within `limit` seconds, while the
        resource manager runs and the job has not ended (None otherwise)."""
        log.info("Job %s: its plans wait up to %g s for the TaskManager started for them", job_id, limit)
        deadline = time.monotonic() + limit
        while (target := self._task_manager()) is None and time.monotonic() < deadline:
            if closed.wait(REGISTRATION_POLL) or not self._job_alive():
                return None
        return target

    def run_terminal_hooks(
        self, status: JobStatus, data_namespace: str, continuation: bool, more_rounds: bool = False
    ) -> None:
        """Each vertex publishes (FINISHED) or discards its staged output; `continuation`:
        the job published to its sinks before (an earlier round); `more_rounds`: the job
        runs in rounds (a continuous job)."""
        self._in_planner(
            planner_tasks.run_terminal_hooks, self.prepared, data_namespace, status, continuation, more_rounds
        )

    def forget_job(self, data_namespace: str) -> None:
        """The job's end is stored: its vertices forget what only a recovery needed."""
        self._in_planner(planner_tasks.forget_job, self.prepared, data_namespace)
