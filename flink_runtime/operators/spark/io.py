"""Where Spark tasks read and write: file splits, result partitions, staged sinks.

Result partitions are Parquet, one directory per subpartition inside the partition's
directory (`__sub=<i>`, or `__sub=all` for broadcast), written with Spark's
partitionBy so a producer never shuffles to split its output. The partition
directory is committed by rename like every other partition.

Sinks commit in two phases. Each attempt writes a chunk (one per input split for a
source subtask, one per subtask otherwise) under
`<path>/_flink_staging/<job id>/.<chunk>.inprogress-<execution id>` and renames it to
`<chunk>` once written (a rerun of the same chunk replaces it); when the whole job has
finished the JobManager moves the committed files into `<path>` and writes
`_SUCCESS`. A failed attempt's files in progress are never published, and a failed
job publishes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from flink_runtime.io import filesystem
from flink_runtime.io.partitions import NO_DATA, DataSize, chunk_data_files, committed_chunk_data_files
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import Partitioner
from flink_runtime.operators.spark import partitioned_sink
from flink_runtime.security.paths import AllowedDirectories, local_resolved
from flink_runtime.spark.frames import empty_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from flink_runtime.rpc.messages import InputGateDeploymentDescriptor, ResultPartitionDeploymentDescriptor

SUBPARTITION_COLUMN = "__sub"
BROADCAST_SUBPARTITION = "all"
STAGING_DIR = "_flink_staging"
# 'error' fails at submit when the path has data, 'overwrite' replaces all of it,
# 'append' adds, 'overwrite_partitions' replaces only the partitions the job produced
# (partitioned_sink.py).
SINK_MODES = ("overwrite", "append", "error", "overwrite_partitions")

_GLOB_CHARS = set("*?[{")
_NOWHERE = AllowedDirectories()

log = logging.getLogger(__name__)


class SourceError(ValueError):
    pass


# -- sources ---------------------------------------------------------------------------------


def list_source_files(source: dict[str, Any]) -> list[filesystem.FileStatus]:
    """Every data file a source reads; a clear SourceError for a missing path.

    A missing path is an error; an existing directory with no files, or a glob whose
    directory exists but matches nothing, is empty input (valid, empty output).
    """
    files: list[filesystem.FileStatus] = []
    for path in source["paths"]:
        fs = filesystem.filesystem_for(path)
        if _GLOB_CHARS & set(path):
            matches = fs.glob(path)
            if not matches and not fs.exists(_glob_parent(path)):
                raise SourceError(f"input path {path!r} matches nothing and {_glob_parent(path)!r} does not exist")
            for match in matches:
                files.extend(fs.list_files(match.path) if match.is_dir else [match])
        elif not fs.exists(path):
            raise SourceError(f"input path {path!r} does not exist")
        else:
            files.extend(fs.list_files(path))
    return files


def confined_source_files(
    files: list[filesystem.FileStatus], allowed: AllowedDirectories
) -> list[filesystem.FileStatus]:
    """With security.allowed-directories: every listed file checked with its links resolved
    (PathNotAllowedError: a glob match or a file in a source directory that links outside),
    and named by its resolved path, so the split a TaskManager reads is the file checked."""
    if not allowed:
        return files
    confined = []
    for status in files:
        allowed.check(status.path, "input file")
        if filesystem.is_local(status.path):
            status = dataclasses.replace(status, path=local_resolved(status.path))
        confined.append(status)
    return confined


def check_paths(allowed: AllowedDirectories, paths: Iterable[str], what: str) -> None:
    """PathNotAllowedError for the first of `paths` outside the allowed directories."""
    for path in paths:
        allowed.check(path, what)


def _glob_parent(pattern: str) -> str:
    parts = pattern.split("/")
    for index, part in enumerate(parts):
        if _GLOB_CHARS & set(part):
            return "/".join(parts[:index]) or "."
    return pattern


# A split holds at most this much unless the job says otherwise (Pipeline's `split_size=`,
# a source config's `split_size`). Large, because each split a subtask pulls is a Spark
# job of its own, and the gaps between a task's consecutive Spark jobs added 10-11 s
# to a 1 GB word count cut into 9 splits of 128 MiB (issue 26's profile, quiet 2-core
# machine). With it, input up to `parallelism` GiB is one split per subtask; a smaller
# split size buys finer failover and stop-with-savepoint at that cost.
DEFAULT_SPLIT_SIZE = 1 << 30


def file_splits(files: list[filesystem.FileStatus], split_size: int, parallelism: int) -> list[InputSplit]:
    """Group files into splits of at most about `split_size` bytes, never splitting a file.

    There are at least `parallelism` splits when there are that many files, so every
    source subtask has work, and no more than `split_size` asks for; the files (in
    listing order) are cut where the running byte count crosses a multiple of
    total / splits, so the splits hold even bytes (within half a file): a subtask never
    gets a split much larger than the others', nor a small leftover split of its own.
    """
    total = sum(f.size for f in files)
    wanted = max(-(-total // max(1, split_size)), min(max(1, parallelism), len(files)), 1)
    target = max(total, 1) / wanted
    groups: dict[int, list[filesystem.FileStatus]] = {}
    before = 0
    for status in files:
        # The split whose byte range holds the file's middle; empty files go with the next.
        index = min(int((before + status.size / 2) // target), wanted - 1)
        groups.setdefault(index, []).append(status)
        before += status.size
    return [
        _split(number, [status.path for status in group], sum(status.size for status in group))
        for number, (_, group) in enumerate(sorted(groups.items()))
    ]


def _split(number: int, files: list[str], size: int) -> InputSplit:
    return InputSplit(split_number=number, payload={"files": files, "bytes": size})


def read_source(spark: SparkSession, source: dict[str, Any], files: list[str], schema: StructType) -> DataFrame:
    if not files:
        return empty_frame(spark, schema)
    reader = spark.read.format(source["format"]).options(**source.get("options", {}))
    if source["format"] != "text":
        reader = reader.schema(schema)
    return reader.load(files)


def infers_schema_from_files(source: dict[str, Any]) -> bool:
    """Whether a source's schema comes from its first file: not fixed (text), not given,
    not asked of a database already (a JDBC source's, under `__resolved__`)."""
    return source["format"] != "text" and not source.get("schema") and "__resolved__" not in source


def infer_source_schema(spark: SparkSession, source: dict[str, Any], files: list[str]) -> StructType:
    """The schema a source produces: given, fixed (text), or inferred from its first file."""
    from pyspark.sql.types import StringType, StructField, StructType

    if not infers_schema_from_files(source):
        if source["format"] == "text":
            return StructType([StructField("value", StringType(), True)])
        if "__resolved__" in source:
            return schema_from_json(source["__resolved__"])
        return empty_frame(spark, source["schema"]).schema
    if not files:
        raise SourceError(
            f"{source['format']} input {source['paths']} has no files to infer a schema from; "
            "pass schema='col type, ...' to read empty input"
        )
    reader = spark.read.format(source["format"]).options(**source.get("options", {}))
    return reader.load(files[:1]).schema


# -- result partitions ------------------------------------------------------------------------


def write_partition(df: DataFrame, partition: ResultPartitionDeploymentDescriptor, staging_dir: str) -> None:
    """Append `df` to a partition being written, split into its subpartitions."""
    from pyspark.sql import functions as F  # noqa: N812

    writer_mode = "append"
    if partition.partitioner is Partitioner.BROADCAST or partition.number_of_subpartitions == 1:
        sub = BROADCAST_SUBPARTITION if partition.partitioner is Partitioner.BROADCAST else "0"
        df.write.mode(writer_mode).parquet(filesystem.join(staging_dir, f"{SUBPARTITION_COLUMN}={sub}"))
        return
    n = partition.number_of_subpartitions
    if partition.partitioner is Partitioner.HASH:
        keys = [F.col(key) for key in partition.keys] or [F.col(c) for c in df.columns]
        sub_column = F.pmod(F.hash(*keys), F.lit(n))
    elif partition.partitioner is Partitioner.REBALANCE:
        sub_column = F.pmod(F.monotonically_increasing_id(), F.lit(n))
    else:  # FORWARD with more than one subpartition cannot happen (validated), keep all in 0
        sub_column = F.lit(0)
    df.withColumn(SUBPARTITION_COLUMN, sub_column).write.mode(writer_mode).partitionBy(SUBPARTITION_COLUMN).parquet(
        staging_dir
    )


def read_gate(
    spark: SparkSession, gate: InputGateDeploymentDescriptor, schema: StructType
) -> tuple[DataFrame, DataSize]:
    """The subpartition(s) this consumer reads from every committed chunk of every partition
    of one input: exactly the files the producers' manifests name (PartitionNotFoundError
    when one is missing, never an empty read); and their bytes and rows, as the manifests
    recorded them."""
    if gate.partitioner is Partitioner.BROADCAST:
        subs = [BROADCAST_SUBPARTITION]
    else:
        first = gate.consumed_subpartition_index
        subs = [str(index) for index in range(first, first + gate.consumed_subpartition_count)]
    subdirectories = [f"{SUBPARTITION_COLUMN}={sub}" for sub in subs]
    files: dict[str, DataSize] = {}
    for location in gate.partition_locations:
        files.update(committed_chunk_data_files(location, gate.result_id, subdirectories))
    for chunk_location in gate.chunk_locations:
        files.update(chunk_data_files(chunk_location, gate.result_id, subdirectories))
    if not files:
        return empty_frame(spark, schema), NO_DATA
    return spark.read.schema(schema).parquet(*files), sum(files.values(), NO_DATA)


def schema_to_json(schema: StructType) -> str:
    return schema.json()


def schema_from_json(text: str) -> StructType:
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(text))


# -- two-phase sinks ----------------------------------------------------------------------------


def sink_staging_dir(sink: dict[str, Any]) -> str:
    """Where a sink stages output: a folder per data namespace (sink_staging_root)."""
    return filesystem.join(sink["path"], STAGING_DIR)


def sink_staging_root(sink: dict[str, Any], data_namespace: str) -> str:
    return filesystem.join(sink_staging_dir(sink), data_namespace)


def write_sink(df: DataFrame, sink: dict[str, Any], directory: str) -> DataSize:
    """Phase one, part one: a chunk's output in its in-progress directory (then renamed),
    in `col=value/` directories with partition_by; returns the size of the files written,
    and their rows where the format records them (`counts_rows_in_files`), else 0."""
    writer = df.write.mode("append").format(sink["format"]).options(**sink.get("options", {}))
    if sink.get("partition_by"):
        writer = writer.partitionBy(*sink["partition_by"])
    writer.save(directory)
    fs = filesystem.filesystem_for(directory)
    if sink.get("partition_by"):
        partitioned_sink.check_partition_values(directory, sink["partition_by"])
    files = fs.list_files(directory) if fs.exists(directory) else []
    rows = sum(fs.parquet_rows(status.path) for status in files) if counts_rows_in_files(sink) else 0
    return DataSize(sum(status.size for status in files), rows)


def counts_rows_in_files(sink: dict[str, Any]) -> bool:
    """Whether the files a sink writes say how many rows they hold (Parquet's footers; a
    JDBC sink writes no files, CSV and JSON files do not say)."""
    return str(sink.get("format", "")).lower() == "parquet"


def restore_sink_chunks(
    sink: dict[str, Any], job_id: str, chunks: list[str], allowed: AllowedDirectories = _NOWHERE
) -> None:
    """Savepointed, committed sink chunks become part of the new job's staged output."""
    root = sink_staging_root(sink, job_id)
    fs = filesystem.filesystem_for(root)
    # Where they go is the job's sink; where they come from is the savepoint's metadata
    # (maybe a checkpoint of the cluster's own, outside the list, for a recovered job).
    allowed.check(root, "sink staging directory")
    for chunk in chunks:
        name = chunk.rstrip("/").rsplit("/", 1)[-1]
        fs.copy_tree(chunk, filesystem.join(root, f"restored-{name}"))


def _published_marker(sink: dict[str, Any], data_namespace: str) -> str:
    return filesystem.join(sink["path"], STAGING_DIR, f"{data_namespace.split('/')[0]}.published")


def published_before(sink: dict[str, Any], data_namespace: str) -> bool:
    """Whether the job published rounds of output here and goes on (a continuous job): a
    run of it recovered after a JobManager restart adds to that output, and neither
    refuses the path (mode 'error') nor replaces what its rounds published."""
    marker = _published_marker(sink, data_namespace)
    return filesystem.filesystem_for(marker).exists(marker)


def forget_published_rounds(sink: dict[str, Any], data_namespace: str, allowed: AllowedDirectories = _NOWHERE) -> None:
    """The job's end is stored: no run of it is recovered any more, so its marker goes
    (with the staging directory, once empty)."""
    discard_sink_staging(sink, data_namespace, allowed)


def check_sink_target(sink: dict[str, Any]) -> None:
    """At submit: mode 'error' refuses a path that already has data."""
    if sink.get("mode", "error") not in SINK_MODES:
        raise ValueError(f"sink mode must be one of {', '.join(SINK_MODES)}, not {sink.get('mode')!r}")
    if sink.get("mode") == "overwrite_partitions" and not sink.get("partition_by"):
        raise ValueError(f"sink {sink['path']!r}: mode 'overwrite_partitions' needs partition_by columns")
    if sink.get("mode", "error") == "error" and _visible_entries(sink["path"]):
        raise ValueError(
            f"output path {sink['path']!r} already exists and is not empty (mode 'error'); "
            "use mode 'overwrite' or 'append', or another path"
        )


def publish_sink(
    sink: dict[str, Any],
    job_id: str,
    continuation: bool = False,
    replace: bool = True,
    allowed: AllowedDirectories = _NOWHERE,
    more_rounds: bool = False,
) -> int:
    """Phase two, on the JobManager once the job finished: move committed files into place.

    A continuation (the job published to this path before, in an earlier round) adds to
    what it published, or with mode 'overwrite' and `replace` (its output covers all its
    input so far) replaces it. Returns the number of files published. `more_rounds`: the
    job runs in rounds; a marker (published_before), written before the first file moves,
    says so until the job's end is stored (forget_published_rounds).

    With security.allowed-directories, the sink's path and staging directory and every
    file moved are checked (links resolved) before anything changes, so a link the job
    made while it ran cannot redirect the publishing outside (PathNotAllowedError).
    """
    path = sink["path"]
    fs = filesystem.filesystem_for(path)
    root = sink_staging_root(sink, job_id)
    allowed.check(path, "sink path")
    allowed.check(root, "sink staging directory")
    moves = _staged_moves(fs, root, path)
    for source, target in moves:
        allowed.check(source, "staged sink file")
        allowed.check(target, "sink file")
    mode = sink.get("mode", "error")
    if mode == "error" and not continuation:
        check_sink_target(sink)  # nothing appeared at the path while the job ran
    if more_rounds:
        fs.write_text(_published_marker(sink, job_id), "")
    if mode == "overwrite_partitions":
        # Only the partitions this job produced, each swapped whole (partitioned_sink.py).
        partitions = partitioned_sink.swap_partitions(fs, root, path, moves, len(sink["partition_by"]))
        log.info("Replaced partitions %s of %s", ", ".join(partitions) or "(none)", path)
    else:
        if mode == "overwrite" and replace:
            for entry in _visible_entries(path):
                fs.delete(entry)
        # Committed chunks only (`moves`): `split-<n>` of source subtasks, `subtask-<i>` of the
        # others; in-progress ones (dot names) of failed attempts are skipped and deleted below.
        for source, target in moves:
            fs.rename(source, target)
    discard_sink_staging(sink, job_id, allowed, keep_published_marker=more_rounds)
    fs.write_text(filesystem.join(path, "_SUCCESS"), "")
    return len(moves)


def _staged_moves(fs: filesystem.FileSystem, root: str, path: str) -> list[tuple[str, str]]:
    """(staged file, its published name) for every file of every committed chunk; a file
    in partition directories (`day=1/part-0`) keeps them (`<path>/day=1/<chunk>-part-0`)."""
    moves = []
    for chunk in _visible_entries(root):
        chunk_name = chunk.rstrip("/").rsplit("/", 1)[-1]
        for status in fs.list_files(chunk):
            relative = status.path.rstrip("/")[len(chunk.rstrip("/")) + 1 :]
            directory, _, name = relative.rpartition("/")
            parents = [directory] if directory else []
            moves.append((status.path, filesystem.join(path, *parents, f"{chunk_name}-{name}")))
    return moves


def discard_sink_staging(
    sink: dict[str, Any],
    data_namespace: str,
    allowed: AllowedDirectories = _NOWHERE,
    keep_published_marker: bool = False,
) -> None:
    """The job ended (or published a round: `keep_published_marker`): remove everything
    it staged, earlier runs' included (a run recovered after a JobManager restart stages
    under `<job>/run-<8 hex>`). Nothing is removed where the staging directory now
    resolves outside the allowed directories."""
    staging_dir = filesystem.join(sink["path"], STAGING_DIR)
    if problem := allowed.problem(staging_dir):
        log.warning("Not removing the staged output of %s: %s", sink["path"], problem)
        return
    fs = filesystem.filesystem_for(sink["path"])
    fs.delete(filesystem.join(sink["path"], STAGING_DIR, data_namespace.split("/")[0]))
    if not keep_published_marker:
        fs.delete(_published_marker(sink, data_namespace))
    staging = filesystem.join(sink["path"], STAGING_DIR)
    if filesystem.is_local(staging):
        # rmdir removes it only while empty: another job writing to the same path (the
        # runs of a backfill, say) may have just staged its first chunk in it.
        with contextlib.suppress(OSError):
            os.rmdir(filesystem.local_path(staging))
    elif fs.exists(staging) and not fs.glob(filesystem.join(staging, "*")):
        fs.delete(staging)


def _visible_entries(path: str) -> list[str]:
    fs = filesystem.filesystem_for(path)
    if not fs.exists(path):
        return []
    return [
        status.path
        for status in fs.glob(filesystem.join(path, "*"))
        if not status.path.rstrip("/").rsplit("/", 1)[-1].startswith(("_", "."))
    ]
