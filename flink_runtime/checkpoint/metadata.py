"""What a checkpoint or savepoint records, and its `_metadata` file.

A batch job's progress is what the JobManager knows for certain, because every piece
of it was committed before it was reported:

- per source vertex, the input files of completed splits (so a restored job never
  reads them again) and the split numbers (valid for the same job);
- per vertex, the subtasks that finished, and the committed chunks of every result
  partition (`<partition>/split-<n>` or `subtask-<i>`);
- the committed, not yet published, sink chunks;
- per stateful subtask (keyed aggregations), the handle of its state snapshot.

A checkpoint (`<state.checkpoints.dir>/<job id>/chk-<id>/_metadata`) points at data
where it lies; a savepoint (`<dir>/savepoint-<short job id>-<id>/`) copies it into
its own directory and stores paths relative to it, so it stays valid after the job's
files are released and can be moved.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from flink_runtime.checkpoint.served_partitions import ServedPartitions, is_served, served_chunk_name
from flink_runtime.io import filesystem

FORMAT_VERSION = 1
METADATA_FILE = "_metadata"


class SavepointRestoreError(ValueError):
    """A savepoint or checkpoint cannot be restored; the message says which and why."""


class VertexProgress(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    completed_splits: list[int] = []
    completed_files: list[str] = []
    finished_subtasks: list[int] = []
    # result id -> partition number (as text: JSON keys) -> committed chunk directories
    partition_chunks: dict[str, dict[str, list[str]]] = {}
    sink_chunks: list[str] = []
    # subtask index (as text) -> state backend handle
    operator_state: dict[str, dict[str, Any]] = {}
    # The parallelism the scheduler decided for the vertex from its input
    # (scheduler/adaptive_parallelism.py; 0: none decided): a restore decides it again,
    # as its finished subtasks read runs of subpartitions for it.
    parallelism: int = 0


class JobProgress(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    job_id: str
    job_name: str
    checkpoint_id: int
    timestamp: float
    is_savepoint: bool = False
    # True for a savepoint taken when the job ended (stop-with-savepoint): a job
    # restored from it starts every vertex afresh, with only the completed input and
    # the operator state carried over.
    terminal: bool = False
    vertices: dict[str, VertexProgress] = {}
    format_version: int = FORMAT_VERSION


def write_metadata(directory: str, progress: JobProgress) -> str:
    """Write `<directory>/_metadata` atomically; returns the path."""
    path = filesystem.join(directory, METADATA_FILE)
    filesystem.filesystem_for(directory).write_text(path, msgspec.json.encode(progress).decode())
    return path


def read_metadata(location: str) -> JobProgress:
    """Read a savepoint or checkpoint directory (or its `_metadata` file)."""
    fs = filesystem.filesystem_for(location)
    path = location if location.rstrip("/").endswith(METADATA_FILE) else filesystem.join(location, METADATA_FILE)
    if not fs.exists(path):
        hint = "" if fs.exists(location) else f" ({location} does not exist)"
        raise SavepointRestoreError(
            f"savepoint {location}: no {METADATA_FILE} file{hint}; "
            "pass the savepoint directory printed when it completed"
        )
    try:
        progress = msgspec.json.decode(fs.read_text(path), type=JobProgress)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SavepointRestoreError(f"savepoint {location}: {METADATA_FILE} is corrupt ({exc})") from None
    if progress.format_version != FORMAT_VERSION:
        raise SavepointRestoreError(
            f"savepoint {location}: format version {progress.format_version}, this runtime reads {FORMAT_VERSION}"
        )
    base = location[: -len(METADATA_FILE)].rstrip("/") if path == location else location
    return _absolute(progress, base)


def _absolute(progress: JobProgress, base: str) -> JobProgress:
    """Savepoints store paths relative to their directory; make them usable here."""

    def resolve(path: str) -> str:
        return path if path.startswith("/") or "://" in path else filesystem.join(base, path)

    for vertex in progress.vertices.values():
        vertex.partition_chunks = {
            result: {partition: [resolve(c) for c in chunks] for partition, chunks in partitions.items()}
            for result, partitions in vertex.partition_chunks.items()
        }
        vertex.sink_chunks = [resolve(c) for c in vertex.sink_chunks]
        for handle in vertex.operator_state.values():
            if "path" in handle:
                handle["path"] = resolve(handle["path"])
    return progress


def copy_into(live: JobProgress, directory: str, served: ServedPartitions | None = None) -> JobProgress:
    """Copy everything a savepoint (or an externalized checkpoint) refers to into its
    directory; the returned progress names the copies by relative paths. `live` is left as
    it is: it still describes the running job, whose next checkpoint or savepoint copies
    from the same places. What is inside `directory` already is not copied again.
    Chunks only a TaskManager holds (served_partitions.py) are fetched through `served`."""
    progress = copy.deepcopy(live)
    fs = filesystem.filesystem_for(directory)
    fs.makedirs(directory)
    inside = directory.rstrip("/") + "/"

    def copy_tree(source: str, relative: str) -> str:
        if source.startswith(inside):
            return source[len(inside) :]
        if is_served(source):
            if served is None:
                raise ValueError(f"{source} is served by a TaskManager, and nothing here can fetch it")
            served.fetch(source, filesystem.join(directory, relative))
        else:
            fs.copy_tree(source, filesystem.join(directory, relative))
        return relative

    def name(path: str) -> str:
        return served_chunk_name(path) if is_served(path) else path.rstrip("/").rsplit("/", 1)[-1]

    for vertex_id, vertex in progress.vertices.items():
        vertex.partition_chunks = {
            result: {
                partition: [copy_tree(chunk, f"data/{result}/{partition}/{name(chunk)}") for chunk in chunks]
                for partition, chunks in partitions.items()
            }
            for result, partitions in vertex.partition_chunks.items()
        }
        vertex.sink_chunks = [copy_tree(chunk, f"sinks/{vertex_id}/{name(chunk)}") for chunk in vertex.sink_chunks]
        for subtask, handle in vertex.operator_state.items():
            if "path" in handle:
                handle["path"] = copy_tree(handle["path"], f"state/{vertex_id}/{subtask}")
    return progress


def check_matches(progress: JobProgress, vertex_ids: set[str], location: str, allow_unclaimed: bool) -> None:
    """Every vertex with state in the savepoint must exist in the new job, unless allowed."""
    unclaimed = sorted(
        vertex_id
        for vertex_id, vertex in progress.vertices.items()
        if vertex_id not in vertex_ids and (vertex.completed_files or vertex.operator_state or vertex.partition_chunks)
    )
    if unclaimed and not allow_unclaimed:
        raise SavepointRestoreError(
            f"savepoint {location} has state for vertices {unclaimed} that this job does not have; "
            "keep the vertex ids (the Pipeline API derives them from the pipeline's shape), or set "
            "execution.savepoint.ignore-unclaimed-state: true (CLI: run --allowNonRestoredState)"
        )
