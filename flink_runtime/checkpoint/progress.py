"""A job's committed progress: what its checkpoints record and what a restore brings back.

The JobMaster knows, for certain, what is committed: completed input splits (their
chunks were renamed into place before they were reported), finished subtasks (their
partitions and sink chunks), the final state snapshots of stateful subtasks. The
tracker turns that into a JobProgress (checkpoint) and, for a job submitted with
`execution.savepoint.path`, applies a JobProgress to the new job: completed input
files are not read again, finished subtasks are not run again (their chunks are read
from the savepoint), committed sink chunks are published with the new job's output,
and keyed state is restored into the aggregations that own it.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flink_runtime import configuration as cfg
from flink_runtime.checkpoint import committed_chunks
from flink_runtime.checkpoint.metadata import JobProgress, VertexProgress, check_matches, read_metadata
from flink_runtime.checkpoint.served_partitions import ServedPartitions
from flink_runtime.io import filesystem

if TYPE_CHECKING:
    from flink_runtime.checkpoint.job import CheckpointedJob
    from flink_runtime.executiongraph import ExecutionVertex

log = logging.getLogger(__name__)

SAVEPOINT_PATH_KEY = cfg.SAVEPOINT_PATH.key
IGNORE_UNCLAIMED_KEY = cfg.SAVEPOINT_IGNORE_UNCLAIMED_STATE.key
# Whether a job chose its own checkpoint directory is read from its JobGraph config.
CHECKPOINTS_DIR_KEY = cfg.CheckpointingOptions.CHECKPOINTS_DIRECTORY.key
# Vertex config key with a subtask's keyed-state settings (see SparkTask).
STATE_CONFIG_KEY = "__state__"


class UnavailableChunks(RuntimeError):
    """A savepoint must hold chunks that no TaskManager can hand over now."""


class ProgressTracker:
    def __init__(self, job: CheckpointedJob, checkpoints_dir: str, checkpoints_dir_confined: bool = False) -> None:
        self.job = job
        self._checkpoints_dir = checkpoints_dir  # keyed-state snapshots go under it
        # The job chose it: tasks check it with security.allowed-directories before writing.
        self._checkpoints_dir_confined = checkpoints_dir_confined
        # (state.backend.type,) as configured, read at the first deployment.
        self._backend: tuple[str | None] | None = None
        self._state_root: str | None = None  # <checkpoints dir>/<job id>/state, made once (per deployment: a URL parse)
        # Where tasks keep their working state, made once (per deployment: gettempdir's lock and a join).
        self._local_dir: str | None = None
        self.restore: JobProgress | None = None
        self.restore_location: str | None = None
        # (vertex id, subtask) -> state handle reported by a FINISHED stateful subtask
        self.final_states: dict[tuple[str, int], dict[str, Any]] = {}
        # result id -> partition number -> committed chunk directories from the savepoint
        self.restored_chunks: dict[str, dict[int, list[str]]] = {}
        # The job had a stop-with-savepoint request before these vertices were deployed.
        self.snapshot_all_state = False
        # A continuous job's keyed state at the end of its last round.
        self.round_states: dict[tuple[str, int], dict[str, Any]] = {}

    # -- restoring (load in a worker thread, apply in the mailbox) ----------------------------

    def load_restore(self, vertex_ids: set[str]) -> dict[str, Any] | None:
        """Read and check the savepoint the job starts from, if any; returns what the
        checkpoint statistics say about it (Flink's `latest.restored`)."""
        location = self.job.config.get(cfg.SAVEPOINT_PATH)
        if not location:
            return None
        progress = read_metadata(str(location))
        allow = self.job.config.get(cfg.SAVEPOINT_IGNORE_UNCLAIMED_STATE)
        check_matches(progress, vertex_ids, str(location), allow)
        self.restore = progress
        self.restore_location = str(location)
        return {
            "id": progress.checkpoint_id,
            "restore_timestamp": int(progress.timestamp * 1000),
            "is_savepoint": progress.is_savepoint,
            "external_path": str(location),
        }

    def restored_vertex(self, vertex_id: str) -> VertexProgress | None:
        return self.restore.vertices.get(vertex_id) if self.restore is not None else None

    def apply_restore(self) -> list[ExecutionVertex]:
        """Collect the savepoint's chunks; returns the subtasks it recorded as finished
        (the job counts them done instead of running them again)."""
        graph = self.job.graph
        finished: list[ExecutionVertex] = []
        if self.restore is None or graph is None:
            return finished
        for vertex_id, saved in self.restore.vertices.items():
            ejv = graph.vertices.get(vertex_id)
            if ejv is None:
                continue
            for result_id, partitions in saved.partition_chunks.items():
                for partition, chunks in partitions.items():
                    self.restored_chunks.setdefault(result_id, {}).setdefault(int(partition), []).extend(chunks)
            if self.restore.terminal:
                continue  # the job ended: every vertex runs again, on the input not yet read
            finished.extend(
                ejv.task_vertices[subtask] for subtask in saved.finished_subtasks if subtask < ejv.parallelism
            )
        log.info("%s", self.describe_restore(len(finished)))
        return finished

    def restored_parallelism(self) -> dict[str, int]:
        """The parallelism the restored progress recorded as decided, by vertex id. After
        a terminal savepoint every vertex runs again and is decided again, but for one
        with keyed state: each subtask restores the state its own index wrote."""
        if self.restore is None:
            return {}
        terminal = self.restore.terminal
        return {
            vertex_id: saved.parallelism
            for vertex_id, saved in self.restore.vertices.items()
            if saved.parallelism and (saved.operator_state or not terminal)
        }

    def describe_restore(self, finished_subtasks: int) -> str:
        """One line on what a restored job reuses: "restored from checkpoint 7 of job X:
        12 of 20 input files already read ..." (the JobManager's log)."""
        restore = self.restore
        assert restore is not None and self.job.graph is not None
        kind = "savepoint" if restore.is_savepoint else "checkpoint"
        read = sum(len(v.completed_files) for v in restore.vertices.values())
        left = sum(
            len(files)
            for vertex_id, ejv in self.job.graph.vertices.items()
            if not ejv.inputs
            for files in self.job.prepared_split_files(vertex_id).values()
        )
        splits = sum(
            len(self.job.prepared_split_files(vertex_id))
            for vertex_id, ejv in self.job.graph.vertices.items()
            if not ejv.inputs
        )
        chunks = sum(len(c) for partitions in self.restored_chunks.values() for c in partitions.values())
        states = sum(len(v.operator_state) for v in restore.vertices.values())
        return (
            f"Job {self.job.name} ({self.job.job_id}) restored from {kind} {restore.checkpoint_id} of job "
            f"{restore.job_id} at {self.restore_location}: {read} of {read + left} input files already read "
            f"(not read again; {splits} splits left to read), {finished_subtasks} finished subtasks not run "
            f"again, {chunks} committed chunks and {states} keyed-state snapshots reused."
        )

    def restored_state(self, vertex_id: str, subtask: int) -> dict[str, Any] | None:
        if (vertex_id, subtask) in self.round_states:
            return self.round_states[(vertex_id, subtask)]
        saved = self.restored_vertex(vertex_id)
        return saved.operator_state.get(str(subtask)) if saved is not None else None

    def start_new_round(self) -> None:
        """A continuous job's round ended: its final states are where the next round starts."""
        self.round_states.update(self.final_states)
        self.final_states.clear()
        self.restored_chunks.clear()

    def chunks_for(self, result_id: str, partitions: range) -> list[str]:
        restored = self.restored_chunks.get(result_id, {})
        return [chunk for partition in partitions for chunk in restored.get(partition, [])]

    # -- keyed state settings for a task -------------------------------------------------------

    def state_config(self, vertex_id: str, subtask: int, attempt_id: str) -> dict[str, Any]:
        restored = self.restored_state(vertex_id, subtask)
        if self._backend is None:  # read once: the job's configuration is fixed for its life
            self._backend = (self.job.config.get(cfg.StateBackendOptions.STATE_BACKEND),)
        backend = self._backend[0]  # None: not asked for
        enabled = self.snapshot_all_state or backend is not None or restored is not None or self.job.is_continuous
        return {
            "enabled": enabled,
            "backend": backend or "hashmap",
            "snapshot_dir": f"{self._state_dir_root()}/{attempt_id}",
            "local_dir": self._local_state_dir(),
            "restored": restored,
            "confined": self._checkpoints_dir_confined,
        }

    def _local_state_dir(self) -> str:
        if self._local_dir is None:
            self._local_dir = os.path.join(tempfile.gettempdir(), "flink-runtime-state")
        return self._local_dir

    def _state_dir_root(self) -> str:
        # Ends in "state", never in a separator: one "/" joins an attempt id to it, as
        # filesystem.join would, locally and in a URL alike.
        if self._state_root is None:
            self._state_root = filesystem.join(self._checkpoints_dir, self.job.job_id, "state")
        return self._state_root

    # -- checkpointing ------------------------------------------------------------------------

    def view(
        self, checkpoint_id: int, is_savepoint: bool, terminal: bool, served: ServedPartitions | None = None
    ) -> Callable[[], JobProgress]:
        """Capture the committed progress now (mailbox); list its chunks later (worker
        thread). A savepoint passes `served`: chunks only a TaskManager holds are listed
        there (and copied later); a checkpoint leaves out the work whose chunks it cannot
        list (committed_chunks.py)."""
        job = self.job
        graph = job.graph
        assert graph is not None
        captured: dict[str, dict[str, Any]] = {}
        for vertex_id, ejv in graph.vertices.items():
            progress = job.split_progress.get(vertex_id)
            completed = dict(progress.completed) if progress is not None else {}
            splits = job.prepared_split_files(vertex_id)
            finished = [v.subtask_index for v in ejv.task_vertices if v.current_execution.state.value == "FINISHED"]
            decided = ejv.parallelism_decided and not ejv.job_vertex.parallelism_configured
            captured[vertex_id] = {
                "parallelism": ejv.parallelism if decided else 0,
                "completed": completed,
                "split_files": {split: list(splits.get(split, [])) for split in completed},
                "earlier_files": sorted(job.completed_files(vertex_id)),
                "finished": finished,
                "partitions": {
                    result.id: {
                        v.produced_partitions[index].partition_number: (
                            job.partition_location(v.produced_partitions[index].partition_id),
                            job.partition_address(v.produced_partitions[index].partition_id),
                        )
                        for v in ejv.task_vertices
                    }
                    for index, result in enumerate(ejv.produced_results)
                },
                "sink_root": job.sink_staging_root(vertex_id),
                "final_states": {
                    str(v.subtask_index): handle
                    for v in ejv.task_vertices
                    if (handle := self.final_states.get((vertex_id, v.subtask_index)))
                },
                "restored_states": {
                    str(v.subtask_index): handle
                    for v in ejv.task_vertices
                    if (handle := self.restored_state(vertex_id, v.subtask_index))
                },
            }
        restored = {
            result: {p: list(chunks) for p, chunks in partitions.items()}
            for result, partitions in self.restored_chunks.items()
        }
        kept_for_joins = job.inputs_needed_after_stop() if terminal else set()
        name = job.name

        def materialize() -> JobProgress:
            vertices = {}
            for vertex_id, data in captured.items():
                if terminal:
                    # The job ends here: the resumed one runs every vertex again on the input
                    # not read yet, and no chunk is needed but a join's input (below).
                    kept = committed_chunks.claims(data, set())
                    vertex = VertexProgress(
                        completed_splits=sorted(kept.completed),
                        completed_files=kept.files,
                        operator_state=kept.states,
                        # Keyed state is restored subtask by subtask: the same subtasks.
                        parallelism=data["parallelism"] if kept.states else 0,
                    )
                    if vertex_id in kept_for_joins:
                        # The resumed job skips what this vertex read, but its join needs all of
                        # it again: its output so far is kept and read beside the new output.
                        listing = committed_chunks.committed_chunks(data, restored, served)
                        if listing.unavailable:
                            raise UnavailableChunks(
                                f"the stop's savepoint of job {name} must keep the output of vertex {vertex_id} "
                                f"for its join, but {'; '.join(listing.reasons)}, which does not answer; "
                                "trigger the stop again"
                            )
                        vertex.partition_chunks = listing.chunks
                else:
                    listing = committed_chunks.committed_chunks(data, restored, served)
                    if listing.unavailable:
                        log.warning(
                            "Checkpoint %d of job %s leaves out the work of subtasks %s of vertex %s (done again "
                            "after a restore): %s",
                            checkpoint_id,
                            name,
                            sorted(listing.unavailable),
                            vertex_id,
                            "; ".join(listing.reasons),
                        )
                    kept = committed_chunks.claims(data, listing.unavailable)
                    vertex = VertexProgress(
                        completed_splits=sorted(kept.completed),
                        completed_files=kept.files,
                        operator_state=kept.states,
                        finished_subtasks=kept.finished,
                        partition_chunks=listing.chunks,
                        sink_chunks=committed_chunks.sink_chunks(data["sink_root"], kept.completed, kept.finished),
                        parallelism=data["parallelism"],
                    )
                if vertex.completed_files or vertex.operator_state or vertex.partition_chunks or vertex.sink_chunks:
                    vertices[vertex_id] = vertex
            return JobProgress(
                job_id=job.job_id,
                job_name=name,
                checkpoint_id=checkpoint_id,
                timestamp=time.time(),
                is_savepoint=is_savepoint,
                terminal=terminal,
                vertices=vertices,
            )

        return materialize
