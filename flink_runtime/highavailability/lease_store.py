"""The leader lease: one row per cluster in the job store's database, as Flink's
Kubernetes HA keeps its leader in a ConfigMap lease.

    leader_lease(cluster_id PK, leader_id, token, rpc_address, rest_url, renewed_at)

`token` is the fencing token: it grows by one with every change of leader, so whoever
holds an older one knows it is deposed, and the job store refuses its writes
(jobmanager/jobstore.py checks the row in the same transaction as each write).
`renewed_at` is the DATABASE's clock (seconds since the epoch): hosts' clocks may
disagree, the database's is the one every contender reads. A lease is free when
`renewed_at` is older than the lease duration, or when its holder released it
(leader_id NULL) on a clean shutdown.

Every method is one short transaction. Taking a lease is a compare-and-set: the UPDATE
names the token it read and the expiry, so of two standbys only one wins (PostgreSQL
re-checks the WHERE clause on the row version it locks; SQLite writes one at a time).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, Column, Double, MetaData, String, Table, Text, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement
from sqlalchemy.types import Float

log = logging.getLogger(__name__)

lease_metadata = MetaData()

leader_lease_table = Table(
    "leader_lease",
    lease_metadata,
    Column("cluster_id", String(128), primary_key=True),
    Column("leader_id", String(128), nullable=True),  # NULL: released
    Column("token", BigInteger, nullable=False),
    Column("rpc_address", Text, nullable=False, default=""),
    Column("rest_url", Text, nullable=False, default=""),
    Column("renewed_at", Double, nullable=False),
)


class db_now(FunctionElement[float]):  # noqa: N801 - reads as the SQL function it is
    """The database server's current time in seconds since the epoch, as a float."""

    type = Float()
    inherit_cache = True


@compiles(db_now, "postgresql")
def _db_now_postgresql(element: Any, compiler: Any, **kw: Any) -> str:
    # clock_timestamp(), not now(): now() is the transaction's start.
    return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"


@compiles(db_now, "sqlite")
def _db_now_sqlite(element: Any, compiler: Any, **kw: Any) -> str:
    return "((julianday('now') - 2440587.5) * 86400.0)"


@compiles(db_now)
def _db_now_default(element: Any, compiler: Any, **kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM CURRENT_TIMESTAMP) AS DOUBLE PRECISION)"


@dataclass(frozen=True)
class LeaderLease:
    """The lease row as read, with the database's clock at that moment."""

    cluster_id: str
    leader_id: str | None
    token: int
    rpc_address: str
    rest_url: str
    renewed_at: float
    read_at: float  # the database's clock when the row was read

    def expired(self, lease_duration: float) -> bool:
        return self.leader_id is None or self.read_at - self.renewed_at > lease_duration

    def describe(self) -> str:
        return f"{self.leader_id} (fencing token {self.token}, rpc {self.rpc_address}, rest {self.rest_url or '-'})"


class LeaseStore:
    """The lease row of one cluster, through an SQLAlchemy engine (the job store's)."""

    def __init__(
        self, engine: Engine, cluster_id: str, write_options: dict[str, Any] | None = None, create_table: bool = True
    ) -> None:
        """write_options: execution options of write transactions (the job store's
        `jobstore_write`, which makes SQLite's BEGIN IMMEDIATE). create_table: False for
        a reader (leader_retrieval.py)."""
        self.engine = engine
        self.cluster_id = cluster_id
        self._write_options = write_options or {}
        if create_table:
            with self._write() as conn:
                lease_metadata.create_all(conn)

    def read(self) -> LeaderLease | None:
        with self.engine.connect() as conn, conn.begin():
            return self._read(conn)

    def try_acquire(
        self, contender_id: str, rpc_address: str, rest_url: str, lease_duration: float
    ) -> LeaderLease | None:
        """Take the lease if nobody holds it or its holder let it expire; the new lease
        (token one higher), or None when another holds it."""
        with self._write() as conn:
            current = self._read(conn)
            if current is None:
                try:
                    with conn.begin_nested():
                        conn.execute(
                            insert(leader_lease_table).values(
                                cluster_id=self.cluster_id,
                                leader_id=contender_id,
                                token=1,
                                rpc_address=rpc_address,
                                rest_url=rest_url,
                                renewed_at=db_now(),
                            )
                        )
                except IntegrityError:
                    return None  # another contender inserted it first
                return self._read(conn)
            table = leader_lease_table.c
            taken = conn.execute(
                update(leader_lease_table)
                .where(
                    table.cluster_id == self.cluster_id,
                    table.token == current.token,
                    or_(
                        table.leader_id.is_(None),
                        table.leader_id == contender_id,  # ours, given up after a missed renew deadline
                        table.renewed_at < db_now() - lease_duration,
                    ),
                )
                .values(
                    leader_id=contender_id,
                    token=current.token + 1,
                    rpc_address=rpc_address,
                    rest_url=rest_url,
                    renewed_at=db_now(),
                )
            )
            return self._read(conn) if taken.rowcount == 1 else None

    def renew(self, lease: LeaderLease, rest_url: str | None = None) -> bool:
        """Renew our lease; False when it is no longer ours (taken, or released)."""
        values: dict[str, Any] = {"renewed_at": db_now()}
        if rest_url is not None:
            values["rest_url"] = rest_url
        with self._write() as conn:
            renewed = conn.execute(self._ours(lease).values(**values))
            return renewed.rowcount == 1

    def release(self, lease: LeaderLease) -> bool:
        """Give the lease up (a clean shutdown): a standby may take it at once."""
        with self._write() as conn:
            return conn.execute(self._ours(lease).values(leader_id=None, renewed_at=0.0)).rowcount == 1

    def _ours(self, lease: LeaderLease) -> Any:
        table = leader_lease_table.c
        return update(leader_lease_table).where(
            table.cluster_id == self.cluster_id, table.token == lease.token, table.leader_id == lease.leader_id
        )

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            if self._write_options:
                conn.execution_options(**self._write_options)
            with conn.begin():
                yield conn

    def _read(self, conn: Connection) -> LeaderLease | None:
        table = leader_lease_table.c
        row = conn.execute(
            select(leader_lease_table, db_now().label("read_at")).where(table.cluster_id == self.cluster_id)
        ).one_or_none()
        if row is None:
            return None
        return LeaderLease(
            cluster_id=row.cluster_id,
            leader_id=row.leader_id,
            token=int(row.token),
            rpc_address=row.rpc_address,
            rest_url=row.rest_url,
            renewed_at=float(row.renewed_at),
            read_at=float(row.read_at),
        )


class LeaseNotHeld(Exception):
    """A write made under a fencing token whose leadership is over (the message says who
    holds the lease now); the job store refuses the write (FencingTokenMismatch)."""


def check_fencing(conn: Connection, cluster_id: str, token: int | None) -> None:
    """LeaseNotHeld unless a write made under `token` may go ahead, checked inside the
    writer's transaction (jobmanager/jobstore.py). FOR SHARE holds the lease row until
    that transaction ends, so a takeover waits for the write (PostgreSQL; SQLite runs
    one write transaction at a time anyway). token None: a standby's."""
    table = leader_lease_table.c
    current = conn.execute(
        select(table.token, table.leader_id).where(table.cluster_id == cluster_id).with_for_update(read=True)
    ).one_or_none()
    if token is not None and current is not None and current.token == token and current.leader_id is not None:
        return
    held = "nobody" if current is None or current.leader_id is None else f"token {current.token}"
    writer = "is a standby" if token is None else f"led cluster {cluster_id!r} with fencing token {token}"
    raise LeaseNotHeld(f"this JobManager {writer}, and the leader lease is now held by {held}")
