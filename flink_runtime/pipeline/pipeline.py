"""The Pipeline API: describe a batch job in DataFrame terms, get a JobGraph.

    p = Pipeline("word count", parallelism=2)
    words = p.read_text("data/*.txt").select("explode(split(value, ' ')) AS word").filter("word != ''")
    words.key_by("word").agg("count(*) AS count").write_parquet("out/counts", mode="overwrite")
    graph = p.job_graph()

Every transformation returns a new DataSet and records one node of the logical plan
(`plan.Node`); nothing runs here and nothing imports Spark. The settings
`set_parallelism`, `name` and `disable_chaining` change the operator they are
called on and return it. Arguments are checked when given, so a mistake is reported
at the line that made it; `job_graph()` then translates the plan (`translate.py`)
into vertices and edges and validates the result.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Self

from flink_runtime.configuration import parse_size_bytes
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.operators.spark.io import DEFAULT_SPLIT_SIZE
from flink_runtime.operators.spark.ordering import parse_order
from flink_runtime.pipeline import arguments
from flink_runtime.pipeline.plan import Kind, Node
from flink_runtime.pipeline.resources import SlotSharingGroup, resource_spec
from flink_runtime.pipeline.sinks import partition_columns, sink_mode

JOIN_TYPES = ("inner", "left", "full")
MAX_NAME_LENGTH = 200

# "package.module:function": an importable function taking and returning a DataFrame.
_FUNCTION_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


# The argument checks (arguments.py) under the names the methods below call them by.
_parallelism = arguments.parallelism
_job_name = arguments.job_name
_job_config = arguments.job_config
_libraries = arguments.libraries
_expressions = arguments.expressions
_text = arguments.text
_paths = arguments.paths
_absolute = arguments.absolute
_schema = arguments.schema
_options = arguments.options


class Pipeline:
    """A batch job under construction: sources, transformations and sinks."""

    def __init__(
        self,
        name: str,
        parallelism: int = 1,
        chaining: bool = True,
        config: Mapping[str, Any] | None = None,
        libraries: Iterable[str] | None = None,
    ) -> None:
        self.name = _job_name(name)
        self.parallelism = _parallelism(parallelism, "Pipeline(parallelism=...)")
        self.chaining = bool(chaining)
        self.config = _job_config(config)
        self.libraries = _libraries(libraries)
        self._nodes: list[Node] = []
        self._groups: dict[str, SlotSharingGroup] = {}

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}, parallelism={self.parallelism})"

    @property
    def nodes(self) -> list[Node]:
        """The operators recorded so far, in the order they were called."""
        return list(self._nodes)

    def slot_sharing_group(self, name: str) -> SlotSharingGroup:
        """The pipeline's slot sharing group of this name (made on first use); give it
        resources with ``.resources(cpu=..., heap=...)`` and operators with
        ``.slot_sharing_group(group)``."""
        group = SlotSharingGroup(name)
        return self._groups.setdefault(group.name, group)

    @property
    def slot_sharing_group_resources(self) -> dict[str, Any]:
        """Named groups given resources: name -> JobGraph ResourceProfile."""
        return {name: group.spec for name, group in self._groups.items() if group.spec is not None}

    # -- sources ----------------------------------------------------------------------

    def read_text(
        self,
        paths: str | list[str],
        *,
        split_size: int | str = DEFAULT_SPLIT_SIZE,
        options: Mapping | None = None,
        monitor_interval: float | None = None,
    ) -> DataSet:
        """Lines of text files, one row per line in a string column `value`.

        With `monitor_interval` (seconds) the source is continuous: the job keeps
        running and processes the files that appear in its paths, in rounds."""
        return self._source("text", "read_text", paths, None, {}, options, split_size, monitor_interval)

    def read_csv(
        self,
        paths: str | list[str],
        schema: str | None = None,
        header: bool = True,
        options: Mapping | None = None,
        *,
        split_size: int | str = DEFAULT_SPLIT_SIZE,
        monitor_interval: float | None = None,
    ) -> DataSet:
        """CSV files; `schema` is a Spark DDL string ("id INT, name STRING"), else inferred."""
        return self._source("csv", "read_csv", paths, schema, {"header": header}, options, split_size, monitor_interval)

    def read_json(
        self,
        paths: str | list[str],
        schema: str | None = None,
        *,
        options: Mapping | None = None,
        split_size: int | str = DEFAULT_SPLIT_SIZE,
        monitor_interval: float | None = None,
    ) -> DataSet:
        """JSON Lines files; `schema` is a Spark DDL string, else inferred."""
        return self._source("json", "read_json", paths, schema, {}, options, split_size, monitor_interval)

    def read_parquet(
        self,
        paths: str | list[str],
        *,
        options: Mapping | None = None,
        split_size: int | str = DEFAULT_SPLIT_SIZE,
        monitor_interval: float | None = None,
    ) -> DataSet:
        return self._source("parquet", "read_parquet", paths, None, {}, options, split_size, monitor_interval)

    def read_jdbc(
        self,
        url: str,
        *,
        table: str | None = None,
        query: str | None = None,
        user: str | None = None,
        password: str | None = None,
        partition_column: str | None = None,
        lower: int | None = None,
        upper: int | None = None,
        splits: int | None = None,
        options: Mapping | None = None,
    ) -> DataSet:
        """Rows of a PostgreSQL table or query, in key ranges of `partition_column` (one
        input split each); `password` is `secret://<name>` (docs/pipelines.md, "JDBC")."""
        from flink_runtime.pipeline.jdbc_specs import source_spec

        spec = source_spec(url, table, query, user, password, partition_column, lower, upper, splits, options)
        return DataSet(self, self._add(Kind.SOURCE, [], spec, "Read JDBC", "read-jdbc"))

    def _source(
        self,
        file_format: str,
        method: str,
        paths: str | list[str],
        schema: str | None,
        defaults: dict[str, Any],
        options: Mapping | None,
        split_size: int | str,
        monitor_interval: float | None = None,
    ) -> DataSet:
        if monitor_interval is not None and (isinstance(monitor_interval, bool) or not monitor_interval > 0):
            raise ValueError(
                f"{method}(monitor_interval=...) must be a number of seconds > 0, got {monitor_interval!r}"
            )
        source = {
            "format": file_format,
            "paths": _paths(paths, method),
            "options": _options(defaults, options, method),
            "schema": _schema(schema, method),
            "split_size": parse_size_bytes(split_size, f"{method}(split_size=...)", minimum=1),
            "monitor_interval": None if monitor_interval is None else float(monitor_interval),
        }
        label = {"text": "Read text", "csv": "Read CSV", "json": "Read JSON", "parquet": "Read Parquet"}[file_format]
        return DataSet(self, self._add(Kind.SOURCE, [], source, label, f"read-{file_format}"))

    # -- the JobGraph -----------------------------------------------------------------

    def job_graph(self, job_id: str | None = None) -> JobGraph:
        """The JobGraph of everything that leads to a sink; raises ValueError without a sink."""
        from flink_runtime.pipeline.translate import translate

        return translate(self, job_id)

    # -- internals --------------------------------------------------------------------

    def _add(self, kind: Kind, inputs: list[Node], spec: dict[str, Any], label: str, id_prefix: str) -> Node:
        node = Node(kind, inputs, spec, label, id_prefix, sequence=len(self._nodes))
        self._nodes.append(node)
        return node


class _Operator:
    """Settings shared by a DataSet and a Sink: they configure the operator behind it."""

    def __init__(self, pipeline: Pipeline, node: Node) -> None:
        self._pipeline = pipeline
        self._node = node

    @property
    def pipeline(self) -> Pipeline:
        return self._pipeline

    def set_parallelism(self, parallelism: int) -> Self:
        """Run this operator with `parallelism` subtasks instead of the pipeline's default."""
        self._node.parallelism = _parallelism(parallelism, "set_parallelism()")
        return self

    def name(self, text: str) -> Self:
        """Name this operator in the vertex name (the JobManager's UI, logs and REST answers)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"name() needs a non-empty string, got {text!r}.")
        if len(text) > MAX_NAME_LENGTH:
            raise ValueError(f"name() takes at most {MAX_NAME_LENGTH} characters, got {len(text)}; shorten it.")
        self._node.name = text.strip()
        return self

    def disable_chaining(self) -> Self:
        """Start a new task at this operator instead of chaining it to the one before."""
        self._node.chaining = False
        return self

    def resources(
        self, cpu: float | None = None, heap: int | str | None = None, managed: int | str | None = None
    ) -> Self:
        """What one subtask of this operator needs: ``cpu`` cores (fractions allowed),
        ``heap`` task heap and ``managed`` memory (sizes such as "512m" or "1g"). Its
        slot is carved to fit; operators chained into one task add up."""
        self._node.resources = resource_spec(cpu, heap, managed, "resources")
        return self

    def slot_sharing_group(self, group: str | SlotSharingGroup) -> Self:
        """Run this operator in slots of ``group`` (a name or ``Pipeline.slot_sharing_group``);
        operators after it inherit the group, and it does not chain across groups."""
        if isinstance(group, SlotSharingGroup):
            if self._pipeline._groups.get(group.name) is not group:
                raise ValueError(
                    f"slot_sharing_group(): {group!r} belongs to another pipeline; make it with this "
                    f"pipeline's slot_sharing_group({group.name!r})."
                )
        else:
            group = self._pipeline.slot_sharing_group(group)
        self._node.slot_sharing_group = group.name
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._node.display_name!r})"


class DataSet(_Operator):
    """Rows produced by an operator; each transformation returns a new DataSet."""

    # -- narrow operators (chainable) ----------------------------------------------------

    def select(self, *exprs: str) -> DataSet:
        """Spark SQL expressions, as DataFrame.selectExpr: select("word", "length(word) AS n")."""
        expressions = _expressions(exprs, "select", 'select("word", "length(word) AS n")')
        return self._narrow({"op": "select", "exprs": expressions}, "Select", "select")

    def filter(self, condition: str) -> DataSet:
        """Keep the rows for which the Spark SQL condition holds: filter("n > 3")."""
        condition = _text(condition, "filter", "a condition", 'filter("n > 3")')
        return self._narrow({"op": "filter", "condition": condition}, "Filter", "filter")

    where = filter

    def with_column(self, name: str, expr: str) -> DataSet:
        """Add or replace column `name` with a Spark SQL expression."""
        name = _text(name, "with_column", "a column name", 'with_column("n", "length(word)")')
        expr = _text(expr, "with_column", "an expression", 'with_column("n", "length(word)")')
        return self._narrow({"op": "with_column", "name": name, "expr": expr}, "With column", "with-column")

    def sql(self, query: str) -> DataSet:
        """A Spark SQL query over the input, which is the view named `input`."""
        query = _text(query, "sql", "a query", 'sql("SELECT word, count(*) AS n FROM input GROUP BY word")')
        return self._narrow({"op": "sql", "query": query}, "SQL", "sql")

    def transform(self, function: str) -> DataSet:
        """An importable "package.module:function" taking and returning a DataFrame."""
        if not isinstance(function, str) or not _FUNCTION_PATH.match(function.strip()):
            raise ValueError(
                f"transform() needs a function path of the form 'package.module:function', got {function!r}; "
                "the function takes a DataFrame and returns one, and its module must be importable on the "
                "TaskManagers (e.g. listed in the pipeline's libraries)."
            )
        return self._narrow({"op": "transform", "function": function.strip()}, "Transform", "transform")

    def _narrow(self, operator: dict[str, Any], label: str, id_prefix: str) -> DataSet:
        return DataSet(self._pipeline, self._pipeline._add(Kind.NARROW, [self._node], operator, label, id_prefix))

    # -- operators behind an exchange ----------------------------------------------------

    def key_by(self, *keys: str) -> KeyedDataSet:
        """Group by columns; aggregate the groups with .agg(...)."""
        return KeyedDataSet(self, _expressions(keys, "key_by", 'key_by("word")', what="key column"))

    def distinct(self) -> DataSet:
        """Drop duplicate rows."""
        node = self._pipeline._add(Kind.DISTINCT, [self._node], {}, "Distinct", "distinct")
        return DataSet(self._pipeline, node)

    def join(self, other: DataSet, on: str | list[str], how: str = "inner") -> DataSet:
        """Equi-join on columns present in both inputs; `how` is inner, left or full."""
        self._check_same_pipeline(other, "join")
        example = 'join(other, on="id")'
        columns = _expressions([on] if isinstance(on, str) else on, "join", example, what="join column", arg="on")
        if how not in JOIN_TYPES:
            raise ValueError(f"join() how must be one of {', '.join(map(repr, JOIN_TYPES))}, got {how!r}.")
        node = self._pipeline._add(Kind.JOIN, [self._node, other._node], {"on": columns, "how": how}, "Join", "join")
        return DataSet(self._pipeline, node)

    def union(self, *others: DataSet) -> DataSet:
        """All rows of this and the other DataSets (columns matched by position, as SQL UNION ALL)."""
        if not others:
            raise ValueError("union() needs at least one other DataSet, e.g. a.union(b) or a.union(b, c).")
        for other in others:
            self._check_same_pipeline(other, "union")
        inputs = [self._node, *(other._node for other in others)]
        return DataSet(self._pipeline, self._pipeline._add(Kind.UNION, inputs, {}, "Union", "union"))

    def order_by(self, *columns: str) -> DataSet:
        """The whole data set in order: order_by("amount DESC NULLS LAST", "id"). Subtask i
        gets the i-th range of keys, sorted (range partitioning from a sample), so the
        sink's files read in subtask order are in global order. Directions and null
        ordering as Spark SQL's (ASC NULLS FIRST and DESC NULLS LAST by default)."""
        order = _expressions(columns, "order_by", 'order_by("amount DESC", "id")', what="order column")
        for text in order:
            parse_order(text)
        node = self._pipeline._add(Kind.ORDER, [self._node], {"order": order}, "Order by", "order-by")
        return DataSet(self._pipeline, node)

    def limit(self, n: int) -> DataSet:
        """The first `n` rows; after order_by the top n in that order (each producer keeps
        its own top n, one subtask the final n, in order). Without an order, any n rows."""
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < 2**31:
            raise ValueError(f"limit() needs a row count from 0 to {2**31 - 1}, got {n!r}.")
        node, order = self._node, []
        if node.kind is Kind.ORDER:  # top-N: the order travels with the limit, not as a range sort
            node, order = node.inputs[0], list(node.spec["order"])
        label = "Top-N" if order else "Limit"
        spec = {"n": n, "order": order}
        return DataSet(self._pipeline, self._pipeline._add(Kind.LIMIT, [node], spec, label, "limit"))

    def rebalance(self) -> DataSet:
        """Spread the rows evenly (round robin) over the next operator's subtasks."""
        node = self._pipeline._add(Kind.REBALANCE, [self._node], {}, "Rebalance", "rebalance")
        return DataSet(self._pipeline, node)

    # -- sinks --------------------------------------------------------------------------

    # Modes and partition_by: see pipeline/sinks.py (and docs/pipelines.md, "Sinks").

    def write_parquet(
        self,
        path: str,
        mode: str = "error",
        *,
        options: Mapping | None = None,
        partition_by: str | list[str] | None = None,
    ) -> Sink:
        return self._sink("parquet", "write_parquet", path, mode, {}, options, partition_by)

    def write_csv(
        self,
        path: str,
        mode: str = "error",
        header: bool = True,
        options: Mapping | None = None,
        *,
        partition_by: str | list[str] | None = None,
    ) -> Sink:
        return self._sink("csv", "write_csv", path, mode, {"header": header}, options, partition_by)

    def write_json(
        self,
        path: str,
        mode: str = "error",
        *,
        options: Mapping | None = None,
        partition_by: str | list[str] | None = None,
    ) -> Sink:
        """JSON Lines files."""
        return self._sink("json", "write_json", path, mode, {}, options, partition_by)

    def write_jdbc(
        self,
        url: str,
        table: str,
        mode: str = "append",
        *,
        keys: list[str] | None = None,
        user: str | None = None,
        password: str | None = None,
        options: Mapping | None = None,
    ) -> Sink:
        """Write to a PostgreSQL table exactly once (append, overwrite, or upsert on `keys`),
        published in one transaction when the job finishes (docs/pipelines.md, "JDBC")."""
        from flink_runtime.pipeline.jdbc_specs import sink_spec

        spec = sink_spec(url, table, mode, keys, user, password, options)
        return Sink(self._pipeline, self._pipeline._add(Kind.SINK, [self._node], spec, "Write JDBC", "write-jdbc"))

    def _sink(
        self,
        file_format: str,
        method: str,
        path: str,
        mode: str,
        defaults: dict[str, Any],
        options: Mapping | None,
        partition_by: str | list[str] | None = None,
    ) -> Sink:
        if not isinstance(path, str) or not path.strip():
            raise ValueError(f"{method}() needs a non-empty output path, got {path!r}.")
        mode = sink_mode(mode, method)
        columns = partition_columns(partition_by, mode, method)
        sink = {
            "format": file_format,
            "path": _absolute(path.strip()),
            "mode": mode,
            "options": _options(defaults, options, method),
        }
        if columns:  # only when given: the JSON of an unpartitioned sink stays as it was
            sink["partition_by"] = columns
        label = {"csv": "Write CSV", "json": "Write JSON", "parquet": "Write Parquet"}[file_format]
        node = self._pipeline._add(Kind.SINK, [self._node], sink, label, f"write-{file_format}")
        return Sink(self._pipeline, node)

    def _check_same_pipeline(self, other: Any, method: str) -> None:
        if not isinstance(other, DataSet):
            raise ValueError(f"{method}() takes DataSets, got {type(other).__name__} {other!r}.")
        if other._pipeline is not self._pipeline:
            raise ValueError(
                f"{method}(): the other DataSet belongs to another pipeline ({other._pipeline.name!r}) than "
                f"this one ({self._pipeline.name!r}); a pipeline can only combine its own DataSets, so build "
                "both from the same Pipeline."
            )


class KeyedDataSet:
    """A DataSet grouped by key columns; .agg(...) aggregates each group."""

    def __init__(self, dataset: DataSet, keys: list[str]) -> None:
        self._dataset = dataset
        self.keys = keys

    def agg(self, *aggregate_exprs: str) -> DataSet:
        """Spark SQL aggregates with aliases: agg("count(*) AS n", "avg(price) AS mean").

        The result has the key columns and one column per aggregate. count, sum, min,
        max and avg are combined on the producer side before the exchange.
        """
        aggregates = _expressions(aggregate_exprs, "agg", 'agg("count(*) AS n")', what="aggregate expression")
        pipeline = self._dataset._pipeline
        spec = {"keys": list(self.keys), "aggregates": aggregates}
        node = pipeline._add(Kind.AGGREGATE, [self._dataset._node], spec, "Aggregate", "aggregate")
        return DataSet(pipeline, node)

    def sql(self, query: str) -> DataSet:
        """A Spark SQL query over all rows of each key at once (the view `input`): for
        window functions, sql("SELECT *, rank() OVER (PARTITION BY region ORDER BY amount
        DESC) AS r FROM input") after key_by("region"). Its PARTITION BY must include the
        keys: a window over rows of several subtasks would see only its own share."""
        query = _text(
            query, "sql", "a query", 'sql("SELECT *, rank() OVER (PARTITION BY k ORDER BY v) AS r FROM input")'
        )
        pipeline = self._dataset._pipeline
        spec = {"keys": list(self.keys), "query": query}
        return DataSet(pipeline, pipeline._add(Kind.KEYED_SQL, [self._dataset._node], spec, "SQL", "sql"))

    def __repr__(self) -> str:
        return f"KeyedDataSet({self._dataset!r}, keys={self.keys!r})"


class Sink(_Operator):
    """Where a DataSet is written; ends a branch of the pipeline."""
