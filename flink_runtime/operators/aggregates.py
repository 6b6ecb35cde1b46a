"""Splitting keyed aggregates into a producer-side combine and a consumer-side merge.

`key_by(...).agg("count(*) as n", "avg(price) as mean")` runs in two phases, as a
combiner does in Flink and Spark: the producer aggregates what it has (partial),
ships the much smaller partial rows through the hash exchange, and the consumer
merges them (final). Only aggregates that decompose can be split; a pipeline with any
other (count(DISTINCT x), percentile, ...) ships raw rows and aggregates once
(complete).

Everything here works on Spark SQL text, so the Pipeline API can decide without
Spark and the task applies it with `DataFrame.selectExpr` / `groupBy().agg(expr())`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# name(argument) [AS] alias
_AGGREGATE = re.compile(
    r"^\s*(?P<function>[A-Za-z_]+)\s*\(\s*(?P<argument>.*?)\s*\)\s+(?:AS\s+)?`?(?P<alias>[A-Za-z_][A-Za-z0-9_]*)`?\s*$",
    re.IGNORECASE | re.DOTALL,
)

# How each decomposable function's partial results merge.
_MERGE = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}


class AggregateSyntaxError(ValueError):
    pass


@dataclass(frozen=True)
class Aggregate:
    function: str  # lower case
    argument: str
    alias: str

    @property
    def decomposable(self) -> bool:
        if self.argument.lower().startswith("distinct "):
            return False
        return self.function in _MERGE or self.function in ("avg", "mean")

    def partial_expressions(self) -> list[str]:
        if self.function in ("avg", "mean"):
            return [f"sum({self.argument}) AS __{self.alias}_sum", f"count({self.argument}) AS __{self.alias}_count"]
        return [f"{self.function}({self.argument}) AS __{self.alias}"]

    def final_expression(self) -> str:
        if self.function in ("avg", "mean"):
            return f"sum(__{self.alias}_sum) / sum(__{self.alias}_count) AS {self.alias}"
        return f"{_MERGE[self.function]}(__{self.alias}) AS {self.alias}"


def parse_aggregates(expressions: list[str]) -> list[Aggregate] | None:
    """The aggregates, or None when any is not of the form `function(argument) AS alias`."""
    parsed = []
    for expression in expressions:
        match = _AGGREGATE.match(expression)
        if match is None:
            return None
        parsed.append(Aggregate(match["function"].lower(), match["argument"], match["alias"]))
    return parsed


def can_combine(expressions: list[str]) -> bool:
    """True when every aggregate splits into partial and final phases."""
    aggregates = parse_aggregates(expressions)
    return aggregates is not None and all(aggregate.decomposable for aggregate in aggregates)


def partial_expressions(expressions: list[str]) -> list[str]:
    aggregates = _decomposable(expressions)
    return [partial for aggregate in aggregates for partial in aggregate.partial_expressions()]


def final_expressions(expressions: list[str]) -> list[str]:
    return [aggregate.final_expression() for aggregate in _decomposable(expressions)]


def _decomposable(expressions: list[str]) -> list[Aggregate]:
    aggregates = parse_aggregates(expressions)
    if aggregates is None or not all(aggregate.decomposable for aggregate in aggregates):
        raise AggregateSyntaxError(
            f"aggregates {expressions!r} cannot be split into partial and final phases; "
            "use count/sum/min/max/avg with an alias (e.g. 'sum(amount) AS total')"
        )
    return aggregates


# -- merging partial rows in Python (keyed state across runs) ------------------------------------

_MERGE_FUNCTIONS = {
    "sum": lambda a, b: _add(a, b),
    "min": lambda a, b: _pick(min, a, b),
    "max": lambda a, b: _pick(max, a, b),
}


def _add(a, b):  # noqa: ANN001, ANN202 - SQL semantics: NULL is absent
    return b if a is None else a if b is None else a + b


def _pick(choose, a, b):  # noqa: ANN001, ANN202
    return b if a is None else a if b is None else choose(a, b)


def partial_columns(expressions: list[str]) -> list[str]:
    """The column names `partial_expressions` produces, in order."""
    return [expression.rsplit(" AS ", 1)[1] for expression in partial_expressions(expressions)]


def merge_partials(expressions: list[str], old: list | None, new: list) -> list:
    """Merge two partial-value rows (in `partial_columns` order)."""
    if old is None:
        return list(new)
    merged = []
    index = 0
    for aggregate in _decomposable(expressions):
        kinds = ["sum", "sum"] if aggregate.function in ("avg", "mean") else [_MERGE[aggregate.function]]
        for kind in kinds:
            merged.append(_MERGE_FUNCTIONS[kind](old[index], new[index]))
            index += 1
    return merged


def final_values(expressions: list[str], partial: list) -> list:
    """The aggregates' values from merged partial values (avg = sum / count)."""
    values = []
    index = 0
    for aggregate in _decomposable(expressions):
        if aggregate.function in ("avg", "mean"):
            total, count = partial[index], partial[index + 1]
            values.append(None if not count else total / count)
            index += 2
        else:
            values.append(partial[index])
            index += 1
    return values
