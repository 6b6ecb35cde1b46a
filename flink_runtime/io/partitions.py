"""Blocking result partitions as files, committed by rename.

A producer subtask writes one partition per produced result, split into one
subpartition per consumer subtask it feeds. It writes under a temporary directory
named after its attempt and renames it into place on commit, so a consumer never
sees half a partition and a retried attempt never mixes with an earlier one.

    <data dir>/<job id>/<result id>/<partition number>/<subpartition>.jsonl

This record format (JSON lines) serves the runtime's own invokables; PySpark tasks
write Parquet through the same layout and commit protocol.

A committed partition says what it holds: `_COMMITTED.json` inside it, written before
the rename (record counts per subpartition; for Spark, the chunks), and every Spark
chunk lists its files with their sizes and rows (from the Parquet footers) in
`_chunk.json`, so neither side of an exchange counts its rows in Spark. A consumer reads exactly what
the manifests name and fails with PartitionNotFoundError when anything is missing: a
partition it cannot see (a TaskManager whose io.tmp.dirs is not shared) is never read
as empty.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import zlib
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from flink_runtime.io import filesystem
from flink_runtime.jobgraph.jobgraph import Partitioner

PARTITION_MANIFEST = "_COMMITTED.json"
CHUNK_MANIFEST = "_chunk.json"


@dataclass(frozen=True)
class DataSize:
    """What a chunk's data file holds (or several files together)."""

    bytes: int
    rows: int

    def __add__(self, other: DataSize) -> DataSize:
        return DataSize(self.bytes + other.bytes, self.rows + other.rows)


NO_DATA = DataSize(0, 0)


class PartitionNotFoundError(FileNotFoundError):
    """A committed partition (or part of one) is not where its producer committed it
    (Flink's PartitionNotFoundException)."""

    def __init__(self, result_id: str, location: str, what: str) -> None:
        super().__init__(
            f"result partition {location} of result {result_id} is incomplete: {what}. Its producer "
            "committed it, but this TaskManager cannot see it: io.tmp.dirs must be a directory every "
            "TaskManager shares (or a Hadoop URI) when taskmanager.network.partition-serving is 'shared'; "
            "with 'network' each TaskManager serves the partitions it produced."
        )


def job_data_dir(data_dir: str | os.PathLike[str], job_id: str) -> Path:
    return Path(data_dir) / job_id


def partition_dir(data_dir: str | os.PathLike[str], job_id: str, result_id: str, partition_number: int) -> str:
    """Where one partition lives. Invokables that write their own partitions (Spark)
    commit chunks inside it (`split-<n>` per input split, `whole` otherwise), so a
    restarted subtask keeps the chunks its earlier attempts committed."""
    return filesystem.join(str(data_dir), job_id, result_id, str(partition_number))


def chunk_dirs(partition: str, chunk: str, attempt_id: str) -> tuple[str, str]:
    """(in-progress, committed) directory of one chunk written by one attempt."""
    return filesystem.join(partition, f".{chunk}.inprogress-{attempt_id}"), filesystem.join(partition, chunk)


def abort_chunks(partition: str, attempt_id: str) -> None:
    """Remove what one attempt left in progress; committed chunks stay."""
    fs = filesystem.filesystem_for(partition)
    if not fs.exists(partition):
        return
    for status in fs.glob(filesystem.join(partition, f".*.inprogress-{attempt_id}")):
        fs.delete(status.path)


def partition_dirs(
    data_dir: str | os.PathLike[str], job_id: str, result_id: str, partition_number: int, attempt_id: str
) -> tuple[str, str]:
    """(staging, final) directory of one partition written by one attempt."""
    result_dir = filesystem.join(str(data_dir), job_id, result_id)
    return (
        filesystem.join(result_dir, f".{partition_number}.inprogress-{attempt_id}"),
        filesystem.join(result_dir, str(partition_number)),
    )


def commit_partition_dir(staging_dir: str, final_dir: str) -> str:
    """Publish a partition by rename; returns its location.

    A finished earlier attempt of the same subtask may have committed already (it
    finished but its report was lost): the newest attempt's data wins.
    """
    fs = filesystem.filesystem_for(final_dir)
    if fs.exists(final_dir):
        fs.delete(final_dir)
    if not fs.exists(staging_dir):
        fs.makedirs(staging_dir)  # an attempt that produced nothing still has a (empty) partition
    fs.rename(staging_dir, final_dir)
    return final_dir


def write_chunk_manifest(chunk_dir: str) -> DataSize:
    """Record every data file of a chunk being written, with its size and its rows, read
    from its Parquet footer (before the commit); returns their total.

    Files sit one folder deep (`__sub=<i>/part-*.parquet`): the subpartition folders
    start with `_`, which the file systems' listings skip as hidden, so each is listed
    on its own."""
    fs = filesystem.filesystem_for(chunk_dir)
    files: dict[str, int] = {}
    rows: dict[str, int] = {}
    for entry in fs.glob(filesystem.join(chunk_dir, "*")):
        folder = entry.path.rstrip("/")
        for status in fs.list_files(folder) if entry.is_dir else []:
            # Both paths come from the same file system, so they share scheme and form.
            relative = f"{folder.rsplit('/', 1)[-1]}/{status.path[len(folder) + 1 :]}"
            files[relative] = status.size
            rows[relative] = fs.parquet_rows(status.path)
    fs.write_text(filesystem.join(chunk_dir, CHUNK_MANIFEST), json.dumps({"files": files, "rows": rows}))
    return DataSize(sum(files.values()), sum(rows.values()))


def partition_size_bytes(location: str) -> int:
    """The bytes of every file of a committed partition (its data and manifests); -1 where
    it is not on a local file system (not listed: only a hint for the scheduler)."""
    if not filesystem.is_local(location):
        return -1
    total = 0
    for folder, _, names in os.walk(filesystem.local_path(location)):
        for name in names:
            with contextlib.suppress(OSError):  # a file removed meanwhile counts nothing
                total += os.stat(os.path.join(folder, name)).st_size
    return total


def write_partition_manifest(partition: str, result_id: str, chunks: list[str], producer: str = "") -> None:
    """Seal a partition of chunks once its producer is done: the chunks it holds, and
    which attempt sealed it (a consumer elsewhere reads a copy it can see in place only
    when that is the attempt the JobManager knows finished it).

    Chunks committed by earlier attempts of the producer must be visible here too;
    one that is not fails the producer rather than leaving its data out."""
    fs = filesystem.filesystem_for(partition)
    for chunk in chunks:
        if not fs.exists(filesystem.join(partition, chunk, CHUNK_MANIFEST)):
            raise PartitionNotFoundError(result_id, partition, f"chunk {chunk} committed earlier is missing")
    manifest = {"chunks": sorted(chunks), "producer": producer}
    fs.write_text(filesystem.join(partition, PARTITION_MANIFEST), json.dumps(manifest))


def committed_chunk_files(location: str, result_id: str, subdirectory: str) -> list[str]:
    """The data files under `subdirectory` of every chunk a sealed partition holds,
    each checked to exist with the size its producer recorded."""
    return list(committed_chunk_data_files(location, result_id, [subdirectory]))


def committed_chunk_data_files(location: str, result_id: str, subdirectories: Collection[str]) -> dict[str, DataSize]:
    """The data files under any of `subdirectories` of every chunk a sealed partition
    holds, with what each holds (path -> bytes and rows); each manifest is read once."""
    fs = filesystem.filesystem_for(location)
    chunks = _read_manifest(fs, filesystem.join(location, PARTITION_MANIFEST), result_id, location)["chunks"]
    found: dict[str, DataSize] = {}
    for chunk in chunks:
        chunk_dir = filesystem.join(location, chunk)
        found.update(chunk_data_files(chunk_dir, result_id, subdirectories))
    return found


def chunk_files(chunk_dir: str, result_id: str, subdirectory: str) -> list[str]:
    """The data files under `subdirectory` of one committed chunk, checked against its manifest."""
    return list(chunk_data_files(chunk_dir, result_id, [subdirectory]))


def chunk_data_files(chunk_dir: str, result_id: str, subdirectories: Collection[str]) -> dict[str, DataSize]:
    """The data files under any of `subdirectories` of one committed chunk, checked
    against its manifest, with what each holds (path -> bytes and rows)."""
    fs = filesystem.filesystem_for(chunk_dir)
    manifest = _read_manifest(fs, filesystem.join(chunk_dir, CHUNK_MANIFEST), result_id, chunk_dir)
    # A manifest written before rows were recorded counts none (the rows are metrics only).
    rows = manifest.get("rows", {})
    wanted: dict[str, DataSize] = {}
    for subdirectory in subdirectories:
        folder = filesystem.join(chunk_dir, subdirectory)
        listed = fs.list_files(folder) if fs.exists(folder) else []
        actual = {status.path.rstrip("/").rsplit("/", 1)[-1]: status.size for status in listed}
        for relative, size in manifest["files"].items():
            parent, _, name = relative.rpartition("/")
            if parent != subdirectory:
                continue
            if actual.get(name) != size:
                what = "missing" if name not in actual else f"{actual[name]} bytes, not the {size} committed"
                raise PartitionNotFoundError(result_id, chunk_dir, f"data file {relative} is {what}")
            wanted[filesystem.join(chunk_dir, relative)] = DataSize(size, rows.get(relative, 0))
    return wanted


def _read_manifest(fs: filesystem.FileSystem, path: str, result_id: str, location: str) -> dict[str, Any]:
    if not fs.exists(path):
        what = "it does not exist" if not fs.exists(location) else f"its manifest {path.rsplit('/', 1)[-1]} is missing"
        raise PartitionNotFoundError(result_id, location, what)
    return json.loads(fs.read_text(path))


def stable_hash(value: Any) -> int:
    """A hash that is the same in every process (Python's str hash is salted)."""
    return zlib.crc32(json.dumps(value, sort_keys=True, default=str).encode())


class ResultPartitionWriter:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        job_id: str,
        result_id: str,
        partition_number: int,
        number_of_subpartitions: int,
        partitioner: Partitioner,
        keys: list[str],
        attempt_id: str,
    ) -> None:
        self.partitioner = partitioner
        self.keys = keys
        self.number_of_subpartitions = number_of_subpartitions
        self.attempt_id = attempt_id
        staging, final = partition_dirs(data_dir, job_id, result_id, partition_number, attempt_id)
        self.final_dir = Path(final)
        self.staging_dir = Path(staging)
        shutil.rmtree(self.staging_dir, ignore_errors=True)
        self.staging_dir.mkdir(parents=True)
        # Opened on first write: an ALL_TO_ALL exchange of N x N subtasks would otherwise
        # create N^2 files, nearly all empty. A subpartition with no file is empty.
        self._files: dict[int, IO[str]] = {}
        self._round_robin = itertools.cycle(range(number_of_subpartitions))
        self.records_written = 0
        self.bytes_written = 0  # known once committed
        self._records_per_subpartition = [0] * number_of_subpartitions

    def emit(self, record: Any) -> None:
        line = json.dumps(record) + "\n"
        self.records_written += 1
        if self.partitioner is Partitioner.BROADCAST:
            for index in range(self.number_of_subpartitions):
                self._write(index, line)
            return
        if self.number_of_subpartitions == 1 or self.partitioner is Partitioner.FORWARD:
            index = 0
        elif self.partitioner is Partitioner.REBALANCE:
            index = next(self._round_robin)
        else:
            key = record if not self.keys else [record[k] for k in self.keys]
            index = stable_hash(key) % self.number_of_subpartitions
        self._write(index, line)

    def _write(self, index: int, line: str) -> None:
        self._file(index).write(line)
        self._records_per_subpartition[index] += 1

    def _file(self, index: int) -> IO[str]:
        file = self._files.get(index)
        if file is None:
            file = self._files[index] = open(self.staging_dir / f"{index}.jsonl", "w", encoding="utf-8")  # noqa: SIM115
        return file

    def emit_all(self, records: Iterable[Any]) -> None:
        for record in records:
            self.emit(record)

    def commit(self) -> str:
        """Publish the partition atomically; returns its location."""
        self.close()
        self.bytes_written = sum(os.path.getsize(file.name) for file in self._files.values())
        manifest = {"records": self._records_per_subpartition, "producer": self.attempt_id}
        (self.staging_dir / PARTITION_MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
        return commit_partition_dir(str(self.staging_dir), str(self.final_dir))

    def close(self) -> None:
        for file in self._files.values():
            if not file.closed:
                file.close()

    def abort(self) -> None:
        self.close()
        shutil.rmtree(self.staging_dir, ignore_errors=True)


class InputGate:
    """The subpartitions one consumer subtask reads from every partition of one result."""

    def __init__(self, result_id: str, subpartition_index: int, partition_locations: list[str]) -> None:
        self.result_id = result_id
        self.subpartition_index = subpartition_index
        self.partition_locations = partition_locations
        # What records() has read so far (a task's IOMetrics).
        self.records_read = 0
        self.bytes_read = 0

    def files(self) -> list[Path]:
        return [Path(location) / f"{self.subpartition_index}.jsonl" for location in self.partition_locations]

    def records(self) -> Iterator[Any]:
        """Every record of this subpartition, partition by partition; raises
        PartitionNotFoundError for a partition that is missing or holds fewer (or more)
        records than its producer committed."""
        for path in self.files():
            location = path.parent
            manifest = location / PARTITION_MANIFEST
            try:
                committed = json.loads(manifest.read_text(encoding="utf-8"))["records"][self.subpartition_index]
            except FileNotFoundError:
                what = "it does not exist" if not location.is_dir() else f"{PARTITION_MANIFEST} is missing"
                raise PartitionNotFoundError(self.result_id, str(location), what) from None
            read = 0
            if committed:  # a subpartition nothing was written to has no file (opened on first write)
                if not path.exists():
                    raise PartitionNotFoundError(self.result_id, str(location), f"{path.name} is missing")
                self.bytes_read += path.stat().st_size
                with open(path, encoding="utf-8") as file:
                    for line in file:
                        read += 1
                        self.records_read += 1
                        yield json.loads(line)
            if read != committed:
                raise PartitionNotFoundError(
                    self.result_id, str(location), f"{path.name} holds {read} records, not the {committed} committed"
                )


# What names a job's partitions under the data directory: its id, a run of it recovered
# after a JobManager restart (`<job id>/run-<hex>`), or a later round of either
# (`<job id>/round-<n>`, `<job id>/run-<hex>/round-<n>`). Never a path of the sender's
# choosing: a ReleasePartitions naming `/` or `../x` must not delete anything outside.
_DATA_NAMESPACE = re.compile(r"[0-9a-f]{32}(/run-[0-9a-f]{8})?(/round-[0-9]{1,9})?")


class InvalidDataNamespace(ValueError):
    pass


def validate_namespace(namespace: str) -> None:
    if not _DATA_NAMESPACE.fullmatch(namespace):
        raise InvalidDataNamespace(f"{namespace!r} is not a job id or a run of one")


def release_job_partitions(data_dir: str | os.PathLike[str], namespace: str) -> None:
    """Delete the partitions of a job (or of one run of it) under `data_dir`."""
    validate_namespace(namespace)
    path = filesystem.join(str(data_dir), namespace)
    filesystem.filesystem_for(path).delete(path)
