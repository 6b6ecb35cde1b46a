"""What a task runs: an AbstractInvokable, and the Environment it sees.

As in Flink, a JobVertex names the class its subtasks run. A TaskManager
instantiates it in the task's own thread with an Environment (its inputs, outputs,
configuration and input splits) and calls `invoke()`; the JobManager calls
`create_input_splits()` once at job start for source vertices.

Names: a built-in short name (see BUILTIN_INVOKABLES) or "package.module:ClassName".
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flink_runtime.io.partitions import InputGate, ResultPartitionWriter
    from flink_runtime.scheduler.split_assigner import InputSplit

# Short names for the invokables shipped with the runtime.
BUILTIN_INVOKABLES: dict[str, str] = {
    "noop": "flink_runtime.operators.builtin:NoOpInvokable",
    "sleep": "flink_runtime.operators.builtin:SleepInvokable",
    "fail": "flink_runtime.operators.builtin:FailingInvokable",
    "number-source": "flink_runtime.operators.builtin:NumberSource",
    "modulo-sum": "flink_runtime.operators.builtin:ModuloSum",
    "collect-sink": "flink_runtime.operators.builtin:CollectSink",
}


class InvokableNotFound(LookupError):
    pass


class TaskCancelledError(Exception):
    """Raised inside a task thread to stop it; the task then reports CANCELED."""


@dataclass
class Environment:
    """Everything a running subtask may touch."""

    job_id: str
    vertex_id: str
    task_name: str
    subtask_index: int
    parallelism: int
    attempt_number: int
    config: dict[str, Any]
    job_config: dict[str, Any]
    outputs: list[ResultPartitionWriter] = field(default_factory=list)
    inputs: list[InputGate] = field(default_factory=list)
    # Blocks the task thread until the JobManager answers RequestNextInputSplit.
    next_input_split: Callable[[], InputSplit | None] = lambda: None
    cancelled: threading.Event = field(default_factory=threading.Event)

    def input_splits(self) -> Iterator[InputSplit]:
        """Pull splits one at a time until none is left (or the task is cancelled)."""
        while not self.cancelled.is_set():
            split = self.next_input_split()
            if split is None:
                return
            yield split

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise TaskCancelledError(f"{self.task_name} was cancelled")


class AbstractInvokable:
    """Base of everything a task runs."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment

    @classmethod
    def create_input_splits(cls, config: dict[str, Any], parallelism: int) -> list[InputSplit]:
        """Run on the JobManager at job start; source vertices return their splits."""
        return []

    def invoke(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        """Called from another thread. The default relies on `environment.cancelled`."""


def resolve_invokable(name: str) -> type[AbstractInvokable]:
    """Import the class a vertex names; InvokableNotFound says why it cannot."""
    path = BUILTIN_INVOKABLES.get(name, name)
    module_name, sep, class_name = path.partition(":")
    if not sep or not module_name or not class_name:
        raise InvokableNotFound(
            f"unknown invokable {name!r}: use a built-in name ({', '.join(sorted(BUILTIN_INVOKABLES))}) "
            "or 'package.module:ClassName'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvokableNotFound(f"invokable {name!r}: cannot import module {module_name!r}: {exc}") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, AbstractInvokable)):
        raise InvokableNotFound(
            f"invokable {name!r}: {module_name} has no AbstractInvokable subclass named {class_name!r}"
        )
    return cls


def invokable_exists(name: str) -> bool:
    """For JobGraph validation: False for an unknown short name; for a class path,
    True or InvokableNotFound saying why it cannot be imported."""
    if ":" not in name:
        return name in BUILTIN_INVOKABLES
    resolve_invokable(name)
    return True
