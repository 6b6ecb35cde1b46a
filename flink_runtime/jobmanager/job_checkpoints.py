"""A job's savepoint and checkpoint requests, and the job as its checkpoint coordinator sees it.

`trigger_savepoint`, `stop_with_savepoint` and `trigger_checkpoint` are what the REST API
and the CLI reach;
the rest implements checkpoint/job.py's `CheckpointedJob`, the narrow view the
CheckpointCoordinator and the ProgressTracker have of a job: which tasks must
acknowledge, which files and partitions a snapshot records, where sinks stage output.

`JobCheckpoints` is part of the JobMaster (a mixin: it shares the job's state and runs
in the JobManager's mailbox like the rest of it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flink_runtime.executiongraph import ExecutionState, JobStatus
from flink_runtime.invokable import builtin_invokable
from flink_runtime.io.partitions import partition_dir
from flink_runtime.operators.spark.chain import inputs_needed_after_stop

if TYPE_CHECKING:
    from flink_runtime.checkpoint.served_partitions import ServedPartitions
    from flink_runtime.jobmanager.jobmaster import JobMaster

log = logging.getLogger(__name__)

_E = ExecutionState


class JobCheckpoints:
    """Savepoints and checkpoints on request, and the job's CheckpointedJob side."""

    def trigger_savepoint(
        self: JobMaster, target_directory: str | None, cancel_job: bool, request_id: str | None = None
    ) -> str:
        """Start a savepoint; returns its request id (`request_id`, the client's triggerId,
        or a new one). CheckpointFailure if it cannot start."""
        target_directory = self.coordinator.check_savepoint_target(target_directory)
        request_id = self.savepoint_requests.start(request_id)

        def done(location: str | None, failure: BaseException | None) -> None:
            self.savepoint_requests.complete(request_id, {"location": location}, failure)
            if failure is None and cancel_job:
                self.cancel()

        self.coordinator.trigger(True, target_directory, on_complete=done)
        return request_id

    def trigger_checkpoint(self: JobMaster, request_id: str | None = None) -> str:
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

    def stop_with_savepoint(
        self: JobMaster, target_directory: str | None, drain: bool, request_id: str | None = None
    ) -> str:
        """Stop handing out splits; when in-flight work is done and the output published,
        write a savepoint and end FINISHED. `drain` changes nothing for batch pipelines:
        there are no windows or timers to flush."""
        target_directory = self.coordinator.check_savepoint_target(target_directory)
        request_id = self.savepoint_requests.start(request_id)
        self._stop_request = (request_id, target_directory)
        # Aggregations deployed from now on keep their keyed state, so the job resumed
        # from this savepoint continues their totals.
        self.tracker.snapshot_all_state = True
        if self._idle:  # a continuous job between rounds: nothing runs, stop right away
            self._idle = False
            self._finalizing = True
            self._on_finalized(None, None)
        return request_id

    def _stopped(self: JobMaster, request_id: str, location: str | None, failure: BaseException | None) -> None:
        self.savepoint_requests.complete(request_id, {"location": location}, failure)
        if failure is not None:
            # As in Flink, a stop whose savepoint failed leaves the job running. What the
            # stopped run read is published (as a stop does); the job goes on in rounds,
            # as a continuous job does: the next one reads the input this one did not.
            log.warning("Stop of job %s failed, the job keeps running: %s", self.job_id, failure)
            self._on_round_done(None, None)
            return
        self._finalizing = False
        self._transition(JobStatus.FINISHED)
        self._finish()

    def accepts_checkpoints(self: JobMaster) -> bool:
        # Not once a stop-with-savepoint began (or the job is publishing): sources that end
        # because of the stop have not read all their input, and a checkpoint now would
        # record them as finished; a job recovered from it would never read the rest. The
        # latest checkpoint from before the stop is where a recovery starts.
        return self.status is JobStatus.RUNNING and self._stop_request is None and not self._finalizing

    def running_task_addresses(self: JobMaster) -> dict[str, str]:
        """Running executions and their TaskManagers' addresses: who must acknowledge."""
        running: dict[str, str] = {}
        for vertex in self.graph.all_execution_vertices() if self.graph is not None else ():
            execution = vertex.current_execution
            if execution.state in (_E.INITIALIZING, _E.RUNNING):
                address = self.gateway.task_manager_address(execution.task_manager_id or "")
                if address is not None:
                    running[execution.attempt_id] = address
        return running

    def vertex_and_subtask(self: JobMaster, execution_id: str) -> tuple[str | None, int]:
        execution = self.graph.execution(execution_id) if self.graph is not None else None
        if execution is None:
            return None, -1
        return execution.vertex.job_vertex.id, execution.vertex.subtask_index

    def progress_view(
        self: JobMaster, checkpoint_id: int, is_savepoint: bool, terminal: bool, served: ServedPartitions | None
    ) -> Callable[[], Any]:
        return self.tracker.view(checkpoint_id, is_savepoint, terminal, served)

    def checkpoint_completed(
        self, checkpoint_id: int, location: str, is_savepoint: bool, size: int, subsumed: list[str]
    ) -> None:
        """Record it in the job store (recovery from the latest checkpoint), then delete the
        folders of the checkpoints it subsumes."""
        self.gateway.checkpoint_completed(self, checkpoint_id, location, is_savepoint, size, subsumed)

    def prepared_split_files(self: JobMaster, vertex_id: str) -> dict[int, list[str]]:
        prepared = self._prepared.get(vertex_id)
        if prepared is None:
            return {}
        return {
            split.split_number: list(split.payload.get("files", []))
            for split in prepared.splits
            if isinstance(split.payload, dict)
        }

    def completed_files(self: JobMaster, vertex_id: str) -> set[str]:
        """Files processed before the current round: restored from a savepoint, or by
        earlier rounds of a continuous job."""
        restored = self.tracker.restored_vertex(vertex_id)
        files = set(restored.completed_files) if restored is not None else set()
        return files | self._processed_files.get(vertex_id, set())

    def partition_location(self: JobMaster, partition_id: str) -> str | None:
        """Where a partition's chunks are; a running producer's is derived from the
        shared data directory (it reports its location only when it finishes)."""
        if partition_id in self._partition_locations:
            return self._partition_locations[partition_id]
        result_id, _, number = partition_id.rpartition("#")
        return partition_dir(self._data_dir, self.data_namespace, result_id, int(number))

    def partition_address(self: JobMaster, partition_id: str) -> str:
        """The TaskManager holding a partition: the one its producer reported it from, or
        the one running its producer now (its completed splits' chunks are there)."""
        if partition_id in self._partition_addresses:
            return self._partition_addresses[partition_id]
        partition = self.graph.partition(partition_id) if self.graph is not None else None
        execution = partition.producer.current_execution if partition is not None else None
        if execution is None or not execution.state.is_deployed or not execution.task_manager_id:
            return ""
        return self.gateway.task_manager_address(execution.task_manager_id) or ""

    def inputs_needed_after_stop(self: JobMaster) -> set[str]:
        return inputs_needed_after_stop(self.job_graph)

    def sink_staging_root(self: JobMaster, vertex_id: str) -> str | None:
        if self.graph is None:
            return None
        job_vertex = self.graph.vertices[vertex_id].job_vertex
        # Only built-in invokables stage output, and only they are imported here: a job's
        # own classes are never imported into the JobManager.
        invokable = builtin_invokable(job_vertex.invokable)
        return invokable.staged_output_root(job_vertex, self.data_namespace) if invokable is not None else None
