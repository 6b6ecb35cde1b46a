"""The `hashmap` state backend: state in a dict in memory, snapshotted to one file.

Snapshot file (`<directory>/hashmap-state.bin`):

    header  magic b"FLRTHMAP" | format_version u16 | entries u64 | payload bytes u64 | crc32 u32
    payload msgpack map {key bytes: value bytes} (each itself msgpack, see base.py)

The header makes the file self-contained: a restore detects truncation and corruption
from the file alone, and the handle's checksum must match the header's, so a handle
never restores some other snapshot's file.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from flink_runtime.checkpoint.state.base import (
    FORMAT_VERSION,
    StateBackendClosedError,
    StateRestoreError,
    check_handle,
    checksum_text,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    make_handle,
    merged_value,
    write_file_atomically,
)

STATE_FILE = "hashmap-state.bin"
MAGIC = b"FLRTHMAP"
HEADER = struct.Struct("<8sHQQI")

_payload_decoder = msgspec.msgpack.Decoder(dict[bytes, bytes])


class HashMapStateBackend:
    kind = "hashmap"

    def __init__(self, entries: dict[bytes, bytes] | None = None) -> None:
        self._entries: dict[bytes, bytes] = {} if entries is None else entries
        self._closed = False

    def get(self, key: Any) -> Any | None:
        self._check_open()
        data = self._entries.get(encode_key(key))
        return None if data is None else decode_value(data)

    def put(self, key: Any, value: Any) -> None:
        self._check_open()
        self._entries[encode_key(key)] = encode_value(value)

    def merge(self, key: Any, value: Any, merge_fn: Callable[[Any, Any], Any]) -> None:
        self._check_open()
        encoded = encode_key(key)
        self._entries[encoded] = merged_value(self._entries.get(encoded), value, merge_fn)

    def items(self) -> Iterator[tuple[tuple, Any]]:
        self._check_open()
        # A copy, so the caller may write to the backend while iterating.
        for key, value in list(self._entries.items()):
            yield decode_key(key), decode_value(value)

    def __len__(self) -> int:
        return len(self._entries)

    def snapshot(self, directory: str) -> dict:
        self._check_open()
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, STATE_FILE)
        if os.path.exists(path):
            raise FileExistsError(f"{path} already holds a state snapshot")
        # Encoding the dict runs without releasing the GIL, so it is a point-in-time copy.
        payload = msgspec.msgpack.encode(self._entries)
        checksum = zlib.crc32(payload)
        header = HEADER.pack(MAGIC, FORMAT_VERSION, len(self._entries), len(payload), checksum)
        size = write_file_atomically(path, [header, payload])
        return make_handle(self.kind, directory, len(self._entries), size, checksum)

    def close(self) -> None:
        self._entries = {}
        self._closed = True

    def __enter__(self) -> HashMapStateBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HashMapStateBackend(entries={len(self._entries)}{', closed' if self._closed else ''})"

    def _check_open(self) -> None:
        if self._closed:
            raise StateBackendClosedError("the hashmap state backend is closed")


def restore_hashmap(handle: dict) -> HashMapStateBackend:
    path = os.path.join(check_handle(handle, HashMapStateBackend.kind), STATE_FILE)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        raise StateRestoreError(f"hashmap state file {path} is missing") from None

    if len(data) < HEADER.size:
        raise StateRestoreError(f"hashmap state file {path} is truncated: {len(data)} bytes, shorter than its header")
    magic, version, entries, payload_size, checksum = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise StateRestoreError(f"{path} is not a hashmap state file (magic {magic!r}, expected {MAGIC!r})")
    if version != FORMAT_VERSION:
        raise StateRestoreError(
            f"hashmap state file {path} has format_version {version}; this runtime reads {FORMAT_VERSION}"
        )
    payload = memoryview(data)[HEADER.size :]
    if len(payload) != payload_size:
        what = "truncated" if len(payload) < payload_size else "longer than its header says"
        raise StateRestoreError(
            f"hashmap state file {path} is {what}: the header gives {payload_size} payload bytes, "
            f"the file holds {len(payload)}"
        )
    if checksum_text(checksum) != handle["checksum"]:
        raise StateRestoreError(
            f"hashmap state file {path} is not the snapshot of this handle: "
            f"its header checksum is {checksum_text(checksum)}, the handle's {handle['checksum']}"
        )
    if zlib.crc32(payload) != checksum:
        raise StateRestoreError(f"hashmap state file {path} is corrupt: the payload does not match its crc32")
    try:
        state = _payload_decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise StateRestoreError(f"hashmap state file {path} holds corrupt msgpack: {exc}") from None
    if len(state) != entries:
        raise StateRestoreError(f"hashmap state file {path} holds {len(state)} entries, its header says {entries}")
    return HashMapStateBackend(state)
