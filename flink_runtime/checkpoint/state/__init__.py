"""Keyed state backends (`state.backend.type`): `hashmap` in memory, `rocksdb` on local disk."""

from flink_runtime.checkpoint.state.base import (
    FORMAT_VERSION,
    KeyedStateBackend,
    StateBackendClosedError,
    StateRestoreError,
)
from flink_runtime.checkpoint.state.factory import backend_kind, create_state_backend, restore_state_backend
from flink_runtime.checkpoint.state.hashmap import HashMapStateBackend

__all__ = [
    "FORMAT_VERSION",
    "HashMapStateBackend",
    "KeyedStateBackend",
    "StateBackendClosedError",
    "StateRestoreError",
    "backend_kind",
    "create_state_backend",
    "restore_state_backend",
]
