"""The Pipeline API's partitioned sinks, order_by, limit and keyed sql: the JobGraph they
translate into, and the messages for bad arguments (no Spark: the graph only)."""

from __future__ import annotations

import pytest

from flink_runtime.operators.spark.ordering import parse_order
from flink_runtime.pipeline import Pipeline

SCHEMA = "id BIGINT, region STRING, amount BIGINT"


def source(parallelism: int = 3):
    return Pipeline("p", parallelism=parallelism).read_csv("in/*.csv", schema=SCHEMA)


def test_a_partitioned_sink_carries_its_columns_and_an_unpartitioned_one_is_unchanged() -> None:
    ds = source()
    ds.write_parquet("out/a", mode="overwrite_partitions", partition_by="region")
    ds.write_csv("out/b", mode="errorifexists")
    sinks = [vertex.config["sink"] for vertex in ds.pipeline.job_graph().vertices if "sink" in vertex.config]
    assert sinks[0]["partition_by"] == ["region"] and sinks[0]["mode"] == "overwrite_partitions"
    assert "partition_by" not in sinks[1] and sinks[1]["mode"] == "error"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ds: ds.write_parquet("o", mode="overwrite_partitions"), "needs partition_by=\\[...\\] columns"),
        (lambda ds: ds.write_json("o", partition_by=["day", "day"]), "names 'day' more than once"),
        (lambda ds: ds.write_csv("o", partition_by=["a=b"]), "without '/', '\\\\\\\\' or '='"),
        (lambda ds: ds.write_parquet("o", partition_by=[""]), "partition_by column #1"),
        (lambda ds: ds.write_parquet("o", partition_by=7), "a column name or a list of them"),
        (lambda ds: ds.write_parquet("o", mode="replace"), "'overwrite_partitions'"),
        (lambda ds: ds.order_by(), "order_by\\(\\) needs at least one order column"),
        (lambda ds: ds.limit(-1), "limit\\(\\) needs a row count"),
        (lambda ds: ds.limit(True), "limit\\(\\) needs a row count"),
        (lambda ds: ds.key_by("region").sql(""), "sql\\(\\) needs a query"),
    ],
)
def test_bad_arguments_say_what_to_write(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call(source())


def test_order_by_is_a_broadcast_to_range_subtasks_and_limit_a_two_phase_top_n() -> None:
    ds = source()
    ds.filter("amount > 0").order_by("amount DESC", "id").limit(5).write_parquet("out")
    graph = ds.pipeline.job_graph()
    assert [(v.name, v.parallelism) for v in graph.vertices] == [
        ("Read CSV -> Filter -> Partial top-n", 3),
        ("Top-N -> Write Parquet", 1),
    ]
    partial = graph.vertices[0].config["operators"][-1]
    assert partial == {"op": "limit", "n": 5, "order": ["amount DESC", "id"]}

    ranged = source()
    ranged.order_by("amount").write_parquet("out")
    graph = ranged.pipeline.job_graph()
    assert [edge.partitioner.value for edge in graph.edges] == ["broadcast"]
    assert graph.vertices[1].config["operators"] == [{"op": "order", "order": ["amount"]}]
    assert graph.vertices[1].parallelism == 3


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("amount", ("amount", True, True)),
        ("amount desc", ("amount", False, False)),
        ("amount DESC NULLS FIRST", ("amount", False, True)),
        ("lower(name) ASC NULLS LAST", ("lower(name)", True, False)),
    ],
)
def test_orders_read_as_spark_sql_reads_them(text, parsed) -> None:
    assert parse_order(text) == parsed


def test_what_follows_an_order_keeps_its_subtasks_or_is_refused() -> None:
    ds = source()
    ds.order_by("amount").set_parallelism(4).select("id", "amount").write_parquet("out")
    assert [v.parallelism for v in ds.pipeline.job_graph().vertices] == [3, 4]
    refused = source()
    refused.order_by("amount").write_parquet("out").set_parallelism(2)
    with pytest.raises(ValueError, match="would lose their order"):
        refused.pipeline.job_graph()
