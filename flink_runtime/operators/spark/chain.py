"""Applying a vertex's operator chain to DataFrames.

The chain is the `operators` list of a vertex's config (written by the Pipeline API
or by hand, see docs/pipelines.md "JobGraph JSON for Spark vertices"). The same function runs
in two places: in a task on real data, and in the JobManager on empty DataFrames to
resolve the plan at submit, so an unknown column or invalid SQL fails the
submission instead of a task minutes later.
"""

from __future__ import annotations

import importlib
import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flink_runtime.operators.aggregates import final_expressions, partial_expressions
from flink_runtime.operators.spark.ordering import sort_columns, top_n

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


MULTI_INPUT_OPERATORS = ("join", "union")

# `FROM input` / `JOIN input` in an sql operator's query: the vertex's input.
_INPUT_REFERENCE = re.compile(r"\b(FROM|JOIN)\s+input\b", re.IGNORECASE)


def reemits_all_it_read(operators: list[dict[str, Any]]) -> bool:
    """Whether a chain's output is always the result over everything it ever read: it
    starts with a final keyed aggregate (after its join or union), whose keyed state
    carries what earlier runs and rounds read. Its newest output replaces the older;
    any other chain's output adds to it."""
    rest = operators[1:] if operators and operators[0].get("op") in MULTI_INPUT_OPERATORS else operators
    return bool(rest) and rest[0].get("op") == "aggregate" and rest[0].get("phase") == "final"


class OperatorError(ValueError):
    """An operator spec is malformed, or its user function cannot be loaded."""


def load_function(path: str) -> Callable[[DataFrame], DataFrame]:
    module_name, sep, function_name = path.partition(":")
    if not sep or not module_name or not function_name:
        raise OperatorError(f"transform function {path!r} is not of the form 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise OperatorError(
            f"transform function {path!r}: cannot import module {module_name!r} ({exc}); "
            "attach it to the job as a library or install it on the cluster"
        ) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise OperatorError(f"transform function {path!r}: {module_name} has no callable {function_name!r}")
    return function


def combine_inputs(inputs: list[DataFrame], operators: list[dict[str, Any]]) -> tuple[DataFrame, list[dict[str, Any]]]:
    """Merge a vertex's inputs into one DataFrame; returns it and the remaining chain."""
    if not operators or operators[0].get("op") not in MULTI_INPUT_OPERATORS:
        if len(inputs) != 1:
            raise OperatorError(f"a vertex with {len(inputs)} inputs must start with a join or union operator")
        return inputs[0], operators
    first, rest = operators[0], operators[1:]
    if first["op"] == "join":
        if len(inputs) != 2:
            raise OperatorError(f"join needs exactly 2 inputs (left, right), got {len(inputs)}")
        left, right = inputs
        return left.join(right, on=list(first["on"]), how=first.get("how", "inner")), rest
    merged = inputs[0]
    for other in inputs[1:]:
        merged = merged.unionByName(other, allowMissingColumns=False)
    return merged, rest


def apply_operators(
    spark: SparkSession, df: DataFrame, operators: list[dict[str, Any]], views: list[str] | None = None
) -> DataFrame:
    """Apply the chain; temporary views it registers are appended to `views` (drop them when done)."""
    for index, spec in enumerate(operators):
        try:
            df = _apply(spark, df, spec, views)
        except OperatorError:
            raise
        except Exception as exc:
            # Spark's AnalysisException says what is wrong; say where.
            raise OperatorError(f"operator #{index} ({_describe(spec)}): {_spark_message(exc)}") from exc
    return df


def _apply(spark: SparkSession, df: DataFrame, spec: dict[str, Any], views: list[str] | None) -> DataFrame:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    op = spec.get("op")
    match op:
        case "select":
            return df.selectExpr(*spec["exprs"])
        case "filter":
            return df.filter(spec["condition"])
        case "with_column":
            return df.withColumn(spec["name"], F.expr(spec["expr"]))
        case "sql":
            # The query names its input `input`. Each task registers its DataFrame under
            # a name of its own, so concurrent tasks in one session never see each other's.
            view = f"input_{uuid.uuid4().hex}"
            df.createOrReplaceTempView(view)
            if views is not None:
                views.append(view)
            return spark.sql(_INPUT_REFERENCE.sub(lambda m: f"{m.group(1)} {view}", spec["query"]))
        case "transform":
            result = load_function(spec["function"])(df)
            if not hasattr(result, "schema") or not hasattr(result, "selectExpr"):
                raise OperatorError(
                    f"transform function {spec['function']!r} returned {type(result).__name__}, not a DataFrame"
                )
            return result
        case "distinct":
            return df.distinct()
        case "aggregate":
            return _aggregate(df, spec)
        case "order":
            # In a task, the vertex's range is cut first (SparkTask, ordering.py); this
            # sorts what it kept (and resolves the order's columns at submit).
            return df.orderBy(*sort_columns(list(spec["order"])))
        case "limit":
            return top_n(df, list(spec.get("order") or []), int(spec["n"]))
        case _:
            raise OperatorError(f"unknown operator {op!r}")


def _aggregate(df: DataFrame, spec: dict[str, Any]) -> DataFrame:
    from pyspark.sql import functions as F  # noqa: N812

    keys = list(spec.get("keys", []))
    phase = spec.get("phase", "complete")
    if phase == "partial":
        expressions = partial_expressions(spec["aggregates"])
    elif phase == "final":
        expressions = final_expressions(spec["aggregates"])
    elif phase == "complete":
        expressions = list(spec["aggregates"])
    else:
        raise OperatorError(f"aggregate phase must be partial, final or complete, not {phase!r}")
    columns = [F.expr(expression) for expression in expressions]
    if phase == "final":
        # The partials of this subtask's keys, already together (the exchange hashed them
        # here), and few (each producer combined its rows): one Spark partition merges
        # them in one stage with no shuffle, as a Flink subtask merges its keys in one
        # thread; the subtask's slot is its share of the cores.
        df = df.coalesce(1)
    return df.groupBy(*keys).agg(*columns) if keys else df.agg(*columns)


def _describe(spec: dict[str, Any]) -> str:
    op = spec.get("op", "?")
    detail = spec.get("exprs") or spec.get("condition") or spec.get("query") or spec.get("function") or ""
    return f"{op} {detail}".strip()


def _spark_message(exc: Exception) -> str:
    # AnalysisException carries the whole plan after the first line; keep the useful part.
    text = str(exc).strip() or type(exc).__name__  # MemoryError, for one, says nothing else
    first = text.split("\n", 1)[0]
    return first if len(first) > 20 else text[:500]
