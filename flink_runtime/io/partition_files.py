"""Partitions served by the TaskManager that produced them: which files, how they travel.

Flink's blocking shuffle keeps a finished partition on its producer's TaskManager and
lets each consumer fetch its subpartition from there over the network. Here the
files stay the storage (io/partitions.py) and only the transport is added: a consumer
on another TaskManager asks the producer's TaskManager for the files of its
subpartition, copies them into a folder of its own local data directory (the same
relative layout, manifests included), and reads that copy exactly as it reads a local
partition, so every manifest check applies to what arrived.

Two modes (`taskmanager.network.partition-serving`):

- `network`: the default for a local `io.tmp.dirs` outside a MiniCluster. A consumer
  reads a partition of its own TaskManager in place and fetches any other one.
- `shared`: every TaskManager sees every partition under the same path (a shared
  filesystem, or a Hadoop URI such as hdfs:// or s3a://, the default for those). A
  partition that is not visible fails the consumer with PartitionNotFoundError.

Requests carry ids (job namespace, result id, partition number, subpartition) and the
names this module listed for them; never a path of the asker's choosing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from flink_runtime.io.filesystem import is_local, local_path
from flink_runtime.io.partitions import (
    CHUNK_MANIFEST,
    PARTITION_MANIFEST,
    PartitionNotFoundError,
    partition_dir,
    validate_namespace,
)

NETWORK, SHARED, AUTO = "network", "shared", "auto"
SERVING_MODES = (AUTO, NETWORK, SHARED)

# Spark partitions keep each subpartition in `__sub=<i>` (`__sub=all` for broadcast); the
# operators' io module writes them under this name.
SUBPARTITION_FOLDER = "__sub"

# Largest slice one answer carries: bounded memory on both sides, well under the
# default pekko.framesize (10 MiB).
MAX_CHUNK_BYTES = 4 << 20

# Where a consumer keeps the partitions it fetched, under its own data directory (one
# folder per attempt, removed when the attempt ends).
FETCHED_FOLDER = "_fetched"

_RESULT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
# A file inside a partition: at most chunk/folder/file, plain names only.
_FILE_NAME = re.compile(r"[A-Za-z0-9_=][A-Za-z0-9_.=\-]{0,200}(/[A-Za-z0-9_=][A-Za-z0-9_.=\-]{0,200}){0,2}")


class InvalidPartitionRequest(ValueError):
    """A request names something that cannot be a partition or one of its files."""


class PartitionUnreachableError(PartitionNotFoundError):
    """A finished partition cannot be fetched from the TaskManager that produced it
    (the TaskManager is gone, or no longer has it): its producer must run again
    (Flink's PartitionNotFoundException, which region failover answers that way)."""

    def __init__(self, partition_id: str, data_address: str, what: str) -> None:
        FileNotFoundError.__init__(
            self,
            f"result partition {partition_id} cannot be fetched from the TaskManager that produced it "
            f"({data_address}): {what}. Its producer runs again.",
        )
        self.partition_id = partition_id
        self.data_address = data_address


def serving_mode(configured: str, data_dir: str) -> str:
    """`network` or `shared` for a TaskManager with this data directory."""
    mode = (configured or AUTO).strip().lower()
    if mode not in SERVING_MODES:
        raise ValueError(
            f"taskmanager.network.partition-serving must be one of {', '.join(SERVING_MODES)}, not {configured!r}"
        )
    if mode == AUTO:
        return NETWORK if is_local(data_dir) else SHARED
    if mode == NETWORK and not is_local(data_dir):
        raise ValueError(
            f"taskmanager.network.partition-serving: network serves partitions from a local io.tmp.dirs, "
            f"but io.tmp.dirs is {data_dir!r}; use 'shared' for Hadoop URIs"
        )
    return mode


@dataclass(frozen=True)
class PartitionKey:
    """One subpartition of one partition, as a consumer names it."""

    data_namespace: str
    result_id: str
    partition_number: int
    subpartition_index: int
    broadcast: bool = False

    def validate(self) -> None:
        try:
            validate_namespace(self.data_namespace)
        except ValueError as exc:
            raise InvalidPartitionRequest(str(exc)) from None
        if not _RESULT_ID.fullmatch(self.result_id):
            raise InvalidPartitionRequest(f"{self.result_id!r} is not a result id")
        if self.partition_number < 0 or self.subpartition_index < 0:
            raise InvalidPartitionRequest("partition and subpartition numbers are never negative")

    @property
    def partition_id(self) -> str:
        return f"{self.result_id}#{self.partition_number}"

    def local_dir(self, data_dir: str) -> Path:
        return Path(local_path(partition_dir(data_dir, self.data_namespace, self.result_id, self.partition_number)))


def committed_by(location: str, producer: str) -> bool:
    """Whether the partition at `location` is visible here, committed by `producer`
    (the attempt the JobManager knows finished it): a data directory this TaskManager
    shares with the producer's, where no fetch is needed. An older attempt's copy
    (this TaskManager ran the producer before a restart) is not."""
    if not producer or not is_local(location):
        return False
    try:
        manifest = json.loads((Path(local_path(location)) / PARTITION_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("producer") == producer


def subpartition_files(data_dir: str, key: PartitionKey) -> dict[str, int]:
    """The files (relative name -> size) a consumer of `key` needs from the partition
    committed under `data_dir`: its manifests and the data of its subpartition.
    PartitionNotFoundError when the partition is not (or not completely) there."""
    key.validate()
    location = key.local_dir(data_dir)
    manifest_path = location / PARTITION_MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        what = "it does not exist" if not location.is_dir() else f"{PARTITION_MANIFEST} is missing"
        raise PartitionNotFoundError(key.result_id, str(location), what) from None
    files = {PARTITION_MANIFEST: manifest_path.stat().st_size}
    if "records" in manifest:  # JSON lines: one file per subpartition, absent when empty
        name = f"{key.subpartition_index}.jsonl"
        if (location / name).is_file():
            files[name] = (location / name).stat().st_size
        return files
    folder = f"{SUBPARTITION_FOLDER}={'all' if key.broadcast else key.subpartition_index}"
    for chunk in manifest.get("chunks", []):
        for name, size in _chunk_files(location, chunk, key.result_id).items():
            if name == CHUNK_MANIFEST or name.rpartition("/")[0] == folder:
                files[f"{chunk}/{name}"] = size
    return files


def _chunk_files(location: Path, chunk: str, result_id: str) -> dict[str, int]:
    """A committed chunk's manifest and the files it lists (names inside the chunk)."""
    chunk_manifest = location / chunk / CHUNK_MANIFEST
    try:
        listed = json.loads(chunk_manifest.read_text(encoding="utf-8"))["files"]
    except FileNotFoundError:
        raise PartitionNotFoundError(result_id, str(location), f"chunk {chunk} has no manifest") from None
    return {CHUNK_MANIFEST: chunk_manifest.stat().st_size, **listed}


def committed_entry_files(data_dir: str, key: PartitionKey) -> dict[str, int]:
    """Every committed file of the partition `key` (relative name -> size), whole chunks
    at a time: what a savepoint copies. A running producer's partition has only the
    chunks of its completed splits (no partition manifest yet); in-progress chunks
    (hidden names) and the partition's own manifest are left out, as the JobManager's
    listing of a local partition leaves them out (checkpoint/progress.py).
    PartitionNotFoundError when there is no such partition here."""
    key.validate()
    location = key.local_dir(data_dir)
    if not location.is_dir():
        raise PartitionNotFoundError(key.result_id, str(location), "it does not exist")
    files: dict[str, int] = {}
    for entry in sorted(location.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_file():  # a JSON-lines subpartition
            files[entry.name] = entry.stat().st_size
            continue
        for name, size in _chunk_files(location, entry.name, key.result_id).items():
            files[f"{entry.name}/{name}"] = size
    return files


def partition_file(data_dir: str, key: PartitionKey, name: str) -> Path:
    """The file `name` (as subpartition_files lists it) of the partition `key`."""
    key.validate()
    if not is_plain_name(name):
        raise InvalidPartitionRequest(f"{name!r} is not a file of a partition")
    return key.local_dir(data_dir) / name


def is_plain_name(name: str) -> bool:
    """A name inside a partition (at most chunk/folder/file), never leading out of it."""
    return bool(_FILE_NAME.fullmatch(name)) and not any(part in ("", ".", "..") for part in name.split("/"))


def read_slice(path: Path, offset: int, max_bytes: int) -> tuple[bytes, int]:
    """At most `max_bytes` (and MAX_CHUNK_BYTES) of `path` from `offset`; and its size."""
    if offset < 0:
        raise InvalidPartitionRequest("offsets are never negative")
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        file.seek(offset)
        return file.read(max(0, min(max_bytes, MAX_CHUNK_BYTES))), size


def fetched_dir(data_dir: str, data_namespace: str, execution_id: str) -> Path:
    """Where one consumer attempt keeps the partitions it fetched. Under the job's
    namespace, so ReleasePartitions removes what an attempt that died left behind."""
    return Path(local_path(data_dir)) / data_namespace / FETCHED_FOLDER / execution_id


def fetched_partition_dir(base: Path, key: PartitionKey) -> Path:
    return base / key.result_id / str(key.partition_number)


def remove_fetched(base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
