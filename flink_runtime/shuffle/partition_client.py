"""Asking a TaskManager that serves partitions (taskmanager/partition_service.py) for
files and copying them here, one bounded slice at a time (io/partition_files.py says
which files a request names). Memory stays bounded whatever the partition's size.

Whoever asks passes `ask`: a blocking call that sends a message to an RPC address and
returns the answer (raising RpcException when the TaskManager is gone or silent). The
copies are made on a worker thread, never in a mailbox.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from flink_runtime.io import partition_files as pf
from flink_runtime.io.partitions import PartitionNotFoundError
from flink_runtime.rpc.messages import Message, PartitionFileChunk, PartitionRequestRefused, RequestPartitionFile
from flink_runtime.rpc.service import RpcException

log = logging.getLogger(__name__)

# Asks a TaskManager (address, message) and waits for the answer; raises RpcException.
Ask = Callable[[str, Message], Message]


def fetch_files(ask: Ask, address: str, key: pf.PartitionKey, files: dict[str, int], target: Path) -> None:
    """Copy `files` (names as the serving TaskManager listed them, and their sizes) of
    the partition `key` from `address` into `target`, keeping their relative names.
    PartitionUnreachableError when the TaskManager is gone, no longer has a file, or a
    file changes while it is copied."""
    started = time.monotonic()
    for name, size in files.items():
        if not pf.is_plain_name(name):
            raise PartitionNotFoundError(key.result_id, address, f"its TaskManager named a file {name!r}")
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            offset = 0
            while offset < size:
                request = RequestPartitionFile(
                    data_namespace=key.data_namespace,
                    result_id=key.result_id,
                    partition_number=key.partition_number,
                    name=name,
                    offset=offset,
                    max_bytes=pf.MAX_CHUNK_BYTES,
                )
                chunk = answer(ask, address, key, request, PartitionFileChunk)
                if chunk.offset != offset or not chunk.data or chunk.file_size != size:
                    raise pf.PartitionUnreachableError(
                        key.partition_id, address, f"{name} changed while it was fetched ({chunk.file_size} bytes)"
                    )
                out.write(chunk.data)
                offset += len(chunk.data)
    log.info(
        "Fetched partition %s (%d files, %d bytes) from %s in %.3f s",
        key.partition_id,
        len(files),
        sum(files.values()),
        address,
        time.monotonic() - started,
    )


def answer(ask: Ask, address: str, key: pf.PartitionKey, request: Message, expected: type[Message]) -> Message:
    """`ask`, with every way it can go wrong turned into PartitionUnreachableError (the
    TaskManager is gone or lacks the partition) or ValueError (a request it refused as
    invalid: a bug on this side)."""
    try:
        reply = ask(address, request)
    except RpcException as exc:  # the TaskManager is gone or does not answer
        raise pf.PartitionUnreachableError(key.partition_id, address, f"{type(exc).__name__}: {exc}") from None
    if isinstance(reply, PartitionRequestRefused):
        if reply.kind == "invalid":
            raise ValueError(f"TaskManager {address} refused the request for {key.partition_id}: {reply.reason}")
        raise pf.PartitionUnreachableError(key.partition_id, address, reply.reason)
    if not isinstance(reply, expected):
        raise pf.PartitionUnreachableError(key.partition_id, address, f"unexpected answer {type(reply).__name__}")
    return reply
