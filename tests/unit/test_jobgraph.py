"""JobGraph: (de)serialisation, the published JSON Schema, and validation messages."""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema
import msgspec
import pytest

from flink_runtime.jobgraph import (
    DistributionPattern,
    IntermediateDataSet,
    InvalidJobGraph,
    JobEdge,
    JobGraph,
    JobGraphLimits,
    JobVertex,
    Partitioner,
    ResourceProfile,
    ResultPartitionType,
    convert_job_graph,
    decode_job_graph,
    json_schema,
    topological_order,
    validate_job_graph,
)
from flink_runtime.jobgraph.schema import render_schema, schema_path

JOB_ID = "0123456789abcdef0123456789abcdef"


def vertex(vertex_id: str, parallelism: int = 2, **fields) -> JobVertex:
    fields.setdefault("name", vertex_id.title())
    fields.setdefault("invokable", "spark-chain")
    return JobVertex(id=vertex_id, parallelism=parallelism, **fields)


def pipeline() -> JobGraph:
    """source -forward-> map -hash(word)-> sink: valid, and using most fields."""
    graph = JobGraph(name="word count", vertices=[], job_id=JOB_ID, libraries=["deps.zip"])
    source = graph.add_vertex(vertex("source", config={"path": "in/*.txt"}))
    mapper = graph.add_vertex(
        vertex("map", max_parallelism=128, resources=ResourceProfile(cpu_cores=0.5, task_heap_memory_mb=256))
    )
    sink = graph.add_vertex(vertex("sink", parallelism=1, invokable="my_pkg.sinks:CsvSink"))
    graph.connect(source, mapper, DistributionPattern.POINTWISE, Partitioner.FORWARD)
    graph.connect(mapper, sink, keys=["word"], result_type=ResultPartitionType.PIPELINED)
    graph.config["restart-strategy.type"] = "fixed-delay"
    return graph


def problems(graph: JobGraph, **options) -> list[str]:
    with pytest.raises(InvalidJobGraph) as caught:
        validate_job_graph(graph, **options)
    return caught.value.errors


def decode_problem(document: dict | str | bytes) -> str:
    data = document if isinstance(document, str | bytes) else json.dumps(document)
    with pytest.raises(InvalidJobGraph) as caught:
        decode_job_graph(data)
    assert len(caught.value.errors) == 1
    return caught.value.errors[0]


def document(**changes) -> dict:
    """The pipeline as a dict, with top-level fields replaced."""
    return pipeline().to_dict() | changes


def with_vertex(**fields) -> dict:
    """A one-vertex document whose vertex has the given fields (and id 'a' unless given)."""
    return {"name": "j", "vertices": [{"id": "a", "name": "A", "invokable": "x"} | fields]}


# -- round trips and the schema --------------------------------------------------------


def test_json_round_trip() -> None:
    graph = pipeline()
    assert JobGraph.from_json(graph.to_json()) == graph
    assert JobGraph.from_json(graph.to_json().decode()) == graph


def test_dict_round_trip() -> None:
    graph = pipeline()
    as_dict = graph.to_dict()
    assert as_dict["edges"][0]["partitioner"] == "forward"
    assert JobGraph.from_dict(as_dict) == graph


def test_a_missing_job_id_is_generated() -> None:
    graph = pipeline()
    graph.job_id = None
    decoded = JobGraph.from_json(graph.to_json())
    assert decoded.job_id is not None and len(decoded.job_id) == 32
    assert JobGraph.from_json(graph.to_json()).job_id != decoded.job_id


def test_connect_gives_each_data_set_a_unique_valid_id() -> None:
    graph = JobGraph(name="j", vertices=[vertex("a" * 100), vertex("b" * 100)])
    first = graph.connect("a" * 100, "b" * 100)
    second = graph.connect("a" * 100, "b" * 100)
    assert first.source != second.source
    # Long ids are shortened to a valid Identifier, so the graph survives a round trip.
    assert JobGraph.from_json(graph.to_json()).intermediate_datasets == graph.intermediate_datasets


def test_the_schema_file_is_up_to_date() -> None:
    assert schema_path().read_text(encoding="utf-8") == render_schema(), (
        "the JobGraph structs changed: run python -m flink_runtime.jobgraph.schema"
    )
    assert json.loads(render_schema()) == json_schema()


@pytest.fixture(scope="module")
def schema_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_path().read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_a_valid_document_matches_the_schema(schema_validator) -> None:
    schema_validator.validate(pipeline().to_dict())


@pytest.mark.parametrize(
    "bad",
    [
        with_vertex(parallelism=0),
        with_vertex(paralelism=2),
        with_vertex(id="has space"),
        document(edges=[{"source": "x", "target": "y", "partitioner": "HASH"}]),
        {"vertices": []},
    ],
    ids=["parallelism-0", "unknown-field", "bad-id", "bad-enum", "no-name"],
)
def test_an_invalid_document_does_not_match_the_schema(schema_validator, bad: dict) -> None:
    assert not schema_validator.is_valid(bad)


# -- decoding errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, expected",
    [
        (
            with_vertex(parallelism=0),
            [
                "vertex #0 ('a')",
                "parallelism must be an integer from 1 to 32768",
                "(got 0)",
                "$.vertices[0].parallelism",
            ],
        ),
        (with_vertex(parallelism="2"), ["vertex #0 ('a')", "parallelism must be an integer", "(got '2')"]),
        (
            with_vertex(paralelism=2),
            [
                "vertex #0 ('a')",
                "unknown field 'paralelism'",
                "did you mean 'parallelism'?",
                "remove or rename",
            ],
        ),
        (
            {"name": "j", "vertices": [{"id": "a", "invokable": "x"}]},
            ["vertex #0 ('a')", "required field 'name' is missing", "$.vertices[0]"],
        ),
        (
            with_vertex(id="has space"),
            ["vertex #0 ('has space')", "id must be 1-128 characters", "$.vertices[0].id"],
        ),
        (
            with_vertex(resources={"cpu_cores": -1}),
            ["vertex #0 ('a')", "resources.cpu_cores must be a number >= 0", "(got -1)"],
        ),
        (
            document(edges=[{"source": "map-to-sink", "target": "sink", "partitioner": "HASH"}]),
            [
                "edge #0 ('map-to-sink' -> 'sink')",
                "partitioner must be one of 'forward', 'hash'",
                "did you mean 'hash'?",
                "$.edges[0].partitioner",
            ],
        ),
        (
            document(intermediate_datasets=[{"id": "d"}]),
            ["data set #0 ('d')", "required field 'producer' is missing"],
        ),
        (document(job_id="XYZ"), ["JobGraph: job_id must be 32 lower-case hex digits", "(got 'XYZ')"]),
        (document(name=""), ["JobGraph: name must be a string of 1 to 256 characters"]),
        ([], ["JobGraph must be an object", "(got [])", "at $"]),
    ],
    ids=[
        "parallelism-0",
        "parallelism-string",
        "unknown-field",
        "missing-field",
        "bad-id",
        "nested-field",
        "bad-enum",
        "dataset-missing-field",
        "bad-job-id",
        "empty-name",
        "not-an-object",
    ],
)
def test_decoding_names_the_bad_field(bad, expected: list[str]) -> None:
    message = decode_problem(json.dumps(bad))
    for part in expected:
        assert part in message


def test_converting_a_dict_names_the_bad_field() -> None:
    with pytest.raises(InvalidJobGraph, match=r"vertex #0 \('a'\): parallelism .* \(got 0\)"):
        convert_job_graph(with_vertex(parallelism=0))
    with pytest.raises(InvalidJobGraph, match=r"config has a key that is not a string"):
        convert_job_graph(with_vertex(config={1: 2}))


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '{"name": "j",\n "vertices": [},\n]}',
            "JobGraph is not valid JSON: invalid character at line 2, column 15",
        ),
        ('{"name": "j", "vertices": [', "JobGraph is not valid JSON: the document ends early"),
        # Not JSON further on, though the first field is already wrong for the schema.
        ('{"bogus": 1,}', "JobGraph is not valid JSON: trailing comma in object at line 1, column 13"),
    ],
)
def test_malformed_json_is_reported_with_line_and_column(text: str, expected: str) -> None:
    assert expected in decode_problem(text)


def test_an_oversized_document_is_rejected_before_decoding() -> None:
    data = pipeline().to_json()
    with pytest.raises(InvalidJobGraph, match=r"document is [\d,]+ bytes, more than the limit of 100 bytes"):
        decode_job_graph(data, max_bytes=100)
    with pytest.raises(InvalidJobGraph, match="more than the limit"):
        decode_job_graph(data.decode(), max_bytes=100)


# -- graph rules ---------------------------------------------------------------------------


def duplicate_vertex_id(graph: JobGraph) -> None:
    graph.vertices[2].id = "map"


def duplicate_vertex_name(graph: JobGraph) -> None:
    graph.vertices[2].name = "Map"


def duplicate_dataset_id(graph: JobGraph) -> None:
    graph.intermediate_datasets.append(IntermediateDataSet(id="map-to-sink", producer="map"))


def unknown_producer(graph: JobGraph) -> None:
    graph.intermediate_datasets[0].producer = "sorce"


def unknown_edge_source(graph: JobGraph) -> None:
    graph.edges[1].source = "map"


def unknown_edge_target(graph: JobGraph) -> None:
    graph.edges[1].target = "snik"


def two_consumers(graph: JobGraph) -> None:
    graph.add_vertex(vertex("audit", parallelism=1))
    graph.edges.append(JobEdge(source="map-to-sink", target="audit"))


def self_consumption(graph: JobGraph) -> None:
    graph.edges[1].target = "map"


def cycle(graph: JobGraph) -> None:
    graph.connect("sink", "source", keys=["word"])


def parallelism_above_max(graph: JobGraph) -> None:
    graph.vertices[1].max_parallelism = 1


def forward_all_to_all(graph: JobGraph) -> None:
    graph.edges[0].distribution_pattern = DistributionPattern.ALL_TO_ALL


def forward_unequal_parallelism(graph: JobGraph) -> None:
    graph.vertices[1].parallelism = 4


def hash_pointwise(graph: JobGraph) -> None:
    graph.edges[1].distribution_pattern = DistributionPattern.POINTWISE


def broadcast_pointwise(graph: JobGraph) -> None:
    graph.edges[1].distribution_pattern = DistributionPattern.POINTWISE
    graph.edges[1].partitioner = Partitioner.BROADCAST
    graph.edges[1].keys = []


def keys_without_hash(graph: JobGraph) -> None:
    graph.edges[1].partitioner = Partitioner.REBALANCE


def empty_key(graph: JobGraph) -> None:
    graph.edges[1].keys = ["word", ""]


def co_location_without_slot_sharing(graph: JobGraph) -> None:
    graph.vertices[0].co_location_group = "pair"
    graph.vertices[0].slot_sharing_group = None


def co_location_unequal_parallelism(graph: JobGraph) -> None:
    graph.vertices[1].co_location_group = "pair"
    graph.vertices[2].co_location_group = "pair"


def co_location_across_slot_sharing_groups(graph: JobGraph) -> None:
    graph.vertices[0].co_location_group = "pair"
    graph.vertices[1].co_location_group = "pair"
    graph.vertices[1].slot_sharing_group = "other"


def malformed_class_path(graph: JobGraph) -> None:
    graph.vertices[2].invokable = "my_pkg.sinks:"


def no_vertices(graph: JobGraph) -> None:
    graph.vertices.clear()
    graph.intermediate_datasets.clear()
    graph.edges.clear()


def unserialisable_config(graph: JobGraph) -> None:
    graph.vertices[0].config["when"] = object()


@pytest.mark.parametrize(
    "break_graph, expected",
    [
        (duplicate_vertex_id, ["vertex id 'map' is used by 2 vertices (#1, #2)", "must be unique"]),
        (duplicate_vertex_name, ["vertex name 'Map' is used by vertices 'map', 'sink'", "must be unique"]),
        (duplicate_dataset_id, ["data set id 'map-to-sink' is used by 2 data sets", "must be unique"]),
        (
            unknown_producer,
            ["data set 'source-to-map': producer 'sorce' is not a vertex", "did you mean 'source'?"],
        ),
        (
            unknown_edge_source,
            [
                "edge #1 ('map' -> 'sink'): source 'map' is not a data set",
                "'map' is a vertex, but an edge's source",
            ],
        ),
        (
            unknown_edge_target,
            ["edge #1 ('map-to-sink' -> 'snik'): target 'snik' is not a vertex", "did you mean 'sink'?"],
        ),
        (
            two_consumers,
            [
                "data set 'map-to-sink' is consumed by 2 edges (#1 (to 'sink'), #2 (to 'audit'))",
                "exactly one consumer",
            ],
        ),
        (self_consumption, ["vertex 'map' consumes its own output through data set 'map-to-sink'"]),
        (cycle, ["The vertices 'source' -> 'map' -> 'sink' -> 'source' form a cycle", "must be acyclic"]),
        (
            parallelism_above_max,
            ["vertex 'map': parallelism 2 is greater than its max_parallelism 1", "raise max_parallelism"],
        ),
        (
            forward_all_to_all,
            ["edge #0 ('source-to-map' -> 'map')", "forward partitioner needs", "POINTWISE"],
        ),
        (
            forward_unequal_parallelism,
            [
                "forward partitioner needs equal parallelism",
                "producer 'source' has 2",
                "consumer 'map' has 4",
            ],
        ),
        (hash_pointwise, ["edge #1", "hash partitioner needs distribution_pattern ALL_TO_ALL"]),
        (broadcast_pointwise, ["edge #1", "broadcast partitioner needs distribution_pattern ALL_TO_ALL"]),
        (keys_without_hash, ["keys apply only to the hash partitioner, not 'rebalance'"]),
        (empty_key, ["keys contains an empty field name"]),
        (
            co_location_without_slot_sharing,
            ["vertex 'source': co_location_group 'pair' needs a slot_sharing_group"],
        ),
        (
            co_location_unequal_parallelism,
            ["co-location group 'pair' has vertices of different parallelism ('map': 2, 'sink': 1)"],
        ),
        (
            co_location_across_slot_sharing_groups,
            [
                "co-location group 'pair' spans several slot sharing groups",
                "('default': 'source'; 'other': 'map')",
            ],
        ),
        (malformed_class_path, ["vertex 'sink': invokable 'my_pkg.sinks:' is not of the form"]),
        (no_vertices, ["The JobGraph has no vertices; add at least one vertex."]),
        (unserialisable_config, ["vertex 'source': config is not JSON-serialisable"]),
    ],
    ids=lambda value: value.__name__ if callable(value) else "",
)
def test_graph_rules(break_graph: Callable[[JobGraph], None], expected: list[str]) -> None:
    graph = pipeline()
    break_graph(graph)
    errors = problems(graph)
    assert any(all(part in error for part in expected) for error in errors), errors


def test_the_pipeline_is_valid() -> None:
    validate_job_graph(pipeline())


def test_all_problems_are_reported_at_once() -> None:
    graph = pipeline()
    duplicate_vertex_name(graph)
    hash_pointwise(graph)
    parallelism_above_max(graph)
    errors = problems(graph)
    assert len(errors) == 3
    assert str(InvalidJobGraph(errors)) == "\n".join(errors)


def test_a_python_built_graph_gets_the_field_checks_too() -> None:
    graph = pipeline()
    graph.vertices[1].parallelism = 0
    assert problems(graph) == [
        "vertex #1 ('map'): parallelism must be an integer from 1 to 32768 (got 0), at $.vertices[1].parallelism."
    ]


def test_unknown_invokables() -> None:
    builtins = {"spark-chain", "csv-source"}

    def exists(name: str) -> bool:
        return name in builtins

    graph = pipeline()
    graph.vertices[0].invokable = "spark-chian"
    errors = problems(graph, invokable_exists=exists, builtin_invokables=builtins)
    assert (
        "vertex 'source': unknown invokable 'spark-chian' (did you mean 'spark-chain'?); "
        "use a built-in name (csv-source, spark-chain) or 'package.module:Class'."
    ) in errors
    assert any("vertex 'sink': invokable 'my_pkg.sinks:CsvSink' was not found" in error for error in errors)


def test_an_invokable_that_fails_to_load_is_reported() -> None:
    def exists(name: str) -> bool:
        raise ImportError("No module named 'my_pkg'")

    errors = problems(pipeline(), invokable_exists=exists)
    assert any("could not be loaded (ImportError(\"No module named 'my_pkg'\"))" in error for error in errors)


@pytest.mark.parametrize(
    "limits, expected",
    [
        (JobGraphLimits(max_vertices=2), "The job has 3 vertices, more than the limit of 2"),
        (JobGraphLimits(max_edges=1), "The job has 2 edges, more than the limit of 1"),
        (JobGraphLimits(max_datasets=1), "The job has 2 data sets, more than the limit of 1"),
        (JobGraphLimits(max_total_subtasks=4), "The job has 5 subtasks in total"),
        (
            JobGraphLimits(max_config_bytes=10),
            "vertex 'source': config is 19 bytes as JSON, more than the limit",
        ),
    ],
)
def test_size_limits(limits: JobGraphLimits, expected: str) -> None:
    errors = problems(pipeline(), limits=limits)
    assert any(expected in error for error in errors), errors


def test_the_error_list_is_capped() -> None:
    graph = JobGraph(name="j", vertices=[vertex("v", name="same") for _ in range(5)])
    for index, each in enumerate(graph.vertices):
        each.id = f"v{index}"
    errors = problems(graph, limits=JobGraphLimits(max_errors=0))
    assert errors == ["1 more problem was found but not listed; fix the ones above first."]


def test_decode_applies_the_graph_rules() -> None:
    graph = pipeline()
    cycle(graph)
    with pytest.raises(InvalidJobGraph, match="form a cycle"):
        JobGraph.from_json(graph.to_json())


# -- topological order -------------------------------------------------------------------


def test_topological_order_keeps_declaration_order_where_it_can() -> None:
    graph = JobGraph(name="j", vertices=[vertex(v) for v in ("sink", "b", "a", "source")])
    graph.connect("source", "a")
    graph.connect("source", "b")
    graph.connect("a", "sink")
    graph.connect("b", "sink")
    assert topological_order(graph) == ["source", "b", "a", "sink"]
    assert topological_order(pipeline()) == ["source", "map", "sink"]


def test_topological_order_names_every_cycle() -> None:
    graph = JobGraph(name="j", vertices=[vertex(v) for v in ("a", "b", "c", "d")])
    graph.connect("a", "b")
    graph.connect("b", "a")
    graph.connect("c", "c")
    with pytest.raises(InvalidJobGraph) as caught:
        topological_order(graph)
    assert caught.value.errors == [
        "The vertices 'a' -> 'b' -> 'a' form a cycle; a JobGraph must be acyclic, "
        "so remove or redirect one of the edges on it.",
        "The vertices 'c' -> 'c' form a cycle; a JobGraph must be acyclic, "
        "so remove or redirect one of the edges on it.",
    ]


def test_topological_order_handles_long_chains() -> None:
    ids = [f"v{i}" for i in range(5000)]
    graph = JobGraph(name="chain", vertices=[vertex(v, parallelism=1) for v in reversed(ids)])
    for producer, consumer in zip(ids, ids[1:], strict=False):
        graph.connect(producer, consumer, DistributionPattern.POINTWISE, Partitioner.FORWARD)
    assert topological_order(graph) == ids
    graph.connect(ids[-1], ids[0], DistributionPattern.POINTWISE, Partitioner.FORWARD)
    with pytest.raises(InvalidJobGraph, match="'v0' -> 'v1' -> 'v2'"):
        topological_order(graph)
    assert msgspec.json.decode(graph.to_json(), type=JobGraph) == graph
