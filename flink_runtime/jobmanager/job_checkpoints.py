"""A job's checkpointing side: its savepoint, stop and checkpoint requests, and the job as
its CheckpointCoordinator and ProgressTracker see it (checkpoint/job.py's
`CheckpointedJob`: which tasks must acknowledge, which files and partitions a snapshot
records, where sinks stage output).

`JobCheckpointing` owns the coordinator, the tracker, the request registries and the
pending stop request. It reads the rest of the job through `CheckpointingHost` (the
JobMaster implements it) and never changes the job's status itself: a stop is handed
back to the host (`stop_while_idle`), a savepoint with cancel to `cancel`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from flink_runtime.checkpoint.coordinator import CheckpointCoordinator, CheckpointFailure
from flink_runtime.checkpoint.progress import CHECKPOINTS_DIR_KEY, ProgressTracker
from flink_runtime.executiongraph import ExecutionState, JobStatus
from flink_runtime.io import filesystem
from flink_runtime.jobmanager.errors import JobAlreadyEnded
from flink_runtime.jobmanager.operation_requests import OperationRequests

if TYPE_CHECKING:
    from flink_runtime.checkpoint.job import CheckpointGateway
    from flink_runtime.checkpoint.served_partitions import ServedPartitions
    from flink_runtime.configuration import Configuration
    from flink_runtime.executiongraph import Execution, ExecutionGraph
    from flink_runtime.invokable import Prepared
    from flink_runtime.jobgraph.jobgraph import JobGraph
    from flink_runtime.jobmanager.task_reports import PartitionRegistry
    from flink_runtime.scheduler.source_splits import SplitProgress

log = logging.getLogger(__name__)

_E = ExecutionState


class CheckpointingHost(Protocol):
    """The job, as its checkpointing side reads it."""

    @property
    def status(self) -> JobStatus: ...
    @property
    def graph(self) -> ExecutionGraph | None: ...
    @property
    def is_continuous(self) -> bool: ...
    @property
    def data_namespace(self) -> str: ...
    @property
    def finalizing(self) -> bool: ...
    @property
    def split_progress(self) -> dict[str, SplitProgress]: ...
    @property
    def prepared(self) -> dict[str, Prepared]: ...

    def processed_files(self, vertex_id: str) -> set[str]: ...
    def task_manager_address(self, task_manager_id: str) -> str | None: ...
    def cancel(self) -> None: ...
    def stop_while_idle(self) -> bool:
        """Stop now if nothing runs (a continuous job between rounds); False otherwise."""
        ...


class JobCheckpointing:
    """Savepoints and checkpoints on request, and the job's CheckpointedJob view."""

    def __init__(
        self,
        host: CheckpointingHost,
        job_graph: JobGraph,
        config: Configuration,
        gateway: CheckpointGateway,
        partitions: PartitionRegistry,
        savepoint_changed: Callable[[str, dict[str, Any]], None],
        checkpoint_completed: Callable[[int, str, bool, int, list[str]], None],
    ) -> None:
        assert job_graph.job_id is not None
        self._host = host
        self.job_id: str = job_graph.job_id
        self.name = job_graph.name
        self.job_graph = job_graph
        self.config = config
        self.gateway = gateway
        self._partitions = partitions
        self._checkpoint_completed = checkpoint_completed
        # A checkpoint directory the job chose is checked with security.allowed-directories
        # where it is written; the cluster's own is the operator's choice.
        confined = CHECKPOINTS_DIR_KEY in job_graph.config
        self.coordinator = CheckpointCoordinator(self, config, checkpoints_dir_confined=confined)
        self.tracker = ProgressTracker(self, self.coordinator.checkpoints_dir, checkpoints_dir_confined=confined)
        self.savepoint_requests = OperationRequests("savepoint", savepoint_changed)
        # Kept in memory only (as Flink's dispatcher keeps them): lost with the JobManager.
        self.checkpoint_requests = OperationRequests("checkpoint")
        # (request id, target directory) of a stop-with-savepoint not yet written.
        self.stop_request: tuple[str, str | None] | None = None

    # -- the job's state, read through the host ---------------------------------------------------

    @property
    def status(self) -> JobStatus:
        return self._host.status

    @property
    def graph(self) -> ExecutionGraph | None:
        return self._host.graph

    @property
    def is_continuous(self) -> bool:
        return self._host.is_continuous

    @property
    def data_namespace(self) -> str:
        return self._host.data_namespace

    @property
    def split_progress(self) -> dict[str, SplitProgress]:
        return self._host.split_progress

    @property
    def stopping(self) -> bool:
        return self.stop_request is not None

    def load_restore(self, vertex_ids: set[str]) -> dict[str, Any]:
        """Worker thread: read and check the savepoint or checkpoint the job starts from
        (Flink's `latest.restored`); what it says of each vertex, for their preparation."""
        self.coordinator.restored = self.tracker.load_restore(vertex_ids)
        return self.tracker.restore.vertices if self.tracker.restore is not None else {}

    def apply_restore(self, set_state: Callable[[Execution, ExecutionState], object]) -> None:
        """The subtasks the restored progress says finished are counted done (`set_state`),
        and their partitions available: their chunks are read from the checkpoint."""
        for vertex in self.tracker.apply_restore():
            set_state(vertex.current_execution, _E.FINISHED)
            for partition in vertex.produced_partitions:
                partition.mark_finished()

    # -- requests --------------------------------------------------------------------------------

    def trigger_savepoint(self, target_directory: str | None, cancel_job: bool, request_id: str | None = None) -> str:
        """Start a savepoint; returns its request id (`request_id`, the client's triggerId,
        or a new one). CheckpointFailure if it cannot start."""
        target_directory = self.coordinator.check_savepoint_target(target_directory)
        request_id = self.savepoint_requests.start(request_id)

        def done(location: str | None, failure: BaseException | None) -> None:
            self.savepoint_requests.complete(request_id, {"location": location}, failure)
            if failure is None and cancel_job:
                with contextlib.suppress(JobAlreadyEnded):  # ended meanwhile: nothing to cancel
                    self._host.cancel()

        self.coordinator.trigger(True, target_directory, on_complete=done)
        return request_id

    def trigger_checkpoint(self, request_id: str | None = None) -> str:
        """Start a checkpoint now (Flink's POST /jobs/:id/checkpoints); returns its request
        id, which completes with the checkpoint's id. Flink's FULL and INCREMENTAL both
        take the one kind of snapshot the state backends here write: a full one.
        CheckpointFailure if the checkpoint storage cannot be written."""
        self.coordinator.check_checkpoint_storage()
        request_id = self.checkpoint_requests.start(request_id)
        triggered: list[int] = []

        def done(location: str | None, failure: BaseException | None) -> None:
            self.checkpoint_requests.complete(request_id, {"checkpointId": triggered[0]}, failure)

        triggered.append(self.coordinator.trigger(False, on_complete=done))
        return request_id

    def stop_with_savepoint(self, target_directory: str | None, drain: bool, request_id: str | None = None) -> str:
        """Stop handing out splits; when in-flight work is done and the output published,
        write a savepoint and end FINISHED. `drain` changes nothing for batch pipelines:
        there are no windows or timers to flush."""
        target_directory = self.coordinator.check_savepoint_target(target_directory)
        request_id = self.savepoint_requests.start(request_id)
        self.stop_request = (request_id, target_directory)
        # Aggregations deployed from now on keep their keyed state, so the job resumed
        # from this savepoint continues their totals.
        self.tracker.snapshot_all_state = True
        self._host.stop_while_idle()
        return request_id

    def write_stop_savepoint(self, on_done: Callable[[bool], None]) -> None:
        """The stopped job's output is published: its savepoint now (terminal: every task
        ended). on_done(failed) once the request completed."""
        assert self.stop_request is not None
        request_id, target = self.stop_request
        self.stop_request = None

        def stopped(location: str | None, failure: BaseException | None) -> None:
            self.savepoint_requests.complete(request_id, {"location": location}, failure)
            if failure is not None:
                log.warning("Stop of job %s failed, the job keeps running: %s", self.job_id, failure)
            on_done(failure is not None)

        try:
            self.coordinator.trigger(True, target, terminal=True, on_complete=stopped)
        except CheckpointFailure as failure:
            stopped(None, failure)

    def job_ended(self, status: JobStatus) -> None:
        """The job is terminal: its pending checkpoints and savepoints fail, and so does a
        stop whose savepoint was not begun (the job was cancelled or failed meanwhile), as
        Flink completes the operation's future exceptionally: no request stays IN_PROGRESS."""
        if self.stop_request is not None:
            request_id, _target = self.stop_request
            self.stop_request = None
            failure = CheckpointFailure(
                f"Stop-with-savepoint of job {self.job_id} failed: the job reached {status.value} "
                "before its savepoint completed."
            )
            self.savepoint_requests.complete(request_id, None, failure)
        self.coordinator.fail_all(f"job {self.job_id} is {status.value}")

    # -- CheckpointedJob -------------------------------------------------------------------------

    def accepts_checkpoints(self) -> bool:
        # Not once a stop-with-savepoint began (or the job is publishing): sources that end
        # because of the stop have not read all their input, and a checkpoint now would
        # record them as finished; a job recovered from it would never read the rest. The
        # latest checkpoint from before the stop is where a recovery starts.
        return self.status is JobStatus.RUNNING and self.stop_request is None and not self._host.finalizing

    def running_task_addresses(self) -> dict[str, str]:
        """Running executions and their TaskManagers' addresses: who must acknowledge."""
        running: dict[str, str] = {}
        for vertex in self.graph.all_execution_vertices() if self.graph is not None else ():
            execution = vertex.current_execution
            if execution.state in (_E.INITIALIZING, _E.RUNNING):
                address = self._host.task_manager_address(execution.task_manager_id or "")
                if address is not None:
                    running[execution.attempt_id] = address
        return running

    def vertex_and_subtask(self, execution_id: str) -> tuple[str | None, int]:
        execution = self.graph.execution(execution_id) if self.graph is not None else None
        if execution is None:
            return None, -1
        return execution.vertex.job_vertex.id, execution.vertex.subtask_index

    def progress_view(
        self, checkpoint_id: int, is_savepoint: bool, terminal: bool, served: ServedPartitions | None
    ) -> Callable[[], Any]:
        return self.tracker.view(checkpoint_id, is_savepoint, terminal, served)

    def checkpoint_completed(
        self, checkpoint_id: int, location: str, is_savepoint: bool, size: int, subsumed: list[str]
    ) -> None:
        """Record it in the job store (recovery from the latest checkpoint), then delete the
        folders of the checkpoints it subsumes."""
        self._checkpoint_completed(checkpoint_id, location, is_savepoint, size, subsumed)

    def prepared_split_files(self, vertex_id: str) -> dict[int, list[str]]:
        prepared = self._host.prepared.get(vertex_id)
        if prepared is None:
            return {}
        return {
            split.split_number: list(split.payload.get("files", []))
            for split in prepared.splits
            if isinstance(split.payload, dict)
        }

    def completed_files(self, vertex_id: str) -> set[str]:
        """Files processed before the current round: restored from a savepoint, or by
        earlier rounds of a continuous job."""
        restored = self.tracker.restored_vertex(vertex_id)
        files = set(restored.completed_files) if restored is not None else set()
        return files | self._host.processed_files(vertex_id)

    def partition_location(self, partition_id: str) -> str | None:
        return self._partitions.location(partition_id)

    def partition_address(self, partition_id: str) -> str:
        return self._partitions.address(partition_id)

    def inputs_needed_after_stop(self) -> set[str]:
        return outputs_kept_after_stop(self.job_graph, self._host.prepared)

    def sink_staging_root(self, vertex_id: str) -> str | None:
        prepared = self._host.prepared.get(vertex_id)
        if prepared is None or prepared.output_staging_dir is None:
            return None
        # The current run's or round's folder: a new round stages anew (rounds.py).
        return filesystem.join(prepared.output_staging_dir, self.data_namespace)


def outputs_kept_after_stop(job_graph: JobGraph, prepared: dict[str, Prepared]) -> set[str]:
    """Producers whose whole output so far a stop's savepoint keeps: those feeding a vertex
    that reads its inputs again after a stop (a join), unless the producer emits again
    everything it ever read. Read from the vertices' preparation, never their operators."""
    producer_of = {dataset.id: dataset.producer for dataset in job_graph.intermediate_datasets}
    kept: set[str] = set()
    for edge in job_graph.edges:
        consumer, producer = prepared.get(edge.target), producer_of.get(edge.source)
        if consumer is None or producer not in prepared or not consumer.rereads_inputs_after_stop:
            continue
        if not prepared[producer].reemits_all_it_read:
            kept.add(producer)
    return kept
