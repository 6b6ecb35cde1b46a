"""The file sinks' arguments, checked where the user calls write_parquet/csv/json.

Modes, as Spark's DataFrameWriter and Flink's INSERT name them:

- "error" (Spark's "errorifexists", the default): refuse the job when the path has data;
- "overwrite": replace everything at the path when the job finishes;
- "append": add the job's files;
- "overwrite_partitions": with `partition_by`, replace only the partitions the job
  produced (Spark's dynamic partition overwrite, Flink's INSERT OVERWRITE into a
  partitioned table): the re-run of one day of a backfill replaces that day only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

SINK_MODES = ("overwrite", "append", "error", "overwrite_partitions")
MODE_ALIASES = {"errorifexists": "error", "default": "error"}

# A column name as Spark writes it into a directory name: no path separators, no '='.
_COLUMN = re.compile(r"^[^/\\=\s][^/\\=]*$")


def sink_mode(mode: Any, method: str) -> str:
    normalized = MODE_ALIASES.get(mode, mode) if isinstance(mode, str) else mode
    if normalized not in SINK_MODES:
        raise ValueError(
            f"{method}() mode must be one of {', '.join(map(repr, SINK_MODES))}, got {mode!r}; "
            "'error' (the default) fails when the path exists, 'overwrite_partitions' (with partition_by) "
            "replaces only the partitions the job writes."
        )
    return normalized


def partition_columns(partition_by: str | Iterable[str] | None, mode: str, method: str) -> list[str]:
    """The partition columns, checked; an unknown column is refused at submit, when the
    output's columns are known."""
    if partition_by is None:
        columns: list[Any] = []
    elif isinstance(partition_by, str):
        columns = [partition_by]
    elif isinstance(partition_by, Iterable):
        columns = list(partition_by)
    else:
        raise ValueError(f"{method}() partition_by must be a column name or a list of them, got {partition_by!r}.")
    for position, column in enumerate(columns, 1):
        if not isinstance(column, str) or not _COLUMN.match(column.strip() or " "):
            raise ValueError(
                f"{method}() partition_by column #{position} must be a column name without '/', '\\\\' or '=' "
                f"(it names directories such as day=2024-01-01), got {column!r}."
            )
    columns = [column.strip() for column in columns]
    duplicated = sorted({column for column in columns if columns.count(column) > 1})
    if duplicated:
        raise ValueError(f"{method}() partition_by names {', '.join(map(repr, duplicated))} more than once.")
    if mode == "overwrite_partitions" and not columns:
        raise ValueError(
            f"{method}(mode='overwrite_partitions') needs partition_by=[...] columns: it replaces only the "
            "partitions the job writes. Use mode='overwrite' to replace the whole output."
        )
    return columns
