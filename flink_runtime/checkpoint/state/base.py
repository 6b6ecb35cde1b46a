"""What every keyed state backend shares: the protocol, the errors, how keys and values
become bytes, and the snapshot handle.

Both backends keep keys and values as msgpack bytes. RocksDB has to; the hash map does
it too (Flink's heap backend keeps objects instead) because then the two behave alike:
`get` hands out a fresh decoded value that the caller may mutate without touching the
state, msgpack arrays come back as lists whichever backend is configured, and a
snapshot is a shallow copy of immutable bytes rather than a deep copy of objects.
"""

from __future__ import annotations

import os
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

import msgspec

FORMAT_VERSION = 1
BACKEND_KINDS = ("hashmap", "rocksdb")

# `order="deterministic"` sorts maps and sets inside a key, so equal keys encode to
# equal bytes; tuples and lists are both msgpack arrays, so (1, "a") == [1, "a"].
_key_encoder = msgspec.msgpack.Encoder(order="deterministic")
_key_decoder = msgspec.msgpack.Decoder(tuple)
_value_encoder = msgspec.msgpack.Encoder()
_value_decoder = msgspec.msgpack.Decoder()


class StateRestoreError(Exception):
    """A snapshot that cannot be restored: missing, truncated, corrupt or of another format."""


class StateBackendClosedError(RuntimeError):
    """The backend was used after close()."""


@runtime_checkable
class KeyedStateBackend(Protocol):
    """Keyed operator state: msgpack-able values under keys made of key column values.

    Not thread-safe. As in Flink's mailbox model, one task thread reads, writes and
    snapshots its backend; whoever triggers a checkpoint asks that thread to call
    snapshot() between records.
    """

    kind: str

    def get(self, key: Any) -> Any | None: ...

    def put(self, key: Any, value: Any) -> None: ...

    def merge(self, key: Any, value: Any, merge_fn: Callable[[Any, Any], Any]) -> None:
        """put(merge_fn(old, value)), or put(value) if the key has no value yet."""

    def items(self) -> Iterator[tuple[tuple, Any]]: ...

    def __len__(self) -> int: ...

    def snapshot(self, directory: str) -> dict:
        """Write a self-contained snapshot under `directory` and return its handle."""

    def close(self) -> None: ...


def encode_key(key: Any) -> bytes:
    """A key's canonical bytes. A scalar is a one-column key: 5 and (5,) are the same key.

    Types are kept apart as msgpack keeps them: 1, 1.0 and True are three keys.
    """
    if not isinstance(key, (tuple, list)):
        key = (key,)
    return _key_encoder.encode(key)


def decode_key(data: bytes) -> tuple:
    return _key_decoder.decode(data)


def encode_value(value: Any) -> bytes:
    return _value_encoder.encode(value)


def decode_value(data: bytes) -> Any:
    return _value_decoder.decode(data)


def merged_value(old: bytes | None, value: Any, merge_fn: Callable[[Any, Any], Any]) -> bytes:
    return encode_value(value if old is None else merge_fn(decode_value(old), value))


def make_handle(backend: str, directory: str, entries: int, size: int, checksum: int) -> dict:
    return {
        "backend": backend,
        "path": os.path.abspath(directory),
        "entries": entries,
        "bytes": size,
        "format_version": FORMAT_VERSION,
        "checksum": checksum_text(checksum),
    }


def check_handle(handle: Any, backend: str) -> str:
    """The snapshot directory named by a handle of `backend`; a StateRestoreError if the
    handle is not one this runtime can read."""
    if not isinstance(handle, Mapping):
        raise StateRestoreError(f"a state snapshot handle is a dict, got {type(handle).__name__}")
    missing = [field for field in ("backend", "path", "format_version", "checksum") if field not in handle]
    if missing:
        raise StateRestoreError(f"state snapshot handle lacks {', '.join(missing)}: {dict(handle)}")
    if handle["backend"] != backend:
        raise StateRestoreError(f"a {handle['backend']!r} snapshot handle given to the {backend} backend")
    if handle["format_version"] != FORMAT_VERSION:
        raise StateRestoreError(
            f"state snapshot {handle['path']} has format_version {handle['format_version']!r}; "
            f"this runtime reads format_version {FORMAT_VERSION}"
        )
    path = handle["path"]
    if not os.path.isdir(path):
        raise StateRestoreError(f"state snapshot directory {path} does not exist")
    return path


def checksum_text(checksum: int) -> str:
    return f"crc32:{checksum:08x}"


def write_file_atomically(path: str, chunks: Iterable[bytes]) -> int:
    """Write `chunks` to `path` via a temporary name, fsync and rename; returns the size.

    A crash leaves either no file or the whole file, never a torn one.
    """
    directory = os.path.dirname(path) or "."
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    size = 0
    try:
        with open(temporary, "wb") as file:
            for chunk in chunks:
                file.write(chunk)
                size += len(chunk)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    fsync_directory(directory)
    return size


def fsync_directory(directory: str) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def file_crc32(path: str, chunk_size: int = 1 << 20) -> int:
    checksum = 0
    with open(path, "rb") as file:
        while chunk := file.read(chunk_size):
            checksum = zlib.crc32(chunk, checksum)
    return checksum


def copy_file_crc32(source: str, target: str, chunk_size: int = 1 << 20) -> tuple[int, int]:
    """Copy `source` to `target`; returns (size, crc32) of what was copied, read once."""
    checksum = 0
    size = 0
    with open(source, "rb") as reader, open(target, "wb") as writer:
        while chunk := reader.read(chunk_size):
            checksum = zlib.crc32(chunk, checksum)
            size += len(chunk)
            writer.write(chunk)
    return size, checksum
