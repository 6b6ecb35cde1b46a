"""The `rocksdb` state backend: state in RocksDB on local disk, snapshotted as DB files.

The working DB lives in `<local_dir>/rocksdb-<uuid>` and is removed by close(). A
snapshot is a RocksDB checkpoint (memtable flushed, SST files hard-linked when the
target is on the same file system, copied otherwise) plus a file list:

    <directory>/rocksdb/             the checkpoint, openable by RocksDB as it is
    <directory>/rocksdb-files.json   {"format_version", "entries", "files": {name: {"size", "crc32"}}}

RocksDB's own files say nothing about a deleted or truncated SST until a read reaches
it, so a restore checks every file against the list while copying it into a fresh
working dir, and names the file that is missing or damaged. The handle carries the
list's checksum. The list also carries the entry count, so a restore need not scan
the DB to answer len().

Writes skip RocksDB's write-ahead log, as Flink's RocksDB backend does: durability
comes from checkpoints, and a checkpoint flushes the memtable first.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import rocksdict

from flink_runtime.checkpoint.state.base import (
    FORMAT_VERSION,
    StateBackendClosedError,
    StateRestoreError,
    check_handle,
    checksum_text,
    copy_file_crc32,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    file_crc32,
    make_handle,
    merged_value,
    write_file_atomically,
)

DB_DIR = "rocksdb"
FILE_LIST = "rocksdb-files.json"


def _options() -> rocksdict.Options:
    # raw_mode: keys and values are our msgpack bytes, not rocksdict's pickles.
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    return options


def _write_options() -> rocksdict.WriteOptions:
    write_options = rocksdict.WriteOptions()
    write_options.disable_wal = True
    return write_options


def new_working_dir(local_dir: str) -> str:
    """A fresh, not yet existing dir for one backend's DB under `local_dir`."""
    os.makedirs(local_dir, exist_ok=True)
    return os.path.join(local_dir, f"rocksdb-{uuid.uuid4().hex}")


class RocksDBStateBackend:
    kind = "rocksdb"

    def __init__(self, working_dir: str, entries: int = 0) -> None:
        """Opens (creating if need be) the DB in `working_dir`, which holds `entries` keys;
        the backend owns the dir from now on."""
        self.working_dir = working_dir
        self._db = rocksdict.Rdict(working_dir, _options())
        self._db.set_write_options(_write_options())
        # RocksDB only estimates its key count; an exact len() costs a lookup per put.
        self._entries = entries
        self._closed = False

    def get(self, key: Any) -> Any | None:
        self._check_open()
        data = self._db.get(encode_key(key))
        return None if data is None else decode_value(data)

    def put(self, key: Any, value: Any) -> None:
        self._check_open()
        encoded = encode_key(key)
        if self._db.get(encoded) is None:
            self._entries += 1
        self._db.put(encoded, encode_value(value))

    def merge(self, key: Any, value: Any, merge_fn: Callable[[Any, Any], Any]) -> None:
        self._check_open()
        encoded = encode_key(key)
        old = self._db.get(encoded)
        if old is None:
            self._entries += 1
        self._db.put(encoded, merged_value(old, value, merge_fn))

    def items(self) -> Iterator[tuple[tuple, Any]]:
        self._check_open()
        # RocksDB iterates over an implicit snapshot taken when iteration starts.
        for key, value in self._db.items():
            yield decode_key(key), decode_value(value)

    def __len__(self) -> int:
        return self._entries

    def snapshot(self, directory: str) -> dict:
        self._check_open()
        os.makedirs(directory, exist_ok=True)
        db_dir = os.path.join(directory, DB_DIR)
        list_path = os.path.join(directory, FILE_LIST)
        if os.path.exists(db_dir) or os.path.exists(list_path):
            raise FileExistsError(f"{directory} already holds a rocksdb state snapshot")
        # RocksDB creates the checkpoint under a temporary name and renames it itself.
        rocksdict.Checkpoint(self._db).create_checkpoint(db_dir)
        files = {}
        for name in sorted(os.listdir(db_dir)):
            path = os.path.join(db_dir, name)
            files[name] = {"size": os.path.getsize(path), "crc32": file_crc32(path)}
        file_list = json.dumps(
            {"format_version": FORMAT_VERSION, "entries": self._entries, "files": files}, indent=1, sort_keys=True
        ).encode()
        list_size = write_file_atomically(list_path, [file_list])
        size = list_size + sum(file["size"] for file in files.values())
        return make_handle(self.kind, directory, self._entries, size, zlib.crc32(file_list))

    def close(self) -> None:
        """Close the DB and delete the working dir (snapshots stay: they are copies or links)."""
        if self._closed:
            return
        self._closed = True
        self._db.close()
        del self._db
        shutil.rmtree(self.working_dir, ignore_errors=True)

    def __enter__(self) -> RocksDBStateBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"RocksDBStateBackend({self.working_dir!r}, entries={self._entries}{state})"

    def _check_open(self) -> None:
        if self._closed:
            raise StateBackendClosedError(f"the rocksdb state backend in {self.working_dir} is closed")


def restore_rocksdb(handle: dict, local_dir: str) -> RocksDBStateBackend:
    directory = check_handle(handle, RocksDBStateBackend.kind)
    file_list = _read_file_list(directory, handle)
    db_dir = os.path.join(directory, DB_DIR)
    missing = sorted(name for name in file_list["files"] if not os.path.isfile(os.path.join(db_dir, name)))
    if missing:
        raise StateRestoreError(f"rocksdb state snapshot {db_dir} is missing RocksDB files: {', '.join(missing)}")

    working_dir = new_working_dir(local_dir)
    os.makedirs(working_dir)
    try:
        for name, expected in file_list["files"].items():
            source = os.path.join(db_dir, name)
            size, checksum = copy_file_crc32(source, os.path.join(working_dir, name))
            if size != expected["size"]:
                what = "truncated" if size < expected["size"] else "longer than recorded"
                raise StateRestoreError(
                    f"RocksDB file {source} is {what}: {size} bytes, the snapshot recorded {expected['size']}"
                )
            if checksum != expected["crc32"]:
                raise StateRestoreError(f"RocksDB file {source} is corrupt: its crc32 differs from the snapshot's")
        try:
            return RocksDBStateBackend(working_dir, entries=file_list["entries"])
        except Exception as exc:
            raise StateRestoreError(f"RocksDB cannot open the state snapshot {db_dir}: {exc}") from exc
    except BaseException:
        shutil.rmtree(working_dir, ignore_errors=True)
        raise


def _read_file_list(directory: str, handle: dict) -> dict:
    path = os.path.join(directory, FILE_LIST)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        raise StateRestoreError(f"rocksdb state snapshot file list {path} is missing") from None
    if checksum_text(zlib.crc32(data)) != handle["checksum"]:
        raise StateRestoreError(
            f"rocksdb state snapshot file list {path} is corrupt or not this handle's: "
            f"its checksum is {checksum_text(zlib.crc32(data))}, the handle's {handle['checksum']}"
        )
    file_list = json.loads(data)
    if file_list.get("format_version") != FORMAT_VERSION:
        raise StateRestoreError(
            f"rocksdb state snapshot {path} has format_version {file_list.get('format_version')!r}; "
            f"this runtime reads {FORMAT_VERSION}"
        )
    return file_list
