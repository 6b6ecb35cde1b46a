"""What a task runs: an AbstractInvokable, and the Environment it sees.

As in Flink, a JobVertex names the class its subtasks run. A TaskManager
instantiates it in the task's own thread with an Environment (its inputs, outputs,
configuration and input splits) and calls `invoke()`. On the JobManager, before any
task runs, `prepare_on_master()` enumerates a vertex's input splits and may check
its plan (a failure there fails the submission); when the job ends,
`on_job_terminal()` publishes or discards what the vertex wrote (two-phase sinks).

Names: a built-in short name (see BUILTIN_INVOKABLES) or "package.module:ClassName".
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from flink_runtime.io.metrics import NO_IO, IOMetrics
from flink_runtime.security.paths import AllowedDirectories
from flink_runtime.security.secret_store import SecretStore

if TYPE_CHECKING:
    from flink_runtime.configuration import Configuration
    from flink_runtime.executiongraph.states import JobStatus
    from flink_runtime.io.partitions import InputGate, ResultPartitionWriter
    from flink_runtime.io.splits import InputSplit
    from flink_runtime.jobgraph.jobgraph import JobVertex
    from flink_runtime.rpc.messages import InputGateDeploymentDescriptor, ResultPartitionDeploymentDescriptor

# Short names for the invokables shipped with the runtime.
BUILTIN_INVOKABLES: dict[str, str] = {
    "noop": "flink_runtime.operators.builtin:NoOpInvokable",
    "sleep": "flink_runtime.operators.builtin:SleepInvokable",
    "fail": "flink_runtime.operators.builtin:FailingInvokable",
    "number-source": "flink_runtime.operators.builtin:NumberSource",
    "modulo-sum": "flink_runtime.operators.builtin:ModuloSum",
    "collect-sink": "flink_runtime.operators.builtin:CollectSink",
    "spark": "flink_runtime.operators.spark.task:SparkTask",
}


# Vertex config key: the split numbers this subtask's earlier attempts completed.
COMPLETED_SPLITS_KEY = "__completed_splits__"


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
    # Blocks the task thread until the JobManager answers RequestNextInputSplit; the
    # argument reports the previous split as completed (its output committed).
    next_input_split: Callable[[int | None], InputSplit | None] = lambda completed=None: None
    cancelled: threading.Event = field(default_factory=threading.Event)
    execution_id: str = ""
    slot_index: int = 0
    data_namespace: str = ""
    data_dir: str = ""
    # The raw descriptors, for invokables that write their own partitions (Spark).
    produced_partitions: list[ResultPartitionDeploymentDescriptor] = field(default_factory=list)
    input_gates: list[InputGateDeploymentDescriptor] = field(default_factory=list)
    # The TaskManager's SparkSession, started on first call.
    spark: Callable[[], Any] = lambda: None
    # What the invokable read and wrote, reported to the JobManager with the task's final
    # state: add to it (`environment.io_metrics += IOMetrics(records_out=n)`). The Task
    # adds what went through `inputs` and `outputs` (the JSON-lines partitions) and the
    # busy and idle times itself; an invokable that writes its own partitions counts those.
    io_metrics: IOMetrics = NO_IO
    # security.allowed-directories, the JobManager's and this TaskManager's: checked again
    # where files are opened or committed (a link may have appeared since submit).
    allowed_directories: AllowedDirectories = field(default_factory=AllowedDirectories)
    # Resolves the secret://<name> references of the task's config (security.secrets.dir of
    # this TaskManager, then its environment): secrets never travel in the job graph.
    secrets: SecretStore = field(default_factory=SecretStore)

    def input_splits(
        self, commits_per_split: bool = False, on_confirmed: Callable[[], None] | None = None
    ) -> Iterator[InputSplit]:
        """Pull splits one at a time until none is left (or the task is cancelled).

        With `commits_per_split`, the caller has committed a split's output by the time
        it asks for the next one, and the JobManager is told so: a restarted subtask
        then never redoes that split.

        `on_confirmed` runs once the JobManager answered the first request (before the
        first split is yielded, or before returning when there is none): only then is
        this attempt known to be its subtask's current one. A superseded attempt whose
        SubmitTask arrived late is refused there (an RpcException), and must not touch
        what the current attempt of its subtask committed.
        """
        completed: int | None = None
        confirmed = on_confirmed is None
        while not self.cancelled.is_set():
            split = self.next_input_split(completed)
            if not confirmed:
                confirmed = True
                on_confirmed()  # type: ignore[misc]
            if split is None:
                return
            yield split
            completed = split.split_number if commits_per_split else None

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise TaskCancelledError(f"{self.task_name} was cancelled")


@dataclass
class MasterContext:
    """What `prepare_on_master` / `on_job_terminal` may use on the JobManager."""

    job_id: str
    job_name: str
    config: Configuration
    # The JobManager's SparkSession (for plan checks and Hadoop paths), started on first call.
    spark: Callable[[], Any] = lambda: None
    # Resolves a Spark vertex's plan (config, input schemas, files) -> (resolved, output
    # schema), as operators/spark/plan.py resolve_vertex does with `spark`: the planner's
    # answers from its plan cache (planner/plan_cache.py) or asks a TaskManager first
    # (planner/remote_plan.py). None: resolve_vertex with `spark`.
    plan_resolver: Callable[[dict[str, Any], list[Any], list[str]], tuple[dict[str, Any], str]] | None = None
    # Restoring from a savepoint: per vertex, what it recorded (checkpoint.metadata.VertexProgress).
    restored: dict[str, Any] = field(default_factory=dict)
    data_namespace: str = ""
    # The job published output before (an earlier round, or a stop that ended in a failed
    # savepoint and let the job go on): its sinks add to or replace that, never refuse it.
    continuation: bool = False
    # on_job_terminal(FINISHED) of a job that runs in rounds (a continuous job): a run of
    # it recovered after a JobManager restart must know its sinks hold its own output.
    more_rounds: bool = False


@dataclass
class Prepared:
    """The result of preparing one vertex on the JobManager."""

    splits: list[InputSplit] = field(default_factory=list)
    # Merged into the vertex config its tasks receive.
    config: dict[str, Any] = field(default_factory=dict)
    # Handed to the consumers' prepare_on_master (e.g. the vertex's output schema).
    output: Any = None
    # A continuous source: look for new input this often (seconds) once a round is done.
    monitor_interval: float | None = None
    # Where the vertex stages output until the job ends, a folder per data namespace
    # (`<output_staging_dir>/<namespace>`: each run and round its own); its checkpoints
    # record the committed part. Filled in by the planner from output_staging_dir.
    output_staging_dir: str | None = None
    # After a stop, this vertex reads its inputs' whole output again (a join): the
    # stop's savepoint keeps what they produced so far ...
    rereads_inputs_after_stop: bool = False
    # ... unless that producer emits again everything it ever read (a keyed final
    # aggregate, whose state carries what it read before the stop).
    reemits_all_it_read: bool = False


class AbstractInvokable:
    """Base of everything a task runs."""

    # False: the Task hands the invokable JSON-lines writers (environment.outputs) and
    # commits them. True: the invokable writes and commits its produced partitions
    # itself, under io.partitions.partition_dir(data_dir, data_namespace, ...), as
    # chunks it renames into place (io.partitions.chunk_dirs); SparkTask does.
    writes_own_partitions: ClassVar[bool] = False

    def __init__(self, environment: Environment) -> None:
        self.environment = environment

    @classmethod
    def create_input_splits(cls, config: dict[str, Any], parallelism: int) -> list[InputSplit]:
        """Source vertices return their splits (called by the default prepare_on_master)."""
        return []

    @classmethod
    def prepare_on_master(cls, vertex: JobVertex, inputs: list[Any], context: MasterContext) -> Prepared:
        """Run on the JobManager at job start, producers first; `inputs` are the
        `Prepared.output` of the vertices feeding this one, in input order. Raise
        ValueError with a clear message to refuse the job."""
        return Prepared(splits=cls.create_input_splits(vertex.config, vertex.parallelism))

    @classmethod
    def output_staging_dir(cls, vertex: JobVertex) -> str | None:
        """Where the vertex stages output until the job ends, in a folder per data
        namespace (checkpoints record its committed part); None: it stages nothing."""
        return None

    @classmethod
    def on_job_terminal(cls, vertex: JobVertex, prepared: Prepared, context: MasterContext, status: JobStatus) -> None:
        """Run on the JobManager when every subtask has finished (status FINISHED, before
        the job is declared FINISHED; raising fails the job) or the job failed or was
        cancelled (clean up)."""

    @classmethod
    def on_job_gone(cls, vertex: JobVertex, prepared: Prepared, context: MasterContext) -> None:
        """Run on the JobManager once the job's end is stored (no JobManager recovers it
        any more): forget what only a recovery needed."""

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


def builtin_invokable(name: str) -> type[AbstractInvokable] | None:
    """The class of a built-in invokable name; None for a job's own class path."""
    return resolve_invokable(name) if name in BUILTIN_INVOKABLES else None


def invokable_exists(name: str) -> bool:
    """For JobGraph validation: False for an unknown short name; for a class path,
    True or InvokableNotFound saying why it cannot be imported."""
    if ":" not in name:
        return name in BUILTIN_INVOKABLES
    resolve_invokable(name)
    return True
