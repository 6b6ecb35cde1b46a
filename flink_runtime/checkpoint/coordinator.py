"""The CheckpointCoordinator: triggers checkpoints and savepoints of one job.

Protocol, as Flink's: the coordinator sends TriggerCheckpoint to every running task;
each answers AcknowledgeCheckpoint (with its operator state handle, if it has state)
or DeclineCheckpoint; a task that finishes meanwhile counts as acknowledged (its
output is committed). When all have answered, the coordinator takes the JobMaster's
committed progress (completed splits, finished subtasks, chunks, sink chunks, state
handles) and writes it in a worker thread: a checkpoint in place under
`state.checkpoints.dir/<job>/chk-<id>/_metadata`, a savepoint as a self-contained
copy `<dir>/savepoint-<short job id>-<id>/`. A checkpoint that is not acknowledged
within `execution.checkpointing.timeout` fails; only `state.checkpoints.num-retained`
completed checkpoints are kept. What happens to them when the job ends is
`execution.checkpointing.externalized-checkpoint-retention` (checkpoint/retention.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from flink_runtime.checkpoint.metadata import JobProgress, VertexProgress, copy_into, write_metadata
from flink_runtime.checkpoint.retention import retention_of
from flink_runtime.checkpoint.served_partitions import ServedPartitions
from flink_runtime.checkpoint.statistics import CheckpointStatsTracker, checkpoint_config
from flink_runtime.configuration import (
    CheckpointingOptions,
    Configuration,
    StateBackendOptions,
    WebOptions,
)
from flink_runtime.io import filesystem
from flink_runtime.rpc.messages import TriggerCheckpoint
from flink_runtime.security.paths import AllowedDirectories

if TYPE_CHECKING:
    from flink_runtime.checkpoint.job import CheckpointedJob

log = logging.getLogger(__name__)

# Checkpoint ids reserved in the job store at a time (one store write per ID_BLOCK / 2
# checkpoints); a JobManager that takes over skips what is left of its predecessor's block.
ID_BLOCK = 20


class CheckpointFailure(RuntimeError):
    pass


@dataclass
class PendingCheckpoint:
    checkpoint_id: int
    triggered_at: float
    is_savepoint: bool
    target_directory: str | None
    waiting: set[str]
    total_tasks: int
    terminal: bool = False
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    on_complete: Callable[[str | None, BaseException | None], None] | None = None
    timeout_handle: Any = None
    vertices: dict[str, str | None] = field(default_factory=dict)  # execution id -> its job vertex
    subtasks: dict[str, int] = field(default_factory=dict)  # execution id -> its subtask index


class CheckpointCoordinator:
    def __init__(
        self,
        job: CheckpointedJob,
        config: Configuration,
        first_checkpoint_id: int = 1,
        checkpoints_dir_confined: bool = False,
    ) -> None:
        """checkpoints_dir_confined: the job chose state.checkpoints.dir, so it is checked with
        security.allowed-directories when written (the cluster's own is the operator's choice)."""
        self.job = job
        interval = config.get(CheckpointingOptions.INTERVAL)
        self.interval = None if interval is None else interval / 1000
        self.timeout = config.get_seconds(CheckpointingOptions.TIMEOUT)
        self.num_retained = config.get(CheckpointingOptions.NUM_RETAINED)
        self.checkpoints_dir = config.get(CheckpointingOptions.CHECKPOINTS_DIRECTORY) or os.path.join(
            tempfile.gettempdir(), "flink-runtime-checkpoints"
        )
        self.savepoints_dir = config.get(CheckpointingOptions.SAVEPOINT_DIRECTORY)
        self.state_backend = config.get(StateBackendOptions.STATE_BACKEND)
        self.allowed = AllowedDirectories.of(config)
        self.checkpoints_dir_confined = checkpoints_dir_confined
        self.retention = retention_of(config)  # ConfigurationError for a value Flink does not know
        self._next_id = first_checkpoint_id
        # Flink's CheckpointIDCounter: with a job store, ids are taken only from blocks the
        # store reserved (count_ids_in), so the next JobManager never triggers an id this
        # one may have triggered. None: no store, every id is ours.
        self._id_limit: int | None = None
        self._reserve: Callable[[int, int], None] | None = None
        self._reserving = False
        self.pending: dict[int, PendingCheckpoint] = {}
        self.stats = CheckpointStatsTracker(config.get(WebOptions.CHECKPOINTS_HISTORY_SIZE))
        self._completed_locations: deque[str] = deque()
        # Savepoint folders being written (worker threads), so none removes another's.
        self._writing: set[str] = set()
        self._writing_lock = threading.Lock()

    @property
    def restored(self) -> dict[str, Any] | None:
        """Flink's `latest.restored`: the savepoint or checkpoint the job started from."""
        return self.stats.restored

    @restored.setter
    def restored(self, restored: dict[str, Any] | None) -> None:
        self.stats.restored = restored

    # -- triggering ------------------------------------------------------------------------

    def count_ids_in(self, reserve: Callable[[int, int], None]) -> None:
        """Take checkpoint ids only from blocks reserved in the job store from now on:
        `reserve(at_least, count)` asks the store for `count` ids from `at_least` (or after
        every id an earlier JobManager reserved), and answers with `ids_reserved`."""
        self._reserve = reserve
        self._id_limit = self._next_id
        self._reserve_more()

    def ids_reserved(self, first: int | None, count: int) -> None:
        """The store reserved [first, first + count) (first None: the write failed; the
        next trigger asks again)."""
        self._reserving = False
        if first is None or self._id_limit is None:
            return
        if first > self._id_limit:  # an earlier JobManager reserved beyond: continue after it
            self._next_id = max(self._next_id, first)
        self._id_limit = first + count

    def _reserve_more(self) -> None:
        if self._reserve is None or self._id_limit is None or self._reserving:
            return
        if self._id_limit - self._next_id > ID_BLOCK // 2:
            return
        self._reserving = True
        self._reserve(max(self._id_limit, self._next_id), ID_BLOCK)

    def check_id_available(self) -> None:
        """CheckpointFailure when no reserved checkpoint id is left (the job store is slow or unreachable)."""
        if self._id_limit is not None and self._next_id >= self._id_limit:
            self._reserve_more()
            raise CheckpointFailure(
                "no checkpoint id is reserved in the job store yet (it is slow or unreachable); retry shortly"
            )

    def start_periodic(self) -> None:
        if self.interval:
            self.job.gateway.schedule_once(self.interval, self._periodic)

    def _periodic(self) -> None:
        if self.job.status.is_terminal:
            return
        self.checkpoint_now()
        self.job.gateway.schedule_once(self.interval, self._periodic)

    def checkpoint_now(self) -> None:
        """With periodic checkpoints on, one now (unless one is under way): a continuous
        job's round just published, and a recovery from an older checkpoint would read
        that round's input again."""
        if not self.interval or not self.job.accepts_checkpoints():
            return
        if any(not p.is_savepoint for p in self.pending.values()):
            return
        try:
            self.trigger(is_savepoint=False)
        except CheckpointFailure as exc:  # no id reserved yet: the next interval tries again
            log.info("Checkpoint of job %s not triggered: %s", self.job.job_id, exc)

    def check_savepoint_target(self, target_directory: str | None) -> str:
        """The directory a savepoint would go to, checked now: a request that could not be
        written is refused before it changes anything (a stop would otherwise end sources
        for a savepoint that then fails)."""
        target = target_directory or self.savepoints_dir
        if not target:
            raise CheckpointFailure("no savepoint directory: pass a target directory or set state.savepoints.dir")
        self._check_allowed(target, "savepoint directory")
        _check_writable(target, "a savepoint")
        self.check_id_available()
        return target

    def _check_allowed(self, path: str, what: str) -> None:
        """CheckpointFailure when `path` (links resolved) is outside security.allowed-directories."""
        if problem := self.allowed.problem(path):
            raise CheckpointFailure(f"{what} {problem}")

    def check_checkpoint_storage(self) -> None:
        """Refuse a checkpoint on request before it is triggered if its storage
        (state.checkpoints.dir) cannot be written."""
        _check_writable(self.checkpoints_dir, f"a checkpoint ({CheckpointingOptions.CHECKPOINTS_DIRECTORY.key})")
        self.check_id_available()

    def trigger(
        self,
        is_savepoint: bool,
        target_directory: str | None = None,
        terminal: bool = False,
        on_complete: Callable[[str | None, BaseException | None], None] | None = None,
    ) -> int:
        """Start a checkpoint; `on_complete(location, error)` runs in the mailbox when it ends."""
        if is_savepoint and not (target_directory or self.savepoints_dir):
            raise CheckpointFailure("no savepoint directory: pass a target directory or set state.savepoints.dir")
        self.check_id_available()
        checkpoint_id = self._next_id
        self._next_id += 1
        self._reserve_more()
        running = self.job.running_task_addresses()
        located = {execution_id: self.job.vertex_and_subtask(execution_id) for execution_id in running}
        vertices = {execution_id: vertex for execution_id, (vertex, _) in located.items()}
        pending = PendingCheckpoint(
            checkpoint_id=checkpoint_id,
            triggered_at=time.time(),
            is_savepoint=is_savepoint,
            target_directory=target_directory or (self.savepoints_dir if is_savepoint else None),
            waiting=set(running),
            total_tasks=len(running),
            terminal=terminal,
            on_complete=on_complete,
            vertices=vertices,
            subtasks={execution_id: index for execution_id, (_, index) in located.items()},
        )
        self.pending[checkpoint_id] = pending
        # Every vertex with all its subtasks, as Flink's stats count them: a subtask not
        # running now (finished, or between a continuous job's rounds) is acknowledged at
        # once, as Flink reports finished tasks; its committed output is in the checkpoint.
        # The ExecutionGraph's: a parallelism decided from the data (adaptive_parallelism.py).
        graph = self.job.graph
        vertices_now = graph.vertices.values() if graph is not None else self.job.job_graph.vertices
        parallelism = {vertex.id: vertex.parallelism for vertex in vertices_now}
        self.stats.triggered(
            checkpoint_id,
            is_savepoint,
            terminal,
            pending.triggered_at,
            [v or "" for v in vertices.values()],
            parallelism,
            list(pending.subtasks.values()),
        )
        for execution_id, address in running.items():
            self.job.gateway.tell_task_manager(
                address,
                TriggerCheckpoint(
                    job_id=self.job.job_id,
                    execution_id=execution_id,
                    checkpoint_id=checkpoint_id,
                    timestamp=pending.triggered_at,
                    jobmanager_id=self.job.gateway.jobmanager_id,
                ),
            )
        pending.timeout_handle = self.job.gateway.schedule_once(self.timeout, self._expire, checkpoint_id)
        self._complete_if_acknowledged(pending)
        return checkpoint_id

    # -- answers -------------------------------------------------------------------------------

    def acknowledge(self, execution_id: str, checkpoint_id: int, state_handle: dict[str, Any] | None) -> None:
        pending = self.pending.get(checkpoint_id)
        if pending is None or execution_id not in pending.waiting:
            return
        pending.waiting.discard(execution_id)
        if state_handle is not None:
            pending.states[execution_id] = state_handle
        self.stats.acknowledged(checkpoint_id, pending.vertices.get(execution_id), pending.subtasks.get(execution_id))
        self._complete_if_acknowledged(pending)

    def decline(self, execution_id: str, checkpoint_id: int, reason: str) -> None:
        pending = self.pending.get(checkpoint_id)
        if pending is not None:
            self._fail(pending, CheckpointFailure(f"declined by {execution_id}: {reason}"))

    def execution_stopped(self, execution_id: str, finished: bool) -> None:
        """A task ended: it will not answer, and what it committed is in the progress view.

        A finished task counts as acknowledged (as Flink counts finished tasks in a
        checkpoint): its final state is part of the checkpoint."""
        for pending in list(self.pending.values()):
            if execution_id in pending.waiting:
                pending.waiting.discard(execution_id)
                if finished:
                    self.stats.acknowledged(
                        pending.checkpoint_id, pending.vertices.get(execution_id), pending.subtasks.get(execution_id)
                    )
                self._complete_if_acknowledged(pending)

    def _complete_if_acknowledged(self, pending: PendingCheckpoint) -> None:
        if pending.waiting or pending.checkpoint_id not in self.pending:
            return
        # A savepoint copies the chunks only TaskManagers hold (served_partitions.py).
        served = (
            ServedPartitions(self.job.gateway.blocking_ask(), self.job.data_namespace) if pending.is_savepoint else None
        )
        view = self.job.progress_view(pending.checkpoint_id, pending.is_savepoint, pending.terminal, served)
        self.job.gateway.run_async(
            asyncio.to_thread(self._write, pending, view, served),
            lambda result, error: self._on_written(pending, result, error),
        )

    def _expire(self, checkpoint_id: int) -> None:
        pending = self.pending.get(checkpoint_id)
        if pending is not None and pending.waiting:
            self._fail(
                pending,
                CheckpointFailure(
                    f"checkpoint {checkpoint_id} expired after {self.timeout:g} s ({CheckpointingOptions.TIMEOUT.key}) "
                    f"with {len(pending.waiting)} of {pending.total_tasks} tasks not acknowledged"
                ),
            )

    # -- completion (the writing runs in a worker thread) -------------------------------------

    def _write(
        self, pending: PendingCheckpoint, view: Callable[[], JobProgress], served: ServedPartitions | None
    ) -> tuple[str, int]:
        progress = view()
        for execution_id, handle in pending.states.items():
            vertex_id, subtask = self.job.vertex_and_subtask(execution_id)
            if vertex_id is not None:
                progress.vertices.setdefault(vertex_id, VertexProgress()).operator_state[str(subtask)] = handle
        if pending.is_savepoint:
            assert pending.target_directory is not None
            # Checked at the request too; a link made since must not redirect the write.
            self._check_allowed(pending.target_directory, "savepoint directory")
            return self._write_savepoint(pending.target_directory, progress, served)
        directory = filesystem.join(self.checkpoints_dir, self.job.job_id, f"chk-{pending.checkpoint_id}")
        if self.checkpoints_dir_confined:
            self._check_allowed(directory, f"checkpoint directory ({CheckpointingOptions.CHECKPOINTS_DIRECTORY.key})")
        write_metadata(directory, progress)
        return directory, len(msgspec.json.encode(progress))

    def _write_savepoint(
        self, target_directory: str, progress: JobProgress, served: ServedPartitions | None
    ) -> tuple[str, int]:
        """Write a savepoint aside (a hidden `.savepoint-...inprogress` folder) and rename it
        into place last: a savepoint folder is complete or absent, never half-written.

        In-progress folders of this job that no write of this coordinator owns were left
        by a JobManager that died while writing; they are removed here."""
        name = f"savepoint-{self.job.job_id[:6]}-{secrets.token_hex(6)}"
        staging = filesystem.join(target_directory, f".{name}.inprogress")
        fs = filesystem.filesystem_for(target_directory)
        with self._writing_lock:
            self._writing.add(staging)
        try:
            self.remove_stale_savepoints(target_directory)
            progress = copy_into(progress, staging, served)
            write_metadata(staging, progress)
            directory = filesystem.join(target_directory, name)
            fs.rename(staging, directory)
        except BaseException:
            fs.delete(staging)
            raise
        finally:
            with self._writing_lock:
                self._writing.discard(staging)
        return directory, len(msgspec.json.encode(progress))

    def remove_stale_savepoints(self, target_directory: str) -> None:
        """Delete this job's in-progress savepoint folders in `target_directory` that no
        write of this coordinator owns (a dead JobManager's half-written savepoints)."""
        fs = filesystem.filesystem_for(target_directory)
        with self._writing_lock:
            owned = {path.rstrip("/").rsplit("/", 1)[-1] for path in self._writing}
        for stale in fs.glob(filesystem.join(target_directory, f".savepoint-{self.job.job_id[:6]}-*.inprogress")):
            if stale.path.rstrip("/").rsplit("/", 1)[-1] not in owned:
                log.info("Removing the half-written savepoint %s", stale.path)
                fs.delete(stale.path)

    def _on_written(
        self, pending: PendingCheckpoint, result: tuple[str, int] | None, error: BaseException | None
    ) -> None:
        if pending.checkpoint_id not in self.pending:
            if result is not None:
                # Written after it was failed (the job ended meanwhile): nobody records or
                # retains it, so its folder goes (the job's end cleanup did not see it). A
                # savepoint too, as Flink's PendingCheckpoint.abort disposes its location:
                # its request answered failed, so a complete-looking folder would be taken
                # for a good savepoint.
                log.info(
                    "Discarding %s %d of job %s, written after it failed.",
                    "savepoint" if pending.is_savepoint else "checkpoint",
                    pending.checkpoint_id,
                    self.job.job_id,
                )
                self.job.gateway.run_async(asyncio.to_thread(filesystem.filesystem_for(result[0]).delete, result[0]))
            return
        if error is not None or result is None:
            self._fail(pending, error or CheckpointFailure("writing the checkpoint failed"))
            return
        location, size = result
        del self.pending[pending.checkpoint_id]
        if pending.timeout_handle is not None:
            pending.timeout_handle.cancel()
        self.stats.completed(pending.checkpoint_id, location, size)
        log.info(
            "Completed %s %d for job %s at %s.",
            "savepoint" if pending.is_savepoint else "checkpoint",
            pending.checkpoint_id,
            self.job.job_id,
            location,
        )
        subsumed = [] if pending.is_savepoint else self._retain(location)
        self.stats.discarded(subsumed)
        # Recorded (and the subsumed forgotten) first; the subsumed folders are deleted
        # only after that, so the store never points at a deleted checkpoint.
        self.job.checkpoint_completed(pending.checkpoint_id, location, pending.is_savepoint, size, subsumed)
        if pending.on_complete is not None:
            pending.on_complete(location, None)

    def _fail(self, pending: PendingCheckpoint, error: BaseException) -> None:
        self.pending.pop(pending.checkpoint_id, None)
        if pending.timeout_handle is not None:
            pending.timeout_handle.cancel()
        self.stats.failed(pending.checkpoint_id, str(error))
        log.warning("Checkpoint %d of job %s failed: %s", pending.checkpoint_id, self.job.job_id, error)
        if pending.on_complete is not None:
            pending.on_complete(None, error)

    def fail_all(self, reason: str) -> None:
        for pending in list(self.pending.values()):
            self._fail(pending, CheckpointFailure(reason))

    def _retain(self, location: str) -> list[str]:
        """Keep `location` among the retained checkpoints; returns the ones it subsumes."""
        self._completed_locations.append(location)
        subsumed = []
        while len(self._completed_locations) > self.num_retained:
            subsumed.append(self._completed_locations.popleft())
        return subsumed

    def resume_after(self, checkpoint_ids: list[int], retained_locations: list[str]) -> None:
        """A recovered job continues its checkpoint ids after every id an earlier run
        stored (chk-N folders and store rows are never reused) and subsumes the
        checkpoints that run retained (oldest first). A `chk-N` folder the store does not
        know (written, then the JobManager died before recording it) counts too, so it is
        never overwritten; it is subsumed first, as the oldest."""
        job_dir = filesystem.join(self.checkpoints_dir, self.job.job_id)
        try:
            folders = filesystem.filesystem_for(job_dir).glob(filesystem.join(job_dir, "chk-*"))
        except OSError:
            folders = []
        written = {}
        for folder in folders:
            number = folder.path.rstrip("/").rsplit("chk-", 1)[-1]
            if number.isdigit():
                written[int(number)] = folder.path
        unrecorded = [written[n] for n in sorted(written) if n not in set(checkpoint_ids)]
        known = [*checkpoint_ids, *written]
        if known:
            self._next_id = max(self._next_id, max(known) + 1)
        self._completed_locations.extend([*unrecorded, *retained_locations])
        if self.savepoints_dir:
            try:
                self.remove_stale_savepoints(self.savepoints_dir)
            except OSError:  # an unreachable savepoint folder must not stop a recovery
                log.warning("Could not clean %s of half-written savepoints", self.savepoints_dir, exc_info=True)

    @property
    def retained_checkpoints(self) -> list[str]:
        """Locations of the completed checkpoints retained now (state.checkpoints.num-retained),
        oldest first: what the job's end keeps or discards."""
        return list(self._completed_locations)

    def statistics(self) -> dict[str, Any]:
        """GET /jobs/:id/checkpoints (Flink's CheckpointingStatistics)."""
        return self.stats.snapshot()

    def configuration(self) -> dict[str, Any]:
        """GET /jobs/:id/checkpoints/config (Flink's CheckpointConfigInfo)."""
        return checkpoint_config(self.interval, self.timeout, self.state_backend, self.retention)


def _check_writable(target: str, what: str) -> None:
    probe = filesystem.join(target, f".probe-{secrets.token_hex(4)}")
    fs = filesystem.filesystem_for(target)
    try:
        fs.makedirs(target)
        fs.write_text(probe, "")
        fs.delete(probe)
    except OSError as exc:
        raise CheckpointFailure(f"cannot write {what} to {target}: {exc}") from None


def describe_failure(error: BaseException) -> dict[str, str]:
    return {
        "class": type(error).__name__,
        "stack-trace": f"{type(error).__name__}: {error}\n" + "".join(traceback.format_exception(error)),
    }
