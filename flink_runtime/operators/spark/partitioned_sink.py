"""Partitioned sinks: Hive-style `col=value/` directories, and replacing only the
partitions a job produced (mode 'overwrite_partitions', Spark's dynamic partition
overwrite, Flink's INSERT OVERWRITE into a partitioned table).

Each chunk is written with Spark's partitionBy into the sink's staging directory (as
every sink chunk is, io.py). When the job has FINISHED the JobManager publishes:

1. every committed file is moved (renamed) into `<staging>/_publish/<partition>/`, so
   each partition the job produced is complete, beside the output, before anything
   visible changes;
2. a publish manifest (`<staging>/_publishing.json`, written by rename) names those
   partitions: from here on the publish is completed, never undone;
3. per partition, the published directory (if any) is renamed away to
   `<staging>/_replaced/` and the staged one renamed into its place: a reader lists
   either the old partition or the new one, never files of both;
4. the manifest is deleted, then the staging directory.

A JobManager that dies during 3 leaves the manifest: the job's recovered run completes
it (roll forward) before it plans anything (complete_interrupted_publish), so no
partition stays missing or half replaced. One that dies before 2 left the output
untouched, and the recovered run publishes its own output. A failed or cancelled job
never reaches 1: its staged output is deleted and the output changes in no way.
Partitions the job did not produce are never touched, byte for byte.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from flink_runtime.io import filesystem

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from flink_runtime.security.paths import AllowedDirectories

MANIFEST = "_publishing.json"
PUBLISH_DIR = "_publish"
REPLACED_DIR = "_replaced"

# Types whose values make readable, reversible directory names; Spark refuses the
# complex ones, and a float's text form does not round-trip.
_PARTITION_TYPES = ("string", "int", "bigint", "smallint", "tinyint", "date", "boolean", "decimal", "timestamp")

log = logging.getLogger(__name__)


class PartitionError(ValueError):
    """A partition column or value that a partitioned sink cannot write."""


def check_partition_columns(sink: dict[str, Any], output_schema: Callable[[], StructType]) -> None:
    """At submit: every partition_by column is an output column of a partitionable type,
    and at least one column is left for the files (Spark's rule). `output_schema` is
    asked only when the sink has partition columns."""
    columns = sink.get("partition_by") or []
    if not columns:
        if sink.get("mode") == "overwrite_partitions":
            raise PartitionError(
                f"sink {sink['path']!r}: mode 'overwrite_partitions' needs partition_by=[...] columns; "
                "use mode 'overwrite' to replace the whole output"
            )
        return
    fields = {field.name: field for field in output_schema().fields}
    for column in columns:
        if column not in fields:
            raise PartitionError(
                f"sink {sink['path']!r}: partition_by column {column!r} is not an output column; "
                f"the output has {', '.join(map(repr, fields)) or 'no columns'}"
            )
        data_type = fields[column].dataType
        if not data_type.typeName().startswith(_PARTITION_TYPES):
            raise PartitionError(
                f"sink {sink['path']!r}: partition_by column {column!r} has type {data_type.simpleString()}, "
                "which cannot name a directory; partition by a string, integer, date, boolean or decimal column "
                "(cast it in a select)"
            )
    if len(columns) >= len(fields):
        raise PartitionError(
            f"sink {sink['path']!r}: partition_by names every output column ({', '.join(columns)}); "
            "at least one column must remain for the data files"
        )


def check_partition_values(directory: str, partition_by: list[str]) -> None:
    """In the task, after writing a chunk and before committing it: no partition value
    holds '/' (Spark escapes it to %2F, which readers would see as a different value
    than the job wrote, and tools that split paths would misread)."""
    fs = filesystem.filesystem_for(directory)
    if not fs.exists(directory):
        return
    for status in fs.list_files(directory):
        relative = status.path[len(directory.rstrip("/")) + 1 :]
        for segment in relative.split("/")[: len(partition_by)]:
            column, _, escaped = segment.partition("=")
            if "%2F" in escaped.upper():
                raise PartitionError(
                    f"partition column {column!r} has the value {unquote(escaped)!r}, which contains '/'; "
                    "partition values name directories: replace the '/' (e.g. regexp_replace(col, '/', '-')) "
                    "in a select before the sink"
                )


def partition_of(relative: str, depth: int) -> str:
    """`day=1/country=fr` of `day=1/country=fr/part-0.parquet` (depth 2)."""
    parts = relative.split("/")
    if len(parts) <= depth:
        raise PartitionError(f"staged file {relative!r} is not inside {depth} partition directories")
    return "/".join(parts[:depth])


def swap_partitions(
    fs: filesystem.FileSystem, root: str, path: str, moves: list[tuple[str, str]], depth: int
) -> list[str]:
    """Steps 1-4 of the module doc for `moves` (staged file, published name); returns
    the partitions replaced."""
    staged = filesystem.join(root, PUBLISH_DIR)
    by_partition: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for source, target in moves:
        relative = target[len(path.rstrip("/")) + 1 :]
        by_partition[partition_of(relative, depth)].append((source, relative))
    for files in by_partition.values():
        for source, relative in files:
            fs.rename(source, filesystem.join(staged, relative))
    manifest = {
        "path": path,
        "staged": staged,
        "replaced": filesystem.join(root, REPLACED_DIR),
        "partitions": sorted(by_partition),
    }
    fs.write_text(filesystem.join(root, MANIFEST), json.dumps(manifest))  # by rename: whole or absent
    _complete(fs, manifest)
    fs.delete(filesystem.join(root, MANIFEST))
    return manifest["partitions"]


def _complete(fs: filesystem.FileSystem, manifest: dict[str, Any]) -> None:
    """Step 3, idempotent: a partition whose staged directory is gone is in place."""
    for partition in manifest["partitions"]:
        new = filesystem.join(manifest["staged"], partition)
        if not fs.exists(new):
            continue
        target = filesystem.join(manifest["path"], partition)
        if fs.exists(target):
            fs.rename(target, filesystem.join(manifest["replaced"], partition))
        fs.rename(new, target)


def complete_interrupted_publish(
    sink: dict[str, Any], staging: str, job_id: str, allowed: AllowedDirectories
) -> list[str]:
    """Before a (recovered) run of job `job_id` plans: finish each publish of it that a
    JobManager crash interrupted after its manifest was written (under `staging`, the
    job's staging directory); returns the partitions put in place. Only this job's:
    another job's manifest may be its publish in progress."""
    fs = filesystem.filesystem_for(staging)
    if not fs.exists(staging):
        return []
    completed: list[str] = []
    for pattern in (filesystem.join(staging, MANIFEST), filesystem.join(staging, "*", MANIFEST)):
        for status in fs.glob(pattern):
            manifest = json.loads(fs.read_text(status.path))
            if manifest.get("path") != sink["path"]:
                continue  # not this sink's (a manifest is only ever written by its own sink)
            for partition in manifest["partitions"]:
                allowed.check(filesystem.join(sink["path"], partition), "sink partition")
            _complete(fs, manifest)
            fs.delete(status.path)
            log.warning(
                "Completed the interrupted publish of job %s to %s: partitions %s",
                job_id,
                sink["path"],
                ", ".join(manifest["partitions"]),
            )
            completed.extend(manifest["partitions"])
    return completed
