"""JDBC sources and sinks of Spark vertices (PostgreSQL).

Source config: `{"format": "jdbc", "url", "table" | "query", "user", "password"
(`secret://<name>`), "partition_column", "lower", "upper", "splits", "options"}`.
On the JobManager's planner the source is split into key ranges (io/jdbc.py) handed
out one at a time through RequestNextInputSplit; a TaskManager reads a range with
Spark's JDBC reader (`SELECT * FROM <table> WHERE <range>`), so a failover re-reads
only unfinished ranges and a savepoint records the finished ones by name.

Sink config: `{"format": "jdbc", "url", "table", "mode", "keys", "user", "password"}`:
each chunk is written by Spark's JDBC writer to a staging table of its attempt and
committed by a rename; the planner publishes at FINISHED (io/jdbc.py).

The driver is Debian's `libpostgresql-jdbc-java` jar, put on every SparkSession's
classpath by spark/session.py when it is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flink_runtime.io import jdbc
from flink_runtime.io.jdbc import split_chunk  # noqa: F401 - for the Spark task
from flink_runtime.io.splits import InputSplit
from flink_runtime.security.secret_store import SecretStore
from flink_runtime.spark.jdbc_driver import DRIVER_JAR

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

DRIVER_CLASS = "org.postgresql.Driver"

FETCH_SIZE = "10000"
BATCH_SIZE = "10000"


class JdbcDriverMissing(RuntimeError):
    pass


def is_jdbc(spec: dict[str, Any] | None) -> bool:
    return bool(spec) and spec.get("format") == "jdbc"  # type: ignore[union-attr]


def check_driver(spark: SparkSession) -> None:
    """JdbcDriverMissing naming the package when the session has no PostgreSQL driver."""
    jars = "" if _is_connect(spark) else spark.sparkContext.getConf().get("spark.jars", "")
    if _is_connect(spark) or "postgresql" in jars:
        return
    raise JdbcDriverMissing(
        f"the PostgreSQL JDBC driver is not on Spark's classpath: install Debian's libpostgresql-jdbc-java "
        f"({DRIVER_JAR}; scripts/ensure-postgresql.sh, run by `make setup`, does) and restart the "
        "TaskManagers, or add a driver jar to spark.jars"
    )


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _properties(spec: dict[str, Any], secrets: SecretStore, where: str) -> dict[str, str]:
    properties = {"driver": DRIVER_CLASS, **{k: str(v) for k, v in (spec.get("options") or {}).items()}}
    if spec.get("user"):
        properties["user"] = spec["user"]
    if spec.get("password"):
        properties["password"] = secrets.resolve(spec["password"], f"{where} password")
    return properties


def password_of(spec: dict[str, Any], secrets: SecretStore, where: str) -> str | None:
    return secrets.resolve(spec["password"], f"{where} password") if spec.get("password") else None


def connection_factory(spec: dict[str, Any], secrets: SecretStore, where: str) -> Any:
    return lambda: jdbc.connect(spec["url"], spec.get("user"), password_of(spec, secrets, where))


# -- sources ------------------------------------------------------------------------------------


def source_splits(source: dict[str, Any], parallelism: int, secrets: SecretStore, done: set[str]) -> list[InputSplit]:
    """One split per key range, without the ranges a savepoint recorded as read."""
    predicates = jdbc.plan_predicates(source, parallelism, connection_factory(source, secrets, "read_jdbc"))
    splits = []
    for predicate in predicates:
        token = jdbc.split_token(source, predicate)
        if token not in done:
            # "files": the name a checkpoint records a finished split by (checkpoint/progress.py).
            splits.append(InputSplit(len(splits), payload={"where": predicate, "files": [token], "bytes": 0}))
    return splits


def read_split(
    spark: SparkSession, source: dict[str, Any], predicate: str, secrets: SecretStore, schema: StructType | None
) -> DataFrame:
    check_driver(spark)
    query = f"SELECT * FROM {jdbc.from_clause(source)} WHERE {predicate}"
    reader = spark.read.format("jdbc").option("url", source["url"]).option("query", query)
    reader = reader.option("fetchsize", FETCH_SIZE).options(**_properties(source, secrets, "read_jdbc"))
    df = reader.load()
    if schema is not None and df.schema != schema:
        df = df.select(*[df[field.name].cast(field.dataType) for field in schema.fields])
    return df


def infer_schema(spark: SparkSession, source: dict[str, Any], secrets: SecretStore) -> StructType:
    """The source's columns, asked of the database (Spark runs `... WHERE 1=0`)."""
    return read_split(spark, source, "FALSE", secrets, None).schema


# -- sinks -----------------------------------------------------------------------------------------


def write_chunk(
    df: DataFrame, sink: dict[str, Any], data_namespace: str, chunk: str, execution_id: str, secrets: SecretStore
) -> None:
    """Phase one: the chunk's rows into its attempt's staging table, then committed by rename."""
    spark = df.sparkSession
    check_driver(spark)
    schema, _ = jdbc.split_table(sink["table"])
    in_progress = jdbc.staging_table(sink, data_namespace, chunk, execution_id)
    committed = jdbc.staging_table(sink, data_namespace, chunk)
    properties = _properties(sink, secrets, "write_jdbc")
    url = sink["url"] + ("&" if "?" in sink["url"] else "?") + "reWriteBatchedInserts=true"
    properties.setdefault("batchsize", BATCH_SIZE)
    df.write.mode("overwrite").jdbc(url, jdbc.qualified(schema, in_progress), properties=properties)
    with connection_factory(sink, secrets, "write_jdbc")() as connection:
        jdbc.commit_staging(connection, schema, in_progress, committed)


def check_sink(sink: dict[str, Any], secrets: SecretStore) -> None:
    """At submit: the database answers, and an upsert's table has a unique index on its keys."""
    with connection_factory(sink, secrets, "write_jdbc")() as connection:
        jdbc.check_target(connection, sink)


def publish(sink: dict[str, Any], data_namespace: str, secrets: SecretStore) -> int:
    with connection_factory(sink, secrets, "write_jdbc")() as connection:
        return jdbc.publish(connection, sink, data_namespace)


def discard(sink: dict[str, Any], data_namespace: str, secrets: SecretStore) -> int:
    with connection_factory(sink, secrets, "write_jdbc")() as connection:
        return jdbc.discard(connection, sink, data_namespace.split("/")[0])


def forget(sink: dict[str, Any], data_namespace: str, secrets: SecretStore) -> None:
    with connection_factory(sink, secrets, "write_jdbc")() as connection:
        jdbc.forget_marker(connection, sink, data_namespace.split("/")[0])
