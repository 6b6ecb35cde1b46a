"""How a job's restarts are carried out, once its scheduling decided them (Flink's
DefaultScheduler restarting tasks after the FailoverStrategy chose them).

JobScheduling (scheduler/job_scheduling.py) decides *whether* and *what* restarts and
when (the restart strategy's delay); JobRestarts does it: a region's subtasks get new
attempts and are deployed again, producers whose output can no longer be fetched run
again (their completed splits with them), or every subtask starts over from the sources
(a full restart, a continuous job's next round). Composed by the JobMaster's constructor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from flink_runtime.executiongraph import ExecutionGraph, ExecutionVertex
from flink_runtime.jobmanager.execution_deployment import ExecutionDeployer
from flink_runtime.jobmanager.task_reports import PartitionRegistry, TaskReports
from flink_runtime.scheduler import job_scheduling as js
from flink_runtime.scheduler.source_splits import SourceSplits
from flink_runtime.scheduler.strategy import sources_to_restart

log = logging.getLogger(__name__)


class JobRestarts:
    def __init__(
        self,
        graph: Callable[[], ExecutionGraph | None],
        scheduling: js.JobScheduling,
        reports: TaskReports,
        splits: SourceSplits,
        partitions: PartitionRegistry,
        deployer: ExecutionDeployer,
        execute: Callable[[Iterable[js.Action]], None],
    ) -> None:
        """execute: the JobMaster's, for the actions a due region restart leads to."""
        self._graph = graph
        self._scheduling = scheduling
        self._reports = reports
        self._splits = splits
        self._partitions = partitions
        self._deployer = deployer
        self._execute = execute

    def region_restart_due(self, failed_attempt: str, region: frozenset[ExecutionVertex]) -> None:
        """The restart delay of a region failover passed (unless the attempt is gone)."""
        graph = self._graph()
        execution = graph.execution(failed_attempt) if graph is not None else None
        if execution is not None:
            self._execute(self._scheduling.region_restart_due(execution.vertex, failed_attempt, region))

    def restart_vertices(self, reset: tuple[ExecutionVertex, ...], rerun: tuple[ExecutionVertex, ...]) -> None:
        for producer in rerun:
            log.info("The output of %s cannot be fetched any more; running it again.", producer.task_name_with_subtask)
            self._reports.producer_rerun(producer)
            # Its completed splits went down with the partition: they are read again.
            self._splits.forget_completed(producer.job_vertex.id, producer.subtask_index)
        for vertex in reset:
            vertex.reset_for_new_execution()
        # The others are deployed once their producers report (ScheduleOrUpdateConsumers).
        self._deployer.schedule_all(self._scheduling.deployable_after_region_reset(reset))

    def run_from_sources(self) -> None:
        """A new attempt for every subtask (a full restart, a new round: rounds.py), the
        sources deployed first; their partitions are reported anew."""
        graph = self._graph()
        assert graph is not None
        for vertex in graph.all_execution_vertices():
            vertex.reset_for_new_execution()
        self._scheduling.reset_counts()
        self._partitions.clear()
        self._deployer.declare_usage(graph.all_execution_vertices())
        self._deployer.schedule_all(sources_to_restart(graph))
