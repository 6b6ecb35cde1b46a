"""The Pipeline API and its translation to a JobGraph (no Spark needed)."""

from __future__ import annotations

import os

import pytest

from flink_runtime.configuration import parse_size_bytes as parse_size
from flink_runtime.jobgraph import DistributionPattern, JobGraph, Partitioner
from flink_runtime.pipeline import DataSet, KeyedDataSet, Pipeline, Sink

ALL_TO_ALL = DistributionPattern.ALL_TO_ALL
POINTWISE = DistributionPattern.POINTWISE


def word_count(**pipeline_options) -> tuple[Pipeline, DataSet]:
    p = Pipeline("word count", parallelism=2, **pipeline_options)
    words = (
        p.read_text("data/*.txt", split_size="64m").select("explode(split(value, ' ')) AS word").filter("word != ''")
    )
    return p, words


def vertices(graph: JobGraph) -> dict[str, dict]:
    return {vertex.id: vertex.config for vertex in graph.vertices}


def wiring(graph: JobGraph) -> list[tuple[str, str, str, str, list[str]]]:
    """(producer, consumer, pattern, partitioner, keys) for every edge, in edge order."""
    producers = {dataset.id: dataset.producer for dataset in graph.intermediate_datasets}
    return [
        (producers[edge.source], edge.target, edge.distribution_pattern, edge.partitioner, edge.keys)
        for edge in graph.edges
    ]


def operators(graph: JobGraph, vertex_id: str) -> list[dict]:
    return vertices(graph)[vertex_id]["operators"]


def round_trip(graph: JobGraph) -> JobGraph:
    decoded = JobGraph.from_json(graph.to_json())
    assert decoded == graph
    return decoded


# -- translation ----------------------------------------------------------------------------


def test_word_count_is_two_vertices_with_a_partial_aggregate_in_the_source_chain():
    p, words = word_count()
    words.key_by("word").agg("count(*) AS count").write_parquet("out/counts", mode="overwrite")

    graph = p.job_graph()

    assert [vertex.id for vertex in graph.vertices] == ["read-text-1", "aggregate-2"]
    assert [vertex.name for vertex in graph.vertices] == [
        "Read text -> Select -> Filter -> Partial aggregate",
        "Final aggregate -> Write Parquet",
    ]
    assert all(vertex.invokable == "spark" and vertex.parallelism == 2 for vertex in graph.vertices)
    source, final = graph.vertices
    assert source.config == {
        "source": {
            "format": "text",
            "paths": [os.path.abspath("data/*.txt")],
            "options": {},
            "schema": None,
            "split_size": 64 * 1024 * 1024,
            "monitor_interval": None,
        },
        "operators": [
            {"op": "select", "exprs": ["explode(split(value, ' ')) AS word"]},
            {"op": "filter", "condition": "word != ''"},
            {"op": "aggregate", "keys": ["word"], "aggregates": ["count(*) AS count"], "phase": "partial"},
        ],
    }
    assert final.config == {
        "operators": [{"op": "aggregate", "keys": ["word"], "aggregates": ["count(*) AS count"], "phase": "final"}],
        "sink": {"format": "parquet", "path": os.path.abspath("out/counts"), "mode": "overwrite", "options": {}},
    }
    assert wiring(graph) == [("read-text-1", "aggregate-2", ALL_TO_ALL, Partitioner.HASH, ["word"])]
    round_trip(graph)


def test_without_chaining_every_operator_is_a_vertex():
    p, words = word_count(chaining=False)
    words.key_by("word").agg("count(*) AS count").write_parquet("out/counts")

    graph = p.job_graph()

    assert [vertex.id for vertex in graph.vertices] == [
        "read-text-1",
        "select-2",
        "filter-3",
        "aggregate-4",
        "write-parquet-5",
    ]
    assert operators(graph, "read-text-1") == []
    assert operators(graph, "select-2") == [{"op": "select", "exprs": ["explode(split(value, ' ')) AS word"]}]
    # The combiner belongs to the exchange, not to a chain: it stays with the producer.
    assert [op["op"] for op in operators(graph, "filter-3")] == ["filter", "aggregate"]
    assert operators(graph, "filter-3")[1]["phase"] == "partial"
    assert operators(graph, "aggregate-4")[0]["phase"] == "final"
    assert vertices(graph)["write-parquet-5"] == {
        "operators": [],
        "sink": {"format": "parquet", "path": os.path.abspath("out/counts"), "mode": "error", "options": {}},
    }
    assert wiring(graph) == [
        ("read-text-1", "select-2", POINTWISE, Partitioner.FORWARD, []),
        ("select-2", "filter-3", POINTWISE, Partitioner.FORWARD, []),
        ("filter-3", "aggregate-4", ALL_TO_ALL, Partitioner.HASH, ["word"]),
        ("aggregate-4", "write-parquet-5", POINTWISE, Partitioner.FORWARD, []),
    ]
    round_trip(graph)


def test_disable_chaining_starts_a_new_vertex_at_that_operator_only():
    p = Pipeline("p", parallelism=3)
    (
        p.read_csv("in.csv")
        .select("a", "b")
        .filter("a > 1")
        .disable_chaining()
        .with_column("c", "a + b")
        .write_json("out")
    )

    graph = p.job_graph()

    assert [(vertex.id, vertex.name) for vertex in graph.vertices] == [
        ("read-csv-1", "Read CSV -> Select"),
        ("filter-2", "Filter -> With column -> Write JSON"),
    ]
    assert operators(graph, "filter-2") == [
        {"op": "filter", "condition": "a > 1"},
        {"op": "with_column", "name": "c", "expr": "a + b"},
    ]
    assert wiring(graph) == [("read-csv-1", "filter-2", POINTWISE, Partitioner.FORWARD, [])]


def test_a_parallelism_change_breaks_the_chain_with_a_rebalance():
    p = Pipeline("p", parallelism=4)
    source = p.read_parquet(["a.parquet", "b.parquet"])
    narrow = source.select("x").set_parallelism(2).transform("my_pkg.udfs:clean").set_parallelism(2)
    narrow.write_csv("out", mode="append").set_parallelism(2)

    graph = p.job_graph()

    assert [(vertex.id, vertex.parallelism) for vertex in graph.vertices] == [("read-parquet-1", 4), ("select-2", 2)]
    assert operators(graph, "select-2") == [
        {"op": "select", "exprs": ["x"]},
        {"op": "transform", "function": "my_pkg.udfs:clean"},
    ]
    assert vertices(graph)["read-parquet-1"]["source"]["paths"] == [
        os.path.abspath("a.parquet"),
        os.path.abspath("b.parquet"),
    ]
    assert wiring(graph) == [("read-parquet-1", "select-2", ALL_TO_ALL, Partitioner.REBALANCE, [])]


def test_an_operator_without_set_parallelism_runs_with_the_pipeline_default():
    p = Pipeline("p", parallelism=4)
    p.read_parquet("a").select("x").set_parallelism(2).transform("m:f").write_csv("out")

    graph = p.job_graph()

    # The transform gets the pipeline's 4, not its producer's 2, so the chain breaks again.
    assert [(vertex.id, vertex.parallelism) for vertex in graph.vertices] == [
        ("read-parquet-1", 4),
        ("select-2", 2),
        ("transform-3", 4),
    ]
    assert graph.vertices[2].name == "Transform -> Write CSV"
    assert [edge[3] for edge in wiring(graph)] == [Partitioner.REBALANCE, Partitioner.REBALANCE]


def test_an_aggregate_that_cannot_be_combined_runs_once_complete():
    p, words = word_count()
    words.key_by("word").agg("count(DISTINCT word) AS n").write_parquet("out")

    graph = p.job_graph()

    assert [op["op"] for op in operators(graph, "read-text-1")] == ["select", "filter"]
    assert operators(graph, "aggregate-2") == [
        {"op": "aggregate", "keys": ["word"], "aggregates": ["count(DISTINCT word) AS n"], "phase": "complete"}
    ]
    assert graph.vertices[1].name == "Aggregate -> Write Parquet"


def test_aggregate_parallelism_and_multiple_keys_and_aggregates():
    p = Pipeline("p", parallelism=2)
    totals = p.read_json("in", schema="shop STRING, day DATE, price DOUBLE").key_by("shop", "day")
    assert isinstance(totals, KeyedDataSet)
    totals.agg("sum(price) AS total", "avg(price) AS mean").set_parallelism(5).write_parquet("out").set_parallelism(5)

    graph = p.job_graph()

    assert [vertex.parallelism for vertex in graph.vertices] == [2, 5]
    assert vertices(graph)["read-json-1"]["source"]["schema"] == "shop STRING, day DATE, price DOUBLE"
    assert operators(graph, "aggregate-2")[0] == {
        "op": "aggregate",
        "keys": ["shop", "day"],
        "aggregates": ["sum(price) AS total", "avg(price) AS mean"],
        "phase": "final",
    }
    assert wiring(graph) == [("read-json-1", "aggregate-2", ALL_TO_ALL, Partitioner.HASH, ["shop", "day"])]


def test_distinct_dedupes_before_and_after_a_hash_exchange():
    p = Pipeline("p", parallelism=2)
    p.read_text("in").distinct().select("value AS line").write_json("out")

    graph = p.job_graph()

    assert [(vertex.id, vertex.name) for vertex in graph.vertices] == [
        ("read-text-1", "Read text -> Partial distinct"),
        ("distinct-2", "Distinct -> Select -> Write JSON"),
    ]
    assert operators(graph, "read-text-1") == [{"op": "distinct"}]
    assert operators(graph, "distinct-2") == [{"op": "distinct"}, {"op": "select", "exprs": ["value AS line"]}]
    assert wiring(graph) == [("read-text-1", "distinct-2", ALL_TO_ALL, Partitioner.HASH, [])]


def test_join_hashes_both_inputs_on_the_join_columns_left_first():
    p = Pipeline("join", parallelism=2)
    orders = p.read_parquet("orders").filter("amount > 0")
    customers = p.read_csv("customers.csv", schema="id INT, name STRING")
    orders.join(customers, on="id", how="left").write_parquet("out")

    graph = p.job_graph()

    assert [vertex.id for vertex in graph.vertices] == ["read-parquet-1", "read-csv-2", "join-3"]
    assert graph.vertices[2].name == "Join -> Write Parquet"
    assert operators(graph, "join-3") == [{"op": "join", "on": ["id"], "how": "left"}]
    assert wiring(graph) == [
        ("read-parquet-1", "join-3", ALL_TO_ALL, Partitioner.HASH, ["id"]),
        ("read-csv-2", "join-3", ALL_TO_ALL, Partitioner.HASH, ["id"]),
    ]
    round_trip(graph)


def test_join_input_order_follows_the_call_not_the_creation_order():
    p = Pipeline("join", parallelism=2)
    first = p.read_parquet("a")
    second = p.read_parquet("b")
    second.join(first, on=["k1", "k2"], how="full").write_parquet("out")

    graph = p.job_graph()

    assert [(producer, keys) for producer, _, _, _, keys in wiring(graph)] == [
        ("read-parquet-2", ["k1", "k2"]),
        ("read-parquet-1", ["k1", "k2"]),
    ]


def test_union_of_three_rebalances_every_input_into_one_vertex():
    p = Pipeline("union", parallelism=2)
    a, b, c = p.read_json("a"), p.read_json("b"), p.read_json("c").set_parallelism(1)
    a.union(b, c).write_csv("out", header=False)

    graph = p.job_graph()

    assert [vertex.id for vertex in graph.vertices] == ["read-json-1", "read-json-2", "read-json-3", "union-4"]
    assert vertices(graph)["union-4"] == {
        "operators": [{"op": "union"}],
        "sink": {"format": "csv", "path": os.path.abspath("out"), "mode": "error", "options": {"header": "false"}},
    }
    assert wiring(graph) == [(f"read-json-{i}", "union-4", ALL_TO_ALL, Partitioner.REBALANCE, []) for i in (1, 2, 3)]
    # Three "Read JSON" vertices: vertex names must be unique.
    assert [vertex.name for vertex in graph.vertices] == [
        "Read JSON",
        "Read JSON (2)",
        "Read JSON (3)",
        "Union -> Write CSV",
    ]
    round_trip(graph)


def test_rebalance_starts_a_vertex_behind_a_round_robin_exchange():
    p = Pipeline("p", parallelism=2)
    p.read_text("in").rebalance().set_parallelism(8).select("upper(value) AS v").write_parquet("out")

    graph = p.job_graph()

    assert [(vertex.id, vertex.name, vertex.parallelism) for vertex in graph.vertices] == [
        ("read-text-1", "Read text", 2),
        ("rebalance-2", "Rebalance", 8),
        ("select-3", "Select -> Write Parquet", 2),
    ]
    assert operators(graph, "rebalance-2") == []
    assert wiring(graph) == [
        ("read-text-1", "rebalance-2", ALL_TO_ALL, Partitioner.REBALANCE, []),
        ("rebalance-2", "select-3", ALL_TO_ALL, Partitioner.REBALANCE, []),
    ]


def test_a_dataset_used_twice_produces_two_datasets_and_chains_into_neither():
    p = Pipeline("p", parallelism=2)
    cleaned = p.read_text("in").select("trim(value) AS line")
    cleaned.filter("line != ''").write_parquet("non-empty")
    cleaned.key_by("line").agg("count(*) AS n").write_json("counts")

    graph = p.job_graph()

    assert [vertex.id for vertex in graph.vertices] == ["read-text-1", "filter-2", "aggregate-3"]
    # No partial aggregate in the shared vertex: the filter branch reads its output too.
    assert operators(graph, "read-text-1") == [{"op": "select", "exprs": ["trim(value) AS line"]}]
    assert operators(graph, "aggregate-3")[0]["phase"] == "complete"
    assert [dataset.producer for dataset in graph.intermediate_datasets] == ["read-text-1", "read-text-1"]
    assert len({dataset.id for dataset in graph.intermediate_datasets}) == 2
    assert wiring(graph) == [
        ("read-text-1", "filter-2", POINTWISE, Partitioner.FORWARD, []),
        ("read-text-1", "aggregate-3", ALL_TO_ALL, Partitioner.HASH, ["line"]),
    ]
    assert "sink" not in vertices(graph)["read-text-1"]
    round_trip(graph)


def test_a_shared_dataset_gets_no_partial_distinct_and_self_join_gets_two_datasets():
    p = Pipeline("p", parallelism=2)
    source = p.read_parquet("in")
    source.distinct().write_parquet("a")
    source.join(source, on="id").write_parquet("b")

    graph = p.job_graph()

    assert operators(graph, "read-parquet-1") == []
    assert len(graph.intermediate_datasets) == 3
    join_inputs = [edge for edge in graph.edges if edge.target == "join-3"]
    assert len(join_inputs) == 2 and join_inputs[0].source != join_inputs[1].source


def test_sinks_as_separate_vertices_when_their_input_is_shared():
    p = Pipeline("p", parallelism=2)
    source = p.read_text("in")
    source.write_parquet("a")
    source.write_json("b").set_parallelism(1)

    graph = p.job_graph()

    assert [(vertex.id, vertex.name, vertex.parallelism) for vertex in graph.vertices] == [
        ("read-text-1", "Read text", 2),
        ("write-parquet-2", "Write Parquet", 2),
        ("write-json-3", "Write JSON", 1),
    ]
    assert wiring(graph) == [
        ("read-text-1", "write-parquet-2", POINTWISE, Partitioner.FORWARD, []),
        ("read-text-1", "write-json-3", ALL_TO_ALL, Partitioner.REBALANCE, []),
    ]


def test_a_source_written_directly_is_one_vertex_with_source_and_sink():
    p = Pipeline("copy")
    p.read_csv("in.csv", header=False, options={"sep": ";", "inferSchema": True}).write_csv(
        "out", options={"compression": "gzip"}
    )

    (vertex,) = p.job_graph().vertices
    assert vertex.parallelism == 1
    assert vertex.config == {
        "source": {
            "format": "csv",
            "paths": [os.path.abspath("in.csv")],
            "options": {"header": "false", "sep": ";", "inferSchema": "true"},
            "schema": None,
            "split_size": 1024 * 1024 * 1024,  # io.DEFAULT_SPLIT_SIZE
            "monitor_interval": None,
        },
        "operators": [],
        "sink": {
            "format": "csv",
            "path": os.path.abspath("out"),
            "mode": "error",
            "options": {"header": "true", "compression": "gzip"},
        },
    }


def test_csv_header_option():
    p = Pipeline("p")
    p.read_csv("in.csv").write_parquet("out")
    assert p.job_graph().vertices[0].config["source"]["options"] == {"header": "true"}


def test_sql_where_and_only_operators_leading_to_a_sink_are_translated():
    p = Pipeline("p")
    source = p.read_parquet("in")
    source.select("unused")  # leads nowhere: not translated
    source.where("x IS NOT NULL").sql("SELECT x, count(*) AS n FROM input GROUP BY x").write_parquet("out")

    graph = p.job_graph()

    assert [vertex.name for vertex in graph.vertices] == ["Read Parquet -> Filter -> SQL -> Write Parquet"]
    assert operators(graph, "read-parquet-1") == [
        {"op": "filter", "condition": "x IS NOT NULL"},
        {"op": "sql", "query": "SELECT x, count(*) AS n FROM input GROUP BY x"},
    ]


def test_names_override_operator_names_in_the_vertex_name():
    p, words = word_count()
    words.name("Tokenize")
    counts = words.key_by("word").agg("count(*) AS count").name("Count words")
    sink = counts.write_parquet("out").name("Save counts")
    assert isinstance(sink, Sink)

    graph = p.job_graph()

    assert [vertex.name for vertex in graph.vertices] == [
        "Read text -> Select -> Tokenize -> Count words (partial)",
        "Count words -> Save counts",
    ]


def test_pipeline_config_libraries_and_job_id_go_to_the_job_graph():
    p = Pipeline("p", config={"restart-strategy.type": "fixed-delay"}, libraries=["deps/udfs.zip"], parallelism=3)
    p.read_text("in").transform("udfs.text:clean").write_parquet("out")

    graph = p.job_graph(job_id="0123456789abcdef0123456789abcdef")

    assert graph.job_id == "0123456789abcdef0123456789abcdef"
    assert graph.name == "p"
    assert graph.config == {"restart-strategy.type": "fixed-delay"}
    assert graph.libraries == ["deps/udfs.zip"]
    assert round_trip(graph).config == {"restart-strategy.type": "fixed-delay"}
    # Without a job id one is generated, and each call builds a fresh graph.
    first, second = p.job_graph(), p.job_graph()
    assert first.job_id and second.job_id and first.job_id != second.job_id
    assert first.vertices == second.vertices


def test_a_bad_job_id_is_rejected_by_validation():
    p = Pipeline("p")
    p.read_text("in").write_parquet("out")
    with pytest.raises(ValueError, match="job_id"):
        p.job_graph(job_id="not-a-job-id")


def test_a_pipeline_without_a_sink_fails():
    p = Pipeline("p")
    p.read_text("in").select("value")
    with pytest.raises(ValueError, match="add a sink with write_parquet/write_csv/write_json"):
        p.job_graph()
    with pytest.raises(ValueError, match="no sink"):
        Pipeline("empty").job_graph()


def test_a_long_chain_gets_a_valid_vertex_name():
    p = Pipeline("p")
    data = p.read_text("in")
    for i in range(60):
        data = data.filter(f"length(value) > {i}")
    data.write_parquet("out")

    (vertex,) = p.job_graph().vertices
    assert len(vertex.name) <= 256
    assert vertex.name.startswith("Read text -> ") and vertex.name.endswith(" -> Write Parquet")
    assert len(vertex.config["operators"]) == 60


def test_split_size_parsing():
    assert parse_size(1000) == 1000
    assert parse_size("64m") == 64 * 1024**2
    assert parse_size("1g") == 1024**3
    assert parse_size("1G") == 1024**3
    assert parse_size("512KiB") == 512 * 1024
    assert parse_size("16mb") == 16 * 1024**2
    assert parse_size("4096") == 4096


# -- argument checks -------------------------------------------------------------------------


def source() -> DataSet:
    return Pipeline("p").read_text("in")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Pipeline(""), "non-empty name"),
        (lambda: Pipeline("p", parallelism=0), r"parallelism=\.\.\.\) must be an integer from 1 to 32768, got 0"),
        (lambda: Pipeline("p", parallelism=True), "must be an integer"),
        (lambda: Pipeline("p", libraries="udfs.zip"), "list of paths"),
        (lambda: Pipeline("p", config={1: "x"}), "config keys must be strings"),
        (lambda: Pipeline("p").read_text([]), "non-empty list of paths"),
        (lambda: Pipeline("p").read_text(["a", ""]), "every path must be a non-empty string"),
        (lambda: Pipeline("p").read_text("in", split_size="64x"), r"split_size=\.\.\.\) must be a number of bytes"),
        (lambda: Pipeline("p").read_text("in", split_size=0), "at least 1 byte"),
        (lambda: Pipeline("p").read_text("in", split_size=-5), "at least 1 byte"),
        (lambda: Pipeline("p").read_csv("in", schema=""), "schema must be a Spark DDL string"),
        (lambda: Pipeline("p").read_csv("in", options=["sep"]), "options must be a dict"),
        (lambda: Pipeline("p").read_csv("in", options={"sep": None}), "option 'sep' must be a string"),
        (lambda: source().select(), r"select\(\) needs at least one expression"),
        (lambda: source().select("a", " "), r"select\(\): expression #2 must be a non-empty string"),
        (lambda: source().filter(""), r"filter\(\) needs a condition"),
        (lambda: source().where(None), r"filter\(\) needs a condition"),
        (lambda: source().with_column("", "1"), r"with_column\(\) needs a column name"),
        (lambda: source().with_column("n", ""), r"with_column\(\) needs an expression"),
        (lambda: source().sql("  "), r"sql\(\) needs a query"),
        (lambda: source().transform("clean"), "of the form 'package.module:function'"),
        (lambda: source().transform("pkg.mod:"), "of the form 'package.module:function'"),
        (lambda: source().transform("pkg mod:fn"), "of the form 'package.module:function'"),
        (lambda: source().key_by(), r"key_by\(\) needs at least one key column"),
        (lambda: source().key_by("a").agg(), r"agg\(\) needs at least one aggregate expression"),
        (lambda: source().key_by("a").agg(""), r"agg\(\): aggregate expression #1 must be a non-empty string"),
        (lambda: source().join(source().select("x"), on="id"), r"belongs to another pipeline \('p'\)"),
        (lambda: source().join("other", on="id"), r"join\(\) takes DataSets"),
        (lambda: (s := source()).join(s, on=[]), r"join\(\) on needs at least one join column"),
        (lambda: (s := source()).join(s, on="id", how="outer"), "how must be one of 'inner', 'left', 'full'"),
        (lambda: source().union(), r"union\(\) needs at least one other DataSet"),
        (lambda: source().union(source()), "belongs to another pipeline"),
        (lambda: source().set_parallelism(0), r"set_parallelism\(\) must be an integer from 1 to 32768"),
        (lambda: source().set_parallelism(40000), r"set_parallelism\(\) must be an integer from 1 to 32768"),
        (lambda: source().name(""), r"name\(\) needs a non-empty string"),
        (lambda: source().name("x" * 201), "at most 200 characters"),
        (lambda: source().write_parquet(""), r"write_parquet\(\) needs a non-empty output path"),
        (lambda: source().write_csv("out", mode="replace"), "mode must be one of 'overwrite', 'append', 'error'"),
        (lambda: source().write_json("out", mode="ignore"), r"write_json\(\) mode must be one of"),
        (lambda: source().write_parquet("out").set_parallelism(-1), "must be an integer from 1"),
    ],
)
def test_bad_arguments_are_rejected_with_a_clear_message(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_fluent_settings_return_the_same_object_and_transformations_a_new_one():
    data = source()
    assert data.set_parallelism(2) is data
    assert data.name("x") is data
    assert data.disable_chaining() is data
    selected = data.select("value")
    assert isinstance(selected, DataSet) and selected is not data
    assert selected.pipeline is data.pipeline
