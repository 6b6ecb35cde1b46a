"""Lineage and data-aware scheduling: what a job reads and writes, as
OpenLineage datasets and Airflow Assets, and the XCom that names its outputs.

The naming and facet tests are pure. The run test is real: dag.test() of a DAG file
against the session MiniCluster, with the openlineage provider's own listener writing
its events through the file transport, and Airflow recording the asset events and
queueing the DAG scheduled on the output.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.airflow import lineage
from flink_runtime.airflow.lineage import DataLocation, asset_uri, dataset_name, schema_fields
from flink_runtime.pipeline import Pipeline
from tests.helpers.openlineage import require_openlineage

pytestmark = pytest.mark.xdist_group("airflow-db")  # one worker makes the in-process metadata DB (make test: -n 2)

# -- naming ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "namespace", "name", "uri"),
    [
        ("/data/out/day=1", "file", "/data/out/day=1", "file:///data/out/day=1"),
        ("/data/out/", "file", "/data/out", "file:///data/out"),
        ("/data/in/2024-*/part-*.csv", "file", "/data/in", "file:///data/in"),
        ("/data/in/*.txt", "file", "/data/in", "file:///data/in"),
        ("file:///data/out", "file", "/data/out", "file:///data/out"),
        ("file://nas1/share/out", "file://nas1", "/share/out", "file://nas1/share/out"),
        ("s3a://bucket/warehouse/sales", "s3://bucket", "warehouse/sales", "s3://bucket/warehouse/sales"),
        ("s3://bucket/in/*.parquet", "s3://bucket", "in", "s3://bucket/in"),
        ("gcs://bucket/k", "gs://bucket", "k", "gs://bucket/k"),
        ("hdfs://nn:8020/user/x/out", "hdfs://nn:8020", "/user/x/out", "hdfs://nn:8020/user/x/out"),
        (
            "abfss://c@acct.dfs.core.windows.net/lake/t",
            "abfss://c@acct.dfs.core.windows.net",
            "lake/t",
            "abfss://c@acct.dfs.core.windows.net/lake/t",
        ),
    ],
)
def test_paths_are_named_by_the_openlineage_naming_spec(path: str, namespace: str, name: str, uri: str) -> None:
    assert dataset_name(path) == (namespace, name)
    assert asset_uri(path) == uri


def test_every_asset_uri_is_one_airflow_accepts_unchanged() -> None:
    """Airflow normalises an Asset's URI; ours must come out as they went in, or an
    outlet Asset would never match the sink it names."""
    from airflow.sdk import Asset

    paths = ["/data/out/day=1", "s3a://b/k/x", "hdfs://nn:8020/p", "gs://b/k", "file://nas1/share/out"]
    for path in [*paths, "/data/my out/a#b?", "/data/é/x+y", "/data/100%"]:
        assert Asset(uri=asset_uri(path)).uri == asset_uri(path)
    # Characters a URI path cannot hold are percent-encoded, not cut off.
    assert asset_uri("/data/my out/a#b") == "file:///data/my%20out/a%23b"


def test_relative_paths_are_made_absolute_against_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert dataset_name("out/sales") == ("file", f"{tmp_path}/out/sales")
    assert dataset_name("data/*.csv") == ("file", f"{tmp_path}/data")
    assert dataset_name("*.csv") == ("file", str(tmp_path))


@pytest.mark.parametrize(
    ("ddl", "fields"),
    [
        ("id BIGINT, name STRING", [("id", "BIGINT", None), ("name", "STRING", None)]),
        (
            "price decimal(10, 2) NOT NULL COMMENT 'in EUR, gross', tags ARRAY<STRUCT<a: INT, b: STRING>>",
            [("price", "DECIMAL(10, 2)", "in EUR, gross"), ("tags", "ARRAY<STRUCT<A: INT, B: STRING>>", None)],
        ),
        ("`order id` INT, m MAP<STRING, INT>", [("order id", "INT", None), ("m", "MAP<STRING, INT>", None)]),
        ("a: INT", [("a", "INT", None)]),
        ("", []),
        (" , ,", []),
        ("lonely", [("lonely", "UNKNOWN", None)]),
        ("a STRUCT<b: INT", [("a", "STRUCT<B: INT", None)]),  # unbalanced: kept as written, no crash
    ],
)
def test_spark_ddl_schemas_become_fields(ddl: str, fields: list[tuple[str, str, str | None]]) -> None:
    assert schema_fields(ddl) == fields


# -- the JobGraph ------------------------------------------------------------------------------------


def two_sink_pipeline() -> Pipeline:
    p = Pipeline("sales", parallelism=2)
    orders = p.read_csv(["/in/orders/*.csv", "/in/orders/late-*.csv"], schema="id BIGINT, region STRING")
    lines = p.read_text("s3a://logs/2024/*.txt")
    orders.key_by("region").agg("count(*) AS n").write_parquet("/out/by_region", mode="overwrite")
    lines.write_json("s3a://bucket/raw")
    return p


def test_sources_and_sinks_come_from_the_job_graph() -> None:
    graph = two_sink_pipeline().job_graph()
    sources, sinks = lineage.sources_of(graph), lineage.sinks_of(graph)
    # The two globs of one folder are one dataset; text has its fixed schema.
    assert [(s.namespace, s.name, s.format, s.schema) for s in sources] == [
        ("file", "/in/orders", "csv", "id BIGINT, region STRING"),
        ("s3://logs", "2024", "text", "value STRING"),
    ]
    # In vertex order: the json sink is chained into its source's vertex, the first.
    assert [(s.path, s.format, s.uri) for s in sinks] == [
        ("s3a://bucket/raw", "json", "s3://bucket/raw"),
        ("/out/by_region", "parquet", "file:///out/by_region"),
    ]


@pytest.mark.parametrize(
    "make_source",
    [
        lambda p: p,
        lambda p: p.job_graph(),
        lambda p: p.job_graph().to_dict(),
        lambda p: p.job_graph().to_json(),
        lambda p: p.job_graph().to_json().decode(),
    ],
)
def test_every_form_of_job_graph_is_read(make_source: Any) -> None:
    graph = lineage.job_graph_of(make_source(two_sink_pipeline()))
    assert [s.path for s in lineage.sinks_of(graph)] == ["s3a://bucket/raw", "/out/by_region"]


def test_a_json_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_bytes(two_sink_pipeline().job_graph().to_json())
    assert len(lineage.sinks_of(lineage.job_graph_of(str(path)))) == 2


@pytest.mark.parametrize("bad", ["not json", "{broken", 42, "/no/such/job.json", {"name": "x"}])
def test_what_is_not_a_job_graph_is_refused_saying_so(bad: Any) -> None:
    with pytest.raises(ValueError):
        lineage.job_graph_of(bad)


def test_a_graph_without_files_has_no_lineage() -> None:
    graph = lineage.job_graph_of({"name": "noop", "vertices": [{"id": "n", "name": "N", "invokable": "noop"}]})
    assert lineage.sources_of(graph) == [] and lineage.sinks_of(graph) == []


def test_the_result_counts_records_only_once_the_job_finished() -> None:
    sinks = [DataLocation("agg", "/out/a", "parquet"), DataLocation("raw", "/out/b", "json")]
    details = {"vertices": [{"id": "agg", "metrics": {"write-records": 7, "write-bytes": 900}}, {"id": "raw"}]}
    finished = lineage.job_result("j", "FINISHED", "http://jm/jobs/j", sinks, details)
    assert [(o["records"], o["bytes"]) for o in finished["outputs"]] == [(7, 900), (0, 0)]
    running = lineage.job_result("j", "RUNNING", "http://jm/jobs/j", sinks, details)
    assert [(o["records"], o["bytes"]) for o in running["outputs"]] == [(None, None), (None, None)]
    assert json.loads(json.dumps(finished)) == finished  # an XCom: plain JSON


# -- OpenLineage facets ------------------------------------------------------------------------------


def test_operator_lineage_has_datasets_schema_statistics_and_the_job() -> None:
    require_openlineage()
    from openlineage.client.serde import Serde

    graph = two_sink_pipeline().job_graph()
    sinks = lineage.sinks_of(graph)
    parquet = next(sink for sink in sinks if sink.format == "parquet")
    result = lineage.job_result(
        "j1",
        "FINISHED",
        "http://jm:8081/jobs/j1",
        sinks,
        {"vertices": [{"id": parquet.vertex_id, "metrics": {"write-records": 3, "write-bytes": 1200}}]},
    )
    found = lineage.operator_lineage(lineage.sources_of(graph), sinks, result)

    inputs = json.loads(Serde.to_json(found.inputs[0]))
    assert (inputs["namespace"], inputs["name"]) == ("file", "/in/orders")
    assert [(f["name"], f["type"]) for f in inputs["facets"]["schema"]["fields"]] == [
        ("id", "BIGINT"),
        ("region", "STRING"),
    ]
    output = json.loads(Serde.to_json(found.outputs[1]))
    assert (output["namespace"], output["name"]) == ("file", "/out/by_region")
    assert output["outputFacets"]["outputStatistics"] | {"_producer": None, "_schemaURL": None} == {
        "rowCount": 3,
        "size": 1200,
        "_producer": None,
        "_schemaURL": None,
    }
    assert found.run_facets["externalQuery"].externalQueryId == "j1"
    assert found.run_facets["externalQuery"].source == "http://jm:8081/jobs/j1"
    # Before the job ran: the same datasets, no statistics, no job.
    start = lineage.operator_lineage(lineage.sources_of(graph), sinks, None)
    assert [(o.namespace, o.name) for o in start.outputs] == [("s3://bucket", "raw"), ("file", "/out/by_region")]
    assert all(not o.outputFacets for o in start.outputs) and start.run_facets == {}


# -- asset events ------------------------------------------------------------------------------------


class RecordingLog:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args: Any) -> None:
        self.lines.append(message % args)

    warning = info


def finished_result(state: str = "FINISHED") -> dict[str, Any]:
    sinks = [DataLocation("agg", "/out/totals", "parquet"), DataLocation("raw", "s3a://b/raw/2024", "json")]
    details = {"vertices": [{"id": "agg", "metrics": {"write-records": 2, "write-bytes": 10}}]}
    return lineage.job_result("j1", state, "http://jm/jobs/j1", sinks, details)


def test_an_alias_gets_one_event_per_output_and_a_matching_asset_the_extra() -> None:
    from airflow.sdk import Asset, AssetAlias
    from airflow.sdk.execution_time.context import OutletEventAccessors

    alias, totals, other = AssetAlias("outs"), Asset("file:///out/totals"), Asset("file:///elsewhere")
    events, log = OutletEventAccessors(), RecordingLog()
    lineage.record_asset_events([alias, totals, other], events, finished_result(), log)

    added = [(e.dest_asset_key.uri, e.extra) for e in events[alias].asset_alias_events]
    assert added == [
        ("file:///out/totals", {"records": 2, "bytes": 10, "format": "parquet", "job_id": "j1"}),
        ("s3://b/raw/2024", {"records": None, "bytes": None, "format": "json", "job_id": "j1"}),  # no metrics
    ]
    assert events[totals].extra == {"records": 2, "bytes": 10, "format": "parquet", "job_id": "j1"}
    assert events[other].extra == {}
    assert any("file:///elsewhere is none of the job's outputs" in line for line in log.lines)


def test_no_asset_events_before_the_job_finished() -> None:
    from airflow.sdk import AssetAlias
    from airflow.sdk.execution_time.context import OutletEventAccessors

    alias, events, log = AssetAlias("outs"), OutletEventAccessors(), RecordingLog()
    lineage.record_asset_events([alias], events, finished_result("RUNNING"), log)
    assert events[alias].asset_alias_events == []
    assert any("not written yet, so no asset events" in line for line in log.lines)


# -- the operator's OpenLineage methods --------------------------------------------------------------


def test_the_operator_reports_lineage_at_start_only_for_a_graph_it_has() -> None:
    require_openlineage()
    from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator

    static = SubmitJobOperator(task_id="static", job_graph=two_sink_pipeline())
    start = static.get_openlineage_facets_on_start()
    assert [d.name for d in start.inputs] == ["/in/orders", "2024"]
    # A callable builds the graph when the task runs, with its context: nothing to say yet.
    built_later = SubmitJobOperator(task_id="later", job_graph=lambda context: two_sink_pipeline())
    assert built_later.get_openlineage_facets_on_start() is None
    # A graph that cannot be read gives no lineage, and no error: the submit will say what is wrong.
    broken = SubmitJobOperator(task_id="broken", job_graph="{not json")
    assert broken.get_openlineage_facets_on_start() is None


# -- for real: dag.test() against the session MiniCluster ------------------------------------------------

DAG_FILE = '''
import datetime

from airflow.sdk import DAG, Asset, AssetAlias, task

from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator
from flink_runtime.pipeline import Pipeline
from tests.helpers.openlineage import require_openlineage

DATA = {data!r}
TOTALS = Asset("file://" + DATA + "/out/totals")
START = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


def totals(context, jinja_env=None):
    """Per-region totals (a static path) and the run's raw copy (a path known at run time)."""
    run = context["dag_run"].run_after.strftime("%Y%m%dT%H%M%S")
    pipeline = Pipeline("lineage totals", parallelism=1)
    orders = pipeline.read_csv(DATA + "/in/*.csv", schema="region STRING, amount DOUBLE")
    orders.filter("amount > 0").key_by("region").agg("sum(amount) AS total").write_parquet(
        DATA + "/out/totals", mode="overwrite"
    )
    orders.write_json(DATA + "/out/raw/" + run)
    return pipeline


with DAG("lineage_producer", schedule=None, start_date=START, catchup=False):
    SubmitJobOperator(
        task_id="totals",
        job_graph=totals,
        flink_runtime_conn_id={conn_id!r},
        outlets=[TOTALS, AssetAlias("lineage-test-outputs")],
    )

with DAG("lineage_consumer", schedule=[TOTALS], start_date=START, catchup=False):

    @task
    def read_totals():
        return None

    read_totals()
'''


@pytest.fixture
def lineage_dags(airflow_db: Any, minicluster_conn_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The DAG file above in a bundle of its own (dag.test() syncs DAGs from bundles), and its input."""
    from airflow.dag_processing.dagbag import DagBag

    data = tmp_path / "data"
    (data / "in").mkdir(parents=True)
    (data / "in" / "orders.csv").write_text("region,amount\neu,10\nus,5\neu,-1\neu,2.5\n")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "lineage_dags.py").write_text(textwrap.dedent(DAG_FILE.format(data=str(data), conn_id=minicluster_conn_id)))
    bundle = {"name": "lineage-test", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle"}
    bundle["kwargs"] = {"path": str(dags)}  # type: ignore[assignment]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps([bundle]))
    bag = DagBag(dag_folder=str(dags), bundle_path=dags)
    assert bag.import_errors == {}
    return bag, data


@pytest.mark.integration
def test_a_run_reports_lineage_records_asset_events_and_queues_the_consumer(
    lineage_dags: Any, openlineage_events: Path
) -> None:
    from airflow.models.asset import AssetDagRunQueue, AssetEvent, AssetModel
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    bag, data = lineage_dags
    dag = bag.get_dag("lineage_producer")
    dag_run = dag.test()
    assert str(dag_run.state) == "success"

    # The XCom: the job, and each output with what it wrote.
    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag.dag_id, task_ids="totals", key="return_value")
        ).first()
        result = XComModel.deserialize_value(row)
    run_dir = dag_run.run_after.strftime("%Y%m%dT%H%M%S")
    totals_uri, raw_uri = f"file://{data}/out/totals", f"file://{data}/out/raw/{run_dir}"
    assert result["state"] == "FINISHED" and len(result["job_id"]) == 32
    assert [(o["uri"], o["format"], o["records"]) for o in result["outputs"]] == [
        (totals_uri, "parquet", 2),  # eu, us (the negative amount is filtered out)
        (raw_uri, "json", 4),
    ]
    assert all(o["bytes"] > 0 for o in result["outputs"])

    # Asset events: the static outlet carries the job's extra; the alias adds the run's own path.
    with create_session() as session:
        events = {
            uri: (event.extra, [alias.name for alias in event.source_aliases])
            for uri, event in session.execute(
                select(AssetModel.uri, AssetEvent)
                .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
                .where(AssetEvent.source_run_id == dag_run.run_id)
            ).all()
        }
        queued = session.scalars(select(AssetDagRunQueue.target_dag_id)).all()
    assert events[totals_uri][0]["job_id"] == result["job_id"]
    assert events[totals_uri][0]["records"] == 2
    assert events[raw_uri] == (
        {"job_id": result["job_id"], "records": 4, "bytes": result["outputs"][1]["bytes"], "format": "json"},
        ["lineage-test-outputs"],
    )
    assert "lineage_consumer" in queued  # scheduled on the totals Asset

    # OpenLineage: START names the inputs and outputs; COMPLETE adds what was written.
    sent = [json.loads(line) for line in openlineage_events.read_text().splitlines() if line.strip()]
    task_events = {e["eventType"]: e for e in sent if e["job"]["name"] == "lineage_producer.totals"}
    assert set(task_events) == {"START", "COMPLETE"}, [(e["eventType"], e["job"]["name"]) for e in sent]
    for event in task_events.values():
        assert [(i["namespace"], i["name"]) for i in event["inputs"]] == [("file", f"{data}/in")]
        assert [f["name"] for f in event["inputs"][0]["facets"]["schema"]["fields"]] == ["region", "amount"]
        assert [(o["namespace"], o["name"]) for o in event["outputs"]] == [
            ("file", f"{data}/out/totals"),
            ("file", f"{data}/out/raw/{run_dir}"),
        ]
    complete = task_events["COMPLETE"]
    assert [o["outputFacets"]["outputStatistics"]["rowCount"] for o in complete["outputs"]] == [2, 4]
    assert complete["run"]["facets"]["externalQuery"]["externalQueryId"] == result["job_id"]
    assert "outputStatistics" not in task_events["START"]["outputs"][0].get("outputFacets", {})
