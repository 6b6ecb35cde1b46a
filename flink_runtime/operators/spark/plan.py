"""Resolving a Spark vertex's plan at submit, on the JobManager.

The chain is applied to empty DataFrames that have the input's schema. Spark's
analyzer resolves every column, function and SQL statement without reading data, so
the mistakes a user makes most (a typo in a column, SQL that does not parse, a
function that cannot be imported) refuse the job in milliseconds, before any slot is
taken. The schemas found travel to the tasks: a consumer of an empty input still
knows its columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flink_runtime.operators.spark import io
from flink_runtime.operators.spark.chain import apply_operators, combine_inputs
from flink_runtime.spark.frames import empty_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def resolve_vertex(
    spark: SparkSession, config: dict[str, Any], input_schemas: list[str | None], files: list[str]
) -> tuple[dict[str, Any], str]:
    """(what the tasks need: source and input schemas as JSON, the output schema as JSON)."""
    operators = config.get("operators", [])
    views: list[str] = []
    resolved: dict[str, Any] = {}
    try:
        if "source" in config:
            schema = io.infer_source_schema(spark, config["source"], files)
            resolved["source_schema"] = io.schema_to_json(schema)
            df = apply_operators(spark, empty_frame(spark, schema), operators, views)
        else:
            if any(schema is None for schema in input_schemas):
                raise ValueError("an input of this vertex is not a Spark vertex; connect Spark vertices only")
            resolved["input_schemas"] = list(input_schemas)
            inputs = [empty_frame(spark, io.schema_from_json(s)) for s in input_schemas]  # type: ignore[arg-type]
            df, rest = combine_inputs(inputs, operators)
            df = apply_operators(spark, df, rest, views)
        output_schema = io.schema_to_json(df.schema)
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
    return resolved, output_schema
