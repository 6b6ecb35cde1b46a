"""Result partitions: served by their producer's TaskManager to consumers elsewhere and to
savepoints (taskmanager/partition_service.py), released when their job or round ends.
"""

from __future__ import annotations

from flink_runtime.rpc.messages.base import Message


class ReleasePartitions(Message):
    """The job ended (or a continuous job's round did): its result partitions may be deleted."""

    job_id: str
    # Only this namespace (`<job id>/run-<8 hex>`, `<job id>/round-<n>`); empty: everything
    # of the job. Never a path: the TaskManager refuses anything else.
    data_namespace: str = ""
    jobmanager_id: str = ""  # the sender's fencing token, as CancelTask's


class RequestSubpartitionFiles(Message):
    """TM -> TM: the files a consumer of one subpartition needs (names and sizes)."""

    data_namespace: str
    result_id: str
    partition_number: int
    subpartition_index: int
    broadcast: bool = False


class SubpartitionFiles(Message):
    files: dict[str, int] = {}  # name inside the partition -> size in bytes


class RequestPartitionFiles(Message):
    """JM -> TM: every committed file of one partition (a savepoint copies them)."""

    data_namespace: str
    result_id: str
    partition_number: int


class PartitionFiles(Message):
    files: dict[str, int] = {}  # name inside the partition -> size in bytes


class RequestPartitionFile(Message):
    """TM/JM -> TM: at most `max_bytes` of one file that SubpartitionFiles or
    PartitionFiles named, from `offset`."""

    data_namespace: str
    result_id: str
    partition_number: int
    name: str
    offset: int = 0
    max_bytes: int = 4 << 20


class PartitionFileChunk(Message):
    name: str
    offset: int
    file_size: int
    data: bytes = b""


class PartitionRequestRefused(Message):
    # "not-found" (this TaskManager does not have it, or not completely) or "invalid".
    kind: str
    reason: str
