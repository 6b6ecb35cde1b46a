"""Blocking result partitions as files, committed by rename.

A producer subtask writes one partition per produced result, split into one
subpartition per consumer subtask it feeds. It writes under a temporary directory
named after its attempt and renames it into place on commit, so a consumer never
sees half a partition and a retried attempt never mixes with an earlier one.

    <data dir>/<job id>/<result id>/<partition number>/<subpartition>.jsonl

This record format (JSON lines) serves the runtime's own invokables; PySpark tasks
write Parquet through the same layout and commit protocol.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from flink_runtime.io import filesystem
from flink_runtime.jobgraph.jobgraph import Partitioner


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

    def emit(self, record: Any) -> None:
        line = json.dumps(record) + "\n"
        self.records_written += 1
        if self.partitioner is Partitioner.BROADCAST:
            for index in range(self.number_of_subpartitions):
                self._file(index).write(line)
            return
        if self.number_of_subpartitions == 1 or self.partitioner is Partitioner.FORWARD:
            index = 0
        elif self.partitioner is Partitioner.REBALANCE:
            index = next(self._round_robin)
        else:
            key = record if not self.keys else [record[k] for k in self.keys]
            index = stable_hash(key) % self.number_of_subpartitions
        self._file(index).write(line)

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

    def files(self) -> list[Path]:
        return [Path(location) / f"{self.subpartition_index}.jsonl" for location in self.partition_locations]

    def records(self) -> Iterator[Any]:
        for path in self.files():
            try:
                file = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
            except FileNotFoundError:
                if not path.parent.is_dir():
                    raise FileNotFoundError(
                        f"result partition {path.parent} of result {self.result_id} is missing: its producer "
                        "committed it, but this TaskManager cannot see it. io.tmp.dirs must be a directory "
                        "all TaskManagers share (or a Hadoop URI)."
                    ) from None
                continue  # nothing was written to this subpartition (files open on first write)
            with file:
                for line in file:
                    yield json.loads(line)


def release_job_partitions(data_dir: str | os.PathLike[str], job_id: str) -> None:
    path = filesystem.join(str(data_dir), job_id)
    filesystem.filesystem_for(path).delete(path)
