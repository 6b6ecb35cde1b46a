"""Keyed state backends for checkpoints and savepoints; the code lives in `checkpoint/state/`."""

from flink_runtime.checkpoint.state import (
    FORMAT_VERSION,
    HashMapStateBackend,
    KeyedStateBackend,
    StateBackendClosedError,
    StateRestoreError,
    backend_kind,
    create_state_backend,
    restore_state_backend,
)

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
