"""What a job's checkpoints become when the job ends: Flink's externalized checkpoint
retention (`execution.checkpointing.externalized-checkpoint-retention`), and the file
work it takes.

Flink's rule (ExternalizedCheckpointRetention, CheckpointProperties):

    end of the job   NO_EXTERNALIZED_CHECKPOINTS  DELETE_ON_CANCELLATION  RETAIN_ON_CANCELLATION
    FINISHED         deleted                      deleted                 deleted
    CANCELED         deleted                      deleted                 kept
    FAILED           deleted                      kept                    kept

Savepoints are never deleted. A job that is not globally terminal (SUSPENDED, or a
JobManager that died) keeps everything: a later JobManager recovers it from there.

A checkpoint here points at the job's data where it lies (partition chunks in
io.tmp.dirs, staged sink chunks, keyed-state snapshots under `<checkpoints dir>/<job>/
state`), all of which the job's end removes. So a kept checkpoint is first made
self-contained, as a savepoint is: what it refers to is copied into its `chk-N` folder
and its `_metadata` rewritten with relative paths (atomically, last: until then the old
one, pointing at the still present originals, is valid). A job can then be submitted
from it with `execution.savepoint.path` (CLI `run -s .../chk-N`) as from a savepoint.

Everything here is file work and runs off the JobManager's mailbox.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from flink_runtime import configuration as cfg
from flink_runtime.checkpoint.metadata import METADATA_FILE, copy_into, read_metadata, write_metadata
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import JobStatus
from flink_runtime.io import filesystem

log = logging.getLogger(__name__)

RETENTION_KEY = cfg.CHECKPOINT_RETENTION.key
NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"
DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
# Where keyed-state snapshots of a job's subtasks go: <checkpoints dir>/<job>/state/<attempt>.
STATE_FOLDER = "state"


def retention_of(config: Configuration) -> str:
    """The job's retention (its config wins over the cluster's); ConfigurationError names
    the key and Flink's values for anything else."""
    return str(config.get(cfg.CHECKPOINT_RETENTION))


def retains(retention: str, status: JobStatus) -> bool:
    """Whether a job that ended in `status` keeps its retained checkpoints."""
    if retention == NO_EXTERNALIZED_CHECKPOINTS or status is JobStatus.FINISHED:
        return False
    if status is JobStatus.FAILED:
        return True
    return retention == RETAIN_ON_CANCELLATION  # CANCELED (and SUSPENDED, which removes nothing anyway)


def checkpoint_folder(location: str) -> str:
    """A checkpoint's folder from its folder or its `_metadata` path."""
    location = location.rstrip("/")
    return location[: -len(METADATA_FILE)].rstrip("/") if location.endswith("/" + METADATA_FILE) else location


@dataclass
class JobEnd:
    """What the end of one job removes and keeps (decided in the mailbox)."""

    job_id: str
    status: JobStatus
    retention: str
    checkpoints_dir: str
    keep: list[str]  # retained checkpoints to make self-contained and keep
    discard: list[str]  # retained checkpoints to delete
    protected: set[str] = field(default_factory=set)  # never deleted: the checkpoint the job started from
    # The snapshot the job started from in CLAIM mode (execution.savepoint-restore-mode):
    # deleted once the job FINISHED, or kept a self-contained checkpoint of its own.
    claimed: str | None = None


@dataclass
class JobEndReport:
    kept: list[str] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # working folders (keyed state)
    copied_bytes: int = 0
    # Kept checkpoints that could not be made self-contained: the data they point at must stay.
    not_externalized: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def clean_up(end: JobEnd, discard_staged_output: Callable[[], None] | None = None) -> JobEndReport:
    """Runs in a worker thread, in this order: kept checkpoints become self-contained
    (before anything they point at goes), the job's staged sink output is discarded,
    discarded checkpoints and the job's keyed-state folder are deleted, and the job's
    checkpoint folder too if nothing else is left in it. Each step goes on after another
    failed (logged and reported); nothing here raises."""
    report = JobEndReport()
    for location in end.keep:
        try:
            report.copied_bytes += externalize(location)
            report.kept.append(location)
        except Exception as exc:  # noqa: BLE001 - an unreadable checkpoint must not stop the cleanup
            report.not_externalized.append(location)
            report.problems.append(f"could not make checkpoint {location} self-contained: {exc}")
    if discard_staged_output is not None:
        try:
            discard_staged_output()
        except Exception as exc:  # noqa: BLE001
            report.problems.append(f"discarding the staged sink output failed: {exc}")
    protected = {checkpoint_folder(p) for p in end.protected}
    for location in end.discard:
        if checkpoint_folder(location) in protected:
            continue
        try:
            discard_checkpoint(location)
            report.discarded.append(location)
        except OSError as exc:
            report.problems.append(f"could not delete checkpoint {location}: {exc}")
    if end.claimed is not None and (end.status is JobStatus.FINISHED or (report.kept and not report.not_externalized)):
        try:
            discard_checkpoint(end.claimed)
            report.discarded.append(end.claimed)
        except OSError as exc:
            report.problems.append(f"could not delete the claimed snapshot {end.claimed}: {exc}")
    job_dir = filesystem.join(end.checkpoints_dir, end.job_id)
    try:
        report.removed += _remove_working_folders(job_dir)
    except OSError as exc:
        report.problems.append(f"could not remove the keyed state under {job_dir}: {exc}")
    return report


def externalize(location: str) -> int:
    """Copy into the checkpoint's folder what its `_metadata` points at outside it, then
    replace `_metadata` with one naming the copies relatively. Returns the bytes copied
    (0 when it is self-contained already: doing it twice copies nothing)."""
    folder = checkpoint_folder(location)
    progress = read_metadata(folder)
    outside = _outside_paths(progress, folder)
    if not outside:
        return 0
    size = sum(_size(path) for path in outside)
    write_metadata(folder, copy_into(progress, folder))
    return size


def discard_checkpoint(location: str) -> None:
    """Delete a checkpoint folder, its `_metadata` first: a folder half deleted (the
    JobManager died meanwhile) is never taken for a checkpoint."""
    folder = checkpoint_folder(location)
    fs = filesystem.filesystem_for(folder)
    fs.delete(filesystem.join(folder, METADATA_FILE))
    fs.delete(folder)


def _remove_working_folders(job_dir: str) -> list[str]:
    """The job's keyed-state snapshots (never read after the job ended: a kept checkpoint
    has its own copy), then the job's folder if nothing else (a kept checkpoint, a
    savepoint someone put there) is in it. Sibling jobs' folders are never looked at."""
    fs = filesystem.filesystem_for(job_dir)
    if not fs.exists(job_dir):
        return []
    removed = []
    state = filesystem.join(job_dir, STATE_FOLDER)
    if fs.exists(state):
        fs.delete(state)
        removed.append(state)
    if not fs.glob(filesystem.join(job_dir, "*")) and not fs.glob(filesystem.join(job_dir, ".*")):
        fs.delete(job_dir)
        removed.append(job_dir)
    return removed


def _outside_paths(progress: object, folder: str) -> list[str]:
    inside = folder.rstrip("/") + "/"
    paths: list[str] = []
    for vertex in getattr(progress, "vertices", {}).values():
        for partitions in vertex.partition_chunks.values():
            paths += [chunk for chunks in partitions.values() for chunk in chunks]
        paths += vertex.sink_chunks
        paths += [handle["path"] for handle in vertex.operator_state.values() if "path" in handle]
    return [path for path in paths if not path.startswith(inside)]


def _size(path: str) -> int:
    try:
        return sum(status.size for status in filesystem.filesystem_for(path).list_files(path))
    except OSError:
        return 0
