"""PostgreSQL through JDBC URLs: key-range splits, staging tables, the publishing transaction.

Spark reads and writes the rows (operators/spark/jdbc.py); what must be one atomic step
on the database is plain SQL here, run with psycopg by the planner (split bounds, the
publish at FINISHED) and by a TaskManager (committing one chunk's staging table).

Sink protocol (two phases, as the file sinks'):

- each attempt of a chunk (a source subtask's split, or a subtask) writes its rows to a
  table of its own, `<prefix><run>_<chunk>_ip<attempt>`, then commits it by renaming it
  to `<prefix><run>_<chunk>` in one transaction (a rerun of the chunk replaces it);
- when the job FINISHES the planner publishes in ONE transaction: the target is
  created from the staging tables if missing (overwrite: emptied), every committed
  chunk's rows are inserted (upsert: `ON CONFLICT (keys) DO UPDATE`), a row is written
  to `_flink_jdbc_published` (job id, target) and every staging table of the job is
  dropped. A publish that runs again (the JobManager died after the commit but before
  the job's end was stored) finds its marker and only drops staging tables;
- a failed or cancelled job drops its staging tables; the marker goes when the job's
  end is stored (on_job_gone).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

STAGING_PREFIX = "_flink_stg_"
MARKER_TABLE = "_flink_jdbc_published"
SINK_MODES = ("append", "overwrite", "upsert")
# Without partition bounds a source splits into chunks of about this many rows.
ROWS_PER_SPLIT = 500_000
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_SECRET_PARAMETERS = ("password", "sslpassword", "sslkey")


class JdbcError(ValueError):
    """A JDBC source or sink that cannot work as given; the message says what to change."""


@dataclass(frozen=True)
class JdbcUrl:
    host: str
    port: int
    database: str
    parameters: tuple[tuple[str, str], ...] = ()

    @property
    def namespace(self) -> str:
        """OpenLineage's dataset namespace for PostgreSQL."""
        return f"postgres://{self.host}:{self.port}"


def parse_url(url: str, where: str = "url") -> JdbcUrl:
    """`jdbc:postgresql://host[:port]/database[?k=v&...]`; JdbcError for anything else,
    or for a password in it (passwords come from a secret)."""
    if not isinstance(url, str) or not url.startswith("jdbc:postgresql://"):
        raise JdbcError(f"{where} must be a PostgreSQL JDBC URL 'jdbc:postgresql://host[:port]/database', got {url!r}")
    parts = urlsplit(url[len("jdbc:") :])
    if parts.password is not None or parts.username is not None:
        raise JdbcError(f"{where}: give user= and password='secret://<name>' instead of credentials in the URL")
    parameters = tuple(parse_qsl(parts.query))
    if any(key.lower() in _SECRET_PARAMETERS for key, _ in parameters):
        raise JdbcError(f"{where}: no password in the URL's parameters; use password='secret://<name>'")
    database = parts.path.lstrip("/")
    if not parts.hostname or not database or "/" in database:
        raise JdbcError(
            f"{where} must name a host and a database: 'jdbc:postgresql://host[:port]/database', got {url!r}"
        )
    return JdbcUrl(parts.hostname, parts.port or 5432, database, parameters)


def split_table(table: str, where: str = "table") -> tuple[str, str]:
    """("schema", "table") of "table" or "schema.table" (plain identifiers, public by default)."""
    parts = table.split(".") if isinstance(table, str) else []
    if not 1 <= len(parts) <= 2 or not all(_IDENTIFIER.match(part) for part in parts):
        raise JdbcError(f"{where} must be 'table' or 'schema.table' of letters, digits and '_', got {table!r}")
    return (parts[0], parts[1]) if len(parts) == 2 else ("public", parts[0])


def check_identifier(name: str, where: str) -> str:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise JdbcError(f"{where} must be a column name of letters, digits and '_', got {name!r}")
    return name


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def qualified(schema: str, table: str) -> str:
    return f"{quote(schema)}.{quote(table)}"


def from_clause(source: dict[str, Any]) -> str:
    """What a source selects from: its table, or its query as a subquery."""
    if source.get("table"):
        return qualified(*split_table(source["table"]))
    return f"({source['query']}) AS flink_jdbc_query"


def dataset_name(url: str, table: str | None) -> str:
    """OpenLineage's dataset name: `database.schema.table` (a query: `database.query`)."""
    parsed = parse_url(url)
    if not table:
        return f"{parsed.database}.query"
    schema, name = split_table(table)
    return f"{parsed.database}.{schema}.{name}"


# -- connections ---------------------------------------------------------------------------------


def connect(url: str, user: str | None, password: str | None, autocommit: bool = False) -> Any:
    """A psycopg connection to the database of a JDBC URL."""
    import psycopg

    parsed = parse_url(url)
    options: dict[str, Any] = {"host": parsed.host, "port": parsed.port, "dbname": parsed.database}
    if user:
        options["user"] = user
    if password:
        options["password"] = password
    for key, value in parsed.parameters:
        if key in ("sslmode", "connect_timeout", "application_name"):
            options[key.replace("connectTimeout", "connect_timeout")] = value
    options.setdefault("connect_timeout", 30)
    return psycopg.connect(autocommit=autocommit, **options)


# -- source splits ----------------------------------------------------------------------------------


def range_predicates(column: str, lower: int, upper: int, splits: int) -> list[str]:
    """Spark's column partitioning (JDBCRelation.columnPartition): `splits` strides between
    lower and upper; rows below lower (and NULLs) go to the first, above upper to the last,
    so no row is left out whatever the bounds."""
    if splits <= 1 or upper <= lower:
        return ["TRUE"]
    splits = min(splits, upper - lower)
    stride = (upper - lower) / splits
    bounds = [lower + round(stride * index) for index in range(1, splits)]
    column = quote(column)
    predicates = [f"{column} < {bounds[0]} OR {column} IS NULL"]
    predicates += [f"{column} >= {low} AND {column} < {high}" for low, high in zip(bounds, bounds[1:], strict=False)]
    predicates.append(f"{column} >= {bounds[-1]}")
    return predicates


def source_bounds(connection: Any, source: dict[str, Any]) -> tuple[int | None, int | None, int]:
    """(min, max, row count) of a source's partition column."""
    column = quote(source["partition_column"])
    row = connection.execute(f"SELECT min({column}), max({column}), count(*) FROM {from_clause(source)}").fetchone()
    low, high, count = row
    for value in (low, high):
        if value is not None and not isinstance(value, int):
            raise JdbcError(
                f"partition_column {source['partition_column']!r} must be an integer column, "
                f"its values are {type(value).__name__}"
            )
    return low, high, int(count)


def plan_predicates(source: dict[str, Any], parallelism: int, connection_factory: Any) -> list[str]:
    """The key-range predicates of a source's splits; asks the database for bounds and a row
    count only for what the source did not give."""
    column = source.get("partition_column")
    if not column:
        return ["TRUE"]
    lower, upper, splits = source.get("lower"), source.get("upper"), source.get("splits")
    if lower is None or upper is None or splits is None:
        with connection_factory() as connection:
            low, high, count = source_bounds(connection, source)
        if low is None:  # an empty table: one split reads it (and finds nothing)
            return ["TRUE"]
        lower = low if lower is None else lower
        upper = high if upper is None else upper
        if splits is None:
            splits = max(parallelism, math.ceil(count / ROWS_PER_SPLIT))
    # `upper` is inclusive for the user (a max), exclusive for the strides.
    return range_predicates(column, int(lower), int(upper) + 1, int(splits))


def split_token(source: dict[str, Any], predicate: str) -> str:
    """How a savepoint names a finished range (it records sources by what they read)."""
    what = source.get("table") or hashlib.sha1(source["query"].encode()).hexdigest()[:16]
    return f"{source['url']}#{what}#{predicate}"


# -- sink staging tables -------------------------------------------------------------------------


def _digest(text: str, length: int) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:length]


def staging_prefix(sink: dict[str, Any], job_id: str) -> str:
    """Every staging table of one job's sink starts with this (runs and chunks after it)."""
    schema, table = split_table(sink["table"])
    return f"{STAGING_PREFIX}{_digest(f'{job_id}|{schema}.{table}', 10)}_"


def split_chunk(payload: dict[str, Any]) -> str:
    """A source split's chunk, named by what the split reads: a run recovered after a
    JobManager restart numbers its splits anew (without those a checkpoint completed),
    and the chunks committed by the earlier run must keep their own names."""
    return "r" + _digest(json.dumps(payload.get("files"), sort_keys=True), 12)


def staging_table(sink: dict[str, Any], data_namespace: str, chunk: str, execution_id: str | None = None) -> str:
    """The committed (or, with `execution_id`, in-progress) staging table of a chunk
    (`split_chunk`, or `subtask-<i>`). Named by job, not by run: the committed chunks of
    every run of the job (recovered after a JobManager restart) are published together."""
    job_id = data_namespace.split("/")[0]
    name = f"{staging_prefix(sink, job_id)}{chunk.replace('subtask-', 't')}"
    return f"{name}_ip{_digest(execution_id, 8)}" if execution_id else name


def check_target(connection: Any, sink: dict[str, Any]) -> None:
    """At submit: an upsert into an existing table needs a unique index on exactly its keys
    (ON CONFLICT names one); JdbcError saying which otherwise."""
    if sink.get("mode") != "upsert":
        return
    schema, table = split_table(sink["table"])
    exists = connection.execute("SELECT to_regclass(%s)", (qualified(schema, table),)).fetchone()[0]
    if exists is None:
        return  # the publish creates it with the keys as primary key
    unique = connection.execute(
        "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s "
        "AND i.indisunique AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM pg_attribute a "
        "WHERE a.attrelid = c.oid AND a.attnum = ANY(i.indkey)) = %s::text[]",
        (schema, table, sorted(sink["keys"])),
    ).fetchone()
    if unique is None:
        raise JdbcError(
            f"write_jdbc(mode='upsert'): table {schema}.{table} has no primary key or unique index on exactly "
            f"{sink['keys']}; add one (ALTER TABLE ... ADD PRIMARY KEY ({', '.join(sink['keys'])})) or change keys"
        )


def commit_staging(connection: Any, schema: str, in_progress: str, committed: str) -> None:
    """A chunk's rows become its committed table in one transaction (replacing a rerun's)."""
    with connection.transaction():
        connection.execute(f"DROP TABLE IF EXISTS {qualified(schema, committed)}")
        connection.execute(f"ALTER TABLE {qualified(schema, in_progress)} RENAME TO {quote(committed)}")


def _tables_like(connection: Any, schema: str, prefix: str) -> list[str]:
    rows = connection.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND left(table_name, %s) = %s "
        "ORDER BY table_name",
        (schema, len(prefix), prefix),
    ).fetchall()
    return [row[0] for row in rows]


def _columns(connection: Any, schema: str, table: str) -> list[str]:
    rows = connection.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
        "ORDER BY ordinal_position",
        (schema, table),
    ).fetchall()
    return [row[0] for row in rows]


def _ensure_marker_table(connection: Any, schema: str) -> str:
    marker = qualified(schema, MARKER_TABLE)
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {marker} (job_id text NOT NULL, target text NOT NULL, "
        "published_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (job_id, target))"
    )
    return marker


def publish(connection: Any, sink: dict[str, Any], data_namespace: str) -> int:
    """Phase two, once the job FINISHED: every committed chunk into the target in one
    transaction, idempotently (see the module doc). Returns the chunks published (0 when
    this job had published already)."""
    schema, table = split_table(sink["table"])
    job_id = data_namespace.split("/")[0]
    prefix = staging_prefix(sink, job_id)
    with connection.transaction():
        # One publisher at a time per target (a JobManager that lost leadership may still run).
        connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{schema}.{table}",))
        marker = _ensure_marker_table(connection, schema)
        done = connection.execute(
            f"SELECT 1 FROM {marker} WHERE job_id = %s AND target = %s", (job_id, f"{schema}.{table}")
        ).fetchone()
        chunks = [name for name in _tables_like(connection, schema, prefix) if "_ip" not in name[len(prefix) :]]
        published = 0
        if done is None:
            published = _insert_chunks(connection, sink, schema, table, chunks)
            connection.execute(f"INSERT INTO {marker} (job_id, target) VALUES (%s, %s)", (job_id, f"{schema}.{table}"))
        for name in _tables_like(connection, schema, prefix):
            connection.execute(f"DROP TABLE IF EXISTS {qualified(schema, name)}")
    return published


def _insert_chunks(connection: Any, sink: dict[str, Any], schema: str, table: str, chunks: list[str]) -> int:
    target = qualified(schema, table)
    mode, keys = sink.get("mode", "append"), list(sink.get("keys") or [])
    exists = connection.execute("SELECT to_regclass(%s)", (f"{quote(schema)}.{quote(table)}",)).fetchone()[0]
    if exists is None:
        if not chunks:
            return 0
        connection.execute(f"CREATE TABLE {target} (LIKE {qualified(schema, chunks[0])})")
        if mode == "upsert":
            connection.execute(f"ALTER TABLE {target} ADD PRIMARY KEY ({', '.join(map(quote, keys))})")
    elif mode == "overwrite":
        # In the publishing transaction: readers see the old rows until the new ones commit.
        connection.execute(f"TRUNCATE {target}")
    for chunk in chunks:
        columns = _columns(connection, schema, chunk)
        names = ", ".join(map(quote, columns))
        if mode == "upsert":
            key_list = ", ".join(map(quote, keys))
            updates = ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}" for c in columns if c not in keys)
            action = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
            # One row per key from a chunk: ON CONFLICT cannot change a row twice in one statement.
            connection.execute(
                f"INSERT INTO {target} ({names}) SELECT DISTINCT ON ({key_list}) {names} "
                f"FROM {qualified(schema, chunk)} ON CONFLICT ({key_list}) {action}"
            )
        else:
            connection.execute(f"INSERT INTO {target} ({names}) SELECT {names} FROM {qualified(schema, chunk)}")
    return len(chunks)


def discard(connection: Any, sink: dict[str, Any], job_id: str) -> int:
    """Drop every staging table of the job's sink (a failed or cancelled job); returns how many."""
    schema, _ = split_table(sink["table"])
    with connection.transaction():
        names = _tables_like(connection, schema, staging_prefix(sink, job_id))
        for name in names:
            connection.execute(f"DROP TABLE IF EXISTS {qualified(schema, name)}")
    return len(names)


def forget_marker(connection: Any, sink: dict[str, Any], job_id: str) -> None:
    """The job's end is stored: no run of it will publish again, so its marker goes."""
    schema, table = split_table(sink["table"])
    with connection.transaction():
        if connection.execute("SELECT to_regclass(%s)", (qualified(schema, MARKER_TABLE),)).fetchone()[0]:
            connection.execute(
                f"DELETE FROM {qualified(schema, MARKER_TABLE)} WHERE job_id = %s AND target = %s",
                (job_id, f"{schema}.{table}"),
            )
