"""The job's own code, run for the JobMaster in the planner process (planner/): the
vertices' preparation (input splits, plan checks), a continuous job's new scan of its
sources, and the terminal hooks that publish or discard what the sinks staged.

`JobPlanning` owns what the preparation returned (`prepared`, per vertex). Its calls
block: the JobMaster runs them in a worker thread, never in the mailbox.

A preparation names a registered TaskManager to the planner: it resolves the Spark
plans there while the planner process has no JVM of its own (planner/remote_plan.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime import configuration as cfg
from flink_runtime.planner import tasks as planner_tasks
from flink_runtime.planner.remote_plan import TaskManagerTarget, choose_task_manager

if TYPE_CHECKING:
    from flink_runtime.configuration import Configuration
    from flink_runtime.executiongraph import JobStatus
    from flink_runtime.invokable import Prepared
    from flink_runtime.jobgraph.jobgraph import JobGraph
    from flink_runtime.planner import Planner


class PlannerGateway(Protocol):
    planner: Planner
    planner_timeout: float  # seconds
    blob_dir: str  # where uploaded libraries live on the JobManager
    task_managers: Mapping[str, Any]  # the registered TaskManagers (RegisteredTaskManager)
    cluster_secret: str  # the RPC's: the planner asks a TaskManager with it


class JobPlanning:
    def __init__(self, job_graph: JobGraph, config: Configuration, gateway: PlannerGateway) -> None:
        self._job_graph = job_graph
        self._config = config
        self._gateway = gateway
        self.prepared: dict[str, Prepared] = {}

    @property
    def is_continuous(self) -> bool:
        """A source watches its input (monitor_interval): the job runs in rounds."""
        return any(p.monitor_interval for p in self.prepared.values())

    def prepare_job(self, restored: Mapping[str, Any], data_namespace: str) -> dict[str, Prepared]:
        """Every vertex's preparation (restored: what a savepoint says of each vertex)."""
        return self._gateway.planner.run(
            planner_tasks.prepare_job,
            self._job_graph.to_json(),
            self._config,
            restored,
            data_namespace,
            self._gateway.blob_dir,
            self._task_manager(),
            timeout=self._gateway.planner_timeout,
        )

    def prepare_sources(self, processed: dict[str, list[str]], data_namespace: str) -> dict[str, Prepared]:
        """The sources again, without the files processed already."""
        return self._gateway.planner.run(
            planner_tasks.prepare_sources,
            self._job_graph.to_json(),
            self._config,
            processed,
            data_namespace,
            self._task_manager(),
            timeout=self._gateway.planner_timeout,
        )

    def _task_manager(self) -> TaskManagerTarget | None:
        """The TaskManager the planner asks to resolve Spark plans (None: none registered).
        Read in a worker thread: list() copies the registry in one step under the GIL."""
        return choose_task_manager(
            list(self._gateway.task_managers.values()), self._gateway.cluster_secret, self._config.get(cfg.FRAMESIZE)
        )

    def run_terminal_hooks(
        self, status: JobStatus, data_namespace: str, continuation: bool, more_rounds: bool = False
    ) -> None:
        """Each vertex publishes (FINISHED) or discards its staged output; `continuation`:
        the job published to its sinks before (an earlier round); `more_rounds`: the job
        runs in rounds (a continuous job)."""
        self._gateway.planner.run(
            planner_tasks.run_terminal_hooks,
            self._job_graph.to_json(),
            self._config,
            self.prepared,
            data_namespace,
            status,
            continuation,
            more_rounds,
            timeout=self._gateway.planner_timeout,
        )

    def forget_job(self, data_namespace: str) -> None:
        """The job's end is stored: its vertices forget what only a recovery needed."""
        self._gateway.planner.run(
            planner_tasks.forget_job,
            self._job_graph.to_json(),
            self._config,
            self.prepared,
            data_namespace,
            timeout=self._gateway.planner_timeout,
        )
