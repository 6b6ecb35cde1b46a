"""The invokable contract under the name job libraries may import it by
(``flink_runtime.taskmanager.invokable``); it lives in flink_runtime.invokable (below
the TaskManager, the JobManager and the planner, which all use it)."""

from flink_runtime.invokable import (
    COMPLETED_SPLITS_KEY,
    AbstractInvokable,
    Environment,
    InvokableNotFound,
    MasterContext,
    Prepared,
    TaskCancelledError,
    builtin_invokable,
    invokable_exists,
    resolve_invokable,
)

__all__ = [
    "COMPLETED_SPLITS_KEY",
    "AbstractInvokable",
    "Environment",
    "InvokableNotFound",
    "MasterContext",
    "Prepared",
    "TaskCancelledError",
    "builtin_invokable",
    "invokable_exists",
    "resolve_invokable",
]
