"""Choosing a backend from `state.backend.type`, and restoring one from a snapshot handle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flink_runtime.checkpoint.state.base import BACKEND_KINDS, KeyedStateBackend, StateRestoreError
from flink_runtime.checkpoint.state.hashmap import HashMapStateBackend, restore_hashmap

# Flink's names before `hashmap` existed; both kept state on the heap.
ALIASES = {"filesystem": "hashmap", "jobmanager": "hashmap"}


def backend_kind(kind: str) -> str:
    """The backend a `state.backend.type` value names: "hashmap" or "rocksdb"."""
    name = str(kind).strip().lower()
    name = ALIASES.get(name, name)
    if name not in BACKEND_KINDS:
        accepted = ", ".join([*BACKEND_KINDS, *ALIASES])
        raise ValueError(f"state.backend.type {kind!r} is not a state backend; accepted values: {accepted}")
    return name


def create_state_backend(kind: str, local_dir: str) -> KeyedStateBackend:
    """An empty backend; `local_dir` is where rocksdb keeps its working DB (hashmap ignores it)."""
    if backend_kind(kind) == "rocksdb":
        from flink_runtime.checkpoint.state.rocksdb import RocksDBStateBackend, new_working_dir

        return RocksDBStateBackend(new_working_dir(local_dir))
    return HashMapStateBackend()


def restore_state_backend(handle: Any, local_dir: str) -> KeyedStateBackend:
    """A backend of the snapshot's kind holding the snapshot's content.

    Raises StateRestoreError, naming the file and what is wrong with it, for a snapshot
    that is missing, truncated, corrupt or of another format_version.
    """
    backend = handle.get("backend") if isinstance(handle, Mapping) else None
    if backend == "hashmap":
        return restore_hashmap(handle)
    if backend == "rocksdb":
        from flink_runtime.checkpoint.state.rocksdb import restore_rocksdb

        return restore_rocksdb(handle, local_dir)
    raise StateRestoreError(f"state snapshot handle names no known backend ({', '.join(BACKEND_KINDS)}): {handle!r}")
