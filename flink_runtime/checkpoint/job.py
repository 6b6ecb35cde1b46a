"""What the checkpoint coordinator and the progress tracker need from the job they
serve: exactly this, so checkpoint/ never depends on the JobMaster (its JobCheckpointing
part, jobmanager/job_checkpoints.py, implements it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from flink_runtime.checkpoint.served_partitions import ServedPartitions
    from flink_runtime.configuration import Configuration
    from flink_runtime.executiongraph import ExecutionGraph, JobStatus
    from flink_runtime.jobgraph.jobgraph import JobGraph
    from flink_runtime.rpc.messages import Message
    from flink_runtime.scheduler.source_splits import SplitProgress


class CheckpointGateway(Protocol):
    """Timers, worker threads and RPC, all on the job's mailbox."""

    def schedule_once(self, delay: float, function: Callable[..., None], *args: Any) -> Any: ...
    def run_async(self, awaitable: Any, on_done: Callable[[Any, BaseException | None], None] | None = None) -> Any: ...
    def tell_task_manager(self, address: str, message: Message) -> None: ...
    def blocking_ask(self) -> Callable[[str, Message], Message]:
        """An ask to call from a worker thread (made in the mailbox)."""
        ...


class CheckpointedJob(Protocol):
    job_id: str
    name: str
    config: Configuration
    job_graph: JobGraph
    graph: ExecutionGraph | None
    status: JobStatus
    is_continuous: bool
    data_namespace: str
    gateway: CheckpointGateway

    @property
    def split_progress(self) -> dict[str, SplitProgress]:
        """Per source vertex: the splits completed (and by which subtask)."""
        ...

    def accepts_checkpoints(self) -> bool: ...

    def running_task_addresses(self) -> dict[str, str]:
        """Running executions and their TaskManagers' addresses: who must acknowledge."""
        ...

    def vertex_and_subtask(self, execution_id: str) -> tuple[str | None, int]: ...

    def checkpoint_completed(
        self, checkpoint_id: int, location: str, is_savepoint: bool, size: int, subsumed: list[str]
    ) -> None: ...

    def progress_view(
        self, checkpoint_id: int, is_savepoint: bool, terminal: bool, served: ServedPartitions | None
    ) -> Callable[[], Any]: ...

    def prepared_split_files(self, vertex_id: str) -> dict[int, list[str]]: ...

    def completed_files(self, vertex_id: str) -> set[str]: ...

    def partition_location(self, partition_id: str) -> str | None: ...

    def partition_address(self, partition_id: str) -> str:
        """The RPC address of the TaskManager holding the partition ('' when none does)."""
        ...

    def sink_staging_root(self, vertex_id: str) -> str | None: ...

    def inputs_needed_after_stop(self) -> set[str]:
        """Vertices whose output so far a stop's savepoint keeps (a join needs it again)."""
        ...
