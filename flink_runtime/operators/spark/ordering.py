"""Global order and top-N over a whole data set, as Spark's and Flink's range partitioners.

`order_by` runs in a vertex of its own behind a broadcast exchange: every producer
writes its rows once (`__sub=all`), and consumer subtask i of n

1. samples the order keys of all the input: the rows whose key hash is smallest (a
   bottom-k sample, one pass over the key columns only, which Parquet reads alone).
   It depends on the rows' values, never on file order or Spark's task split, so every
   subtask draws the same sample and the same n-1 range boundaries from it;
2. keeps the rows of range i (after boundary i-1, not after boundary i, comparing
   with each column's direction and null ordering, so ties and nulls have one range);
3. sorts them into one file.

So subtask i's output precedes subtask i+1's: the sink's `subtask-<i>` files, read in
subtask order, are the data set in global order. A sample over distinct keys balances
distinct values, not rows: one very frequent key stays in one range (as a tie must).

`limit(n)` (top-N after `order_by`) keeps each producer's first n rows (Spark plans a
sort plus limit as a bounded heap: one pass, no full sort), and one final subtask keeps
the first n of those.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Rows sampled per range boundary (Spark's RangePartitioner samples 20 per partition
# per input partition; a bottom-k sample is exact in size, so fewer suffice).
SAMPLE_PER_RANGE = 200

_ORDER = re.compile(r"^(?P<expr>.+?)(?:\s+(?P<dir>ASC|DESC))?(?:\s+NULLS\s+(?P<nulls>FIRST|LAST))?$", re.IGNORECASE)


def parse_order(text: str) -> tuple[str, bool, bool]:
    """(expression, ascending, nulls_first) of "amount DESC NULLS LAST"; Spark's
    defaults: ascending, nulls first when ascending and last when descending."""
    match = _ORDER.match(text.strip())
    if not match:
        raise ValueError(f"cannot read the order {text!r}; write e.g. 'amount DESC NULLS LAST'")
    ascending = (match.group("dir") or "ASC").upper() == "ASC"
    nulls = match.group("nulls")
    nulls_first = ascending if nulls is None else nulls.upper() == "FIRST"
    return match.group("expr").strip(), ascending, nulls_first


def sort_columns(order: list[str]) -> list[Column]:
    from pyspark.sql import functions as F  # noqa: N812

    columns = []
    for text in order:
        expr, ascending, nulls_first = parse_order(text)
        column = F.expr(expr)
        if ascending:
            columns.append(column.asc_nulls_first() if nulls_first else column.asc_nulls_last())
        else:
            columns.append(column.desc_nulls_first() if nulls_first else column.desc_nulls_last())
    return columns


def top_n(df: DataFrame, order: list[str], n: int) -> DataFrame:
    """The first n rows in `order` (a heap per Spark task, then a merge)."""
    return df.orderBy(*sort_columns(order)).limit(n) if order else df.limit(n)


def range_of_subtask(df: DataFrame, order: list[str], subtask: int, subtasks: int) -> DataFrame:
    """Steps 1-3 of the module doc: this subtask's range of `df`, sorted, in one partition."""
    from pyspark.sql import functions as F  # noqa: N812

    keys = [F.expr(parse_order(text)[0]) for text in order]
    if subtasks > 1:
        names = [f"__k{index}" for index in range(len(keys))]
        sample = (
            df.select(*(key.alias(name) for key, name in zip(keys, names, strict=True)))
            .orderBy(F.xxhash64(*names), *names)
            .limit(SAMPLE_PER_RANGE * subtasks)
            .collect()
        )
        directions = [parse_order(text)[1:] for text in order]
        ordered = sorted(sample, key=lambda row: _sort_key(tuple(row), directions))
        boundaries = [tuple(ordered[len(ordered) * i // subtasks]) for i in range(1, subtasks)] if ordered else []
        if boundaries:
            after = [_after(keys, boundary, directions) for boundary in boundaries]
            index = sum((F.when(condition, 1).otherwise(0) for condition in after), F.lit(0))
            df = df.filter(index == subtask)
        elif subtask > 0:
            df = df.limit(0)  # no rows at all: they are all subtask 0's
    return df.repartition(1).sortWithinPartitions(*sort_columns(order))


def _after(keys: list[Column], boundary: tuple[Any, ...], directions: list[tuple[bool, bool]]) -> Column:
    """Whether a row comes strictly after `boundary` in the order (lexicographic)."""
    from pyspark.sql import functions as F  # noqa: N812

    result = F.lit(False)
    # From the last column back: after = c0 after b0, or c0 equals b0 and (the rest after).
    for key, value, (ascending, nulls_first) in reversed(list(zip(keys, boundary, directions, strict=True))):
        if value is None:
            # Only a non-null comes after a null that sorts first; nothing after a null last.
            strictly = key.isNotNull() if nulls_first else F.lit(False)
        else:
            compared = key > F.lit(value) if ascending else key < F.lit(value)
            # A null sorting last comes after any value.
            strictly = F.when(key.isNull(), F.lit(not nulls_first)).otherwise(F.coalesce(compared, F.lit(False)))
        equal = key.eqNullSafe(F.lit(value))
        result = strictly | (equal & result)
    return result


def _sort_key(row: tuple[Any, ...], directions: list[tuple[bool, bool]]) -> tuple[Any, ...]:
    """A Python sort key that orders sampled rows as Spark's sort_columns would."""
    return tuple(
        _Ordered(value, ascending, nulls_first) for value, (ascending, nulls_first) in zip(row, directions, strict=True)
    )


class _Ordered:
    __slots__ = ("value", "ascending", "nulls_first")

    def __init__(self, value: Any, ascending: bool, nulls_first: bool) -> None:
        self.value, self.ascending, self.nulls_first = value, ascending, nulls_first

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Ordered) and self.value == other.value

    def __lt__(self, other: _Ordered) -> bool:
        if self.value is None or other.value is None:
            if self.value is None and other.value is None:
                return False
            return (self.value is None) == self.nulls_first
        return self.value < other.value if self.ascending else self.value > other.value
