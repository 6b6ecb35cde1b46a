"""Resolving a Spark vertex's plan at submit, on the JobManager.

The chain is applied to empty DataFrames that have the input's schema. Spark's
analyzer resolves every column, function and SQL statement without reading data, so
the mistakes a user makes most (a typo in a column, SQL that does not parse, a
function that cannot be imported) refuse the job in milliseconds, before any slot is
taken. The schemas found travel to the tasks: a consumer of an empty input still
knows its columns.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

from flink_runtime.io.filesystem import is_local, local_path
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


# Operators whose resolution depends on more than the input schemas and the expressions:
# an `sql` query may read the session's catalog (tables, views, functions it creates or
# drops itself), a `transform` runs the job's own code.
_UNCACHEABLE_OPERATORS = ("sql", "transform")


def plan_key(config: dict[str, Any], input_schemas: list[str | None], files: list[str]) -> str | None:
    """What `resolve_vertex` gives depends on, as a digest; None when it depends on more
    (an `sql` or `transform` operator, a schema inferred from a file not on local disk).

    The input paths are not in it: a text source's schema is fixed, a given one is in
    the config, and an inferred one comes from the first file, named here by its path,
    size and modification time. So the same pipeline on the next day's files has the
    same key, and a file rewritten in place has another.
    """
    operators = config.get("operators") or []
    if any(spec.get("op") in _UNCACHEABLE_OPERATORS for spec in operators):
        return None
    parts: dict[str, Any] = {"operators": operators, "inputs": input_schemas}
    if "source" in config:
        source = {key: value for key, value in config["source"].items() if key != "paths"}
        parts["source"] = source
        if io.infers_schema_from_files(source):
            if not files or not is_local(files[0]):
                return None
            try:
                status = os.stat(local_path(files[0]))
            except OSError:
                return None  # the check itself says what is wrong with the file
            parts["first_file"] = [files[0], status.st_size, status.st_mtime_ns]
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
