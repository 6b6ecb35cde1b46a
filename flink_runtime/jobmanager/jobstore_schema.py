"""The job store's records and tables (see jobstore.py for the store itself).

`JobRecord` and `CheckpointRecord` are what the store hands out; the SQLAlchemy tables
are what it keeps them in. JSON columns are TEXT so that every database can hold them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import msgspec
from sqlalchemy import BigInteger, Boolean, Column, Double, ForeignKey, Index, Integer, MetaData, String, Table, Text

#: Globally terminal job statuses (JobStatus.is_globally_terminal); SUSPENDED is recoverable.
TERMINAL_STATUSES = frozenset({"FINISHED", "FAILED", "CANCELED"})
# 2: savepoint_requests, 3: recovery_attempts, 4: checkpoint_id_counters (create_all adds
# them to older stores; a job without a counter row continues after its stored checkpoints).
SCHEMA_VERSION = 4


@dataclass(frozen=True)
class CheckpointRecord:
    job_id: str
    checkpoint_id: int
    location: str
    is_savepoint: bool
    completed_at: float
    size_bytes: int
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    name: str
    job_graph_json: str
    status: str
    submitted_at: float
    updated_at: float  # timestamp of the last status change
    ended_at: float | None  # set once the status is globally terminal
    progress: dict[str, Any] = field(default_factory=dict)
    # An ended job's records (job_snapshots.py's JobSnapshot and ExceptionHistory; stores
    # written before hold the REST answers of the time): archived_jobs.py reads both.
    details: dict[str, Any] | None = None
    exceptions: dict[str, Any] | None = None
    latest_checkpoint: CheckpointRecord | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


# -- schema --------------------------------------------------------------------------------

schema_metadata = MetaData()

schema_version_table = Table("schema_version", schema_metadata, Column("version", Integer, primary_key=True))

jobs_table = Table(
    "jobs",
    schema_metadata,
    Column("job_id", String(128), primary_key=True),
    Column("name", Text, nullable=False),
    Column("job_graph_json", Text, nullable=False),
    Column("status", String(32), nullable=False),
    Column("submitted_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
    Column("ended_at", Double, nullable=True),
    Column("progress_json", Text, nullable=True),
    Column("details_json", Text, nullable=True),
    Column("exceptions_json", Text, nullable=True),
    Index("ix_jobs_status", "status"),
    Index("ix_jobs_ended_at", "ended_at"),
)

checkpoints_table = Table(
    "checkpoints",
    schema_metadata,
    Column("job_id", String(128), ForeignKey("jobs.job_id"), primary_key=True),
    Column("checkpoint_id", BigInteger, primary_key=True),
    Column("location", Text, nullable=False),
    Column("is_savepoint", Boolean, nullable=False),
    Column("completed_at", Double, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("metadata_json", Text, nullable=True),
)


# Savepoint and stop requests by trigger id, so GET /jobs/:id/savepoints/:triggerid still
# answers after a JobManager failover (with the outcome, or why there is none).
savepoint_requests_table = Table(
    "savepoint_requests",
    schema_metadata,
    Column("job_id", String(128), ForeignKey("jobs.job_id"), primary_key=True),
    Column("request_id", String(64), primary_key=True),
    Column("status_json", Text, nullable=False),
)


# How often each job's recovery was started without the job reaching RUNNING since:
# counted before a recovery starts, so a JobManager that dies recovering it still counts.
recovery_attempts_table = Table(
    "recovery_attempts",
    schema_metadata,
    Column("job_id", String(128), ForeignKey("jobs.job_id"), primary_key=True),
    Column("attempts", Integer, nullable=False),
)


# Flink's CheckpointIDCounter: every checkpoint id below next_id may have been triggered
# by some JobManager (ids are reserved in blocks before they are used); the next one
# continues from next_id.
checkpoint_id_counters_table = Table(
    "checkpoint_id_counters",
    schema_metadata,
    Column("job_id", String(128), ForeignKey("jobs.job_id"), primary_key=True),
    Column("next_id", BigInteger, nullable=False),
)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


_json_encoder = msgspec.json.Encoder()


def dumps_fast(value: Any) -> str:
    """`dumps` for large documents (builtins or msgspec Structs) of strings, numbers and
    finite floats (an archived job's records): the same JSON values, encoded several times
    faster (a Struct without msgspec.to_builtins first). Unlike json.dumps
    it writes a non-finite float as null and non-ASCII text as UTF-8; text it cannot
    encode as UTF-8 (a lone surrogate in an error message, say) gets json.dumps."""
    try:
        return _json_encoder.encode(value).decode()
    except (UnicodeEncodeError, TypeError, ValueError):
        return dumps(msgspec.to_builtins(value))


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def checkpoint_record(row: Any) -> CheckpointRecord:
    return CheckpointRecord(
        job_id=row.job_id,
        checkpoint_id=int(row.checkpoint_id),
        location=row.location,
        is_savepoint=bool(row.is_savepoint),
        completed_at=float(row.completed_at),
        size_bytes=int(row.size_bytes),
        metadata=loads(row.metadata_json) or {},
    )


def job_record(row: Any, latest: CheckpointRecord | None) -> JobRecord:
    return JobRecord(
        job_id=row.job_id,
        name=row.name,
        job_graph_json=row.job_graph_json,
        status=row.status,
        submitted_at=float(row.submitted_at),
        updated_at=float(row.updated_at),
        ended_at=None if row.ended_at is None else float(row.ended_at),
        progress=loads(row.progress_json) or {},
        details=loads(row.details_json),
        exceptions=loads(row.exceptions_json),
        latest_checkpoint=latest,
    )
