"""Partitions only their TaskManager holds, as a savepoint lists and copies them.

With `taskmanager.network.partition-serving: network` a finished partition (and the
chunks of a running producer's completed splits) lives in its TaskManager's own
`io.tmp.dirs`, which the JobManager usually cannot see. A savepoint must still hold
those chunks, or a job resumed from it would count the producer as done and never
read what it produced. So the JobManager asks the serving TaskManager, over the RPC
the consumers use, which chunks the partition has (RequestPartitionFiles) and copies
them into the savepoint one bounded slice at a time (RequestPartitionFile).

Until they are copied, such chunks are named in the progress by a locator,
``served:["<rpc address>", "<namespace>", "<result id>", <partition>, "<chunk>"]``,
never a path: copy_into (metadata.py) hands every locator back here. A checkpoint
(which copies nothing) cannot refer to them at all; checkpoint/committed_chunks.py leaves the
work that produced them out of it instead, to be done again after a restore.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path

from flink_runtime.io import filesystem
from flink_runtime.io import partition_files as pf
from flink_runtime.io.partitions import PartitionNotFoundError
from flink_runtime.rpc.messages import PartitionFiles, RequestPartitionFiles
from flink_runtime.shuffle.partition_client import Ask, answer, fetch_files

log = logging.getLogger(__name__)

SERVED_PREFIX = "served:"


def is_served(path: str) -> bool:
    return path.startswith(SERVED_PREFIX)


def served_chunk_name(locator: str) -> str:
    return str(json.loads(locator[len(SERVED_PREFIX) :])[4])


class ServedPartitions:
    """One savepoint's view of the partitions TaskManagers serve (used from one worker
    thread): what chunks they have, and copying them."""

    def __init__(self, ask: Ask, data_namespace: str) -> None:
        self._ask = ask
        self._namespace = data_namespace
        # (address, result id, partition) -> the files listed for it (name -> size)
        self._listed: dict[tuple[str, str, int], dict[str, int]] = {}

    def chunks(self, address: str, result_id: str, partition_number: int) -> list[tuple[str, str]] | None:
        """(chunk name, locator) of every committed chunk of the partition, or None when
        its TaskManager cannot say (gone, silent, or without the partition)."""
        key = pf.PartitionKey(self._namespace, result_id, partition_number, 0)
        request = RequestPartitionFiles(
            data_namespace=self._namespace, result_id=result_id, partition_number=partition_number
        )
        try:
            listed = answer(self._ask, address, key, request, PartitionFiles)
        except (PartitionNotFoundError, ValueError) as exc:
            log.warning("Cannot list partition %s at %s for a savepoint: %s", key.partition_id, address, exc)
            return None
        assert isinstance(listed, PartitionFiles)
        self._listed[(address, result_id, partition_number)] = listed.files
        names = sorted({name.split("/", 1)[0] for name in listed.files})
        return [(name, _locator(address, self._namespace, result_id, partition_number, name)) for name in names]

    def fetch(self, locator: str, target: str) -> None:
        """Copy the chunk `locator` names to `target` (its path in the savepoint).
        PartitionUnreachableError when its TaskManager no longer answers or has it."""
        address, namespace, result_id, partition_number, chunk = json.loads(locator[len(SERVED_PREFIX) :])
        key = pf.PartitionKey(namespace, result_id, partition_number, 0)
        listed = self._listed.get((address, result_id, partition_number), {})
        files = {name: size for name, size in listed.items() if name == chunk or name.startswith(chunk + "/")}
        if not files:  # never an empty copy standing in for a chunk
            raise ValueError(f"chunk {chunk} of partition {key.partition_id} was not listed by this savepoint")
        # Names are relative to the partition ("<chunk>/..."): fetched into the folder
        # that holds `target`, they land at `target`.
        if filesystem.is_local(target):
            fetch_files(self._ask, address, key, files, Path(filesystem.local_path(target)).parent)
            return
        scratch = Path(tempfile.mkdtemp(prefix="flink-runtime-savepoint-"))
        try:  # a Hadoop URI: through a local copy, one chunk at a time
            fetch_files(self._ask, address, key, files, scratch)
            filesystem.filesystem_for(target).copy_tree(str(scratch / chunk), target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _locator(address: str, namespace: str, result_id: str, partition_number: int, chunk: str) -> str:
    return SERVED_PREFIX + json.dumps([address, namespace, result_id, partition_number, chunk])
