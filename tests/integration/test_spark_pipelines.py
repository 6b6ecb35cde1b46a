"""Pipelines run as PySpark tasks on the MiniCluster, checked against plain PySpark.

The MiniCluster's TaskManagers and the reference computations share the process's
one SparkSession (started by the first test that needs it, ~10 s).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import functions as F  # noqa: N812

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.minicluster import MiniCluster
from flink_runtime.operators.spark.task import SMALL_SPLIT_BYTES, small_split_in_one_partition
from flink_runtime.pipeline import Pipeline
from flink_runtime.spark.frames import empty_frame
from flink_runtime.spark.session import acquire_session, release_session
from tests.conftest import fast_config

pytestmark = pytest.mark.integration

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


@pytest.fixture(scope="module")
def spark(minicluster: MiniCluster) -> Iterator:
    session = acquire_session(minicluster.config.to_dict(), default_cores=4)
    yield session
    release_session()


@pytest.fixture(scope="module")
def text_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("text")
    rng = random.Random(7)
    for index in range(8):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))) for _ in range(300)]
        (directory / f"part-{index}.txt").write_text("\n".join(lines) + "\n")
    return directory


@pytest.fixture(scope="module")
def sales_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("sales")
    rng = random.Random(11)
    for index in range(4):
        rows = ["category,region,amount"] + [
            f"c{rng.randint(0, 9)},{rng.choice(['north', 'south', 'east'])},{rng.randint(1, 1000) / 10}"
            for _ in range(500)
        ]
        (directory / f"sales-{index}.csv").write_text("\n".join(rows) + "\n")
    return directory


SALES_SCHEMA = "category STRING, region STRING, amount DOUBLE"


def run(minicluster: MiniCluster, pipeline: Pipeline, timeout: float = 120) -> str:
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        status = client.wait(job_id, timeout=timeout)
        assert status.value == "FINISHED", client.exceptions(job_id)["root-exception"]
        return job_id


def rows(spark, path: Path, fmt: str = "parquet") -> list[tuple]:
    return sorted(tuple(row) for row in spark.read.format(fmt).load(str(path)).collect())


def test_a_minicluster_is_ready_with_its_spark_session_warm(spark, text_dir, tmp_path) -> None:
    """taskmanager.spark.warm-up: when start() returns, every TaskManager holds the process's
    SparkSession and has run a query on it, so the first job pays no Spark start. (The
    module's session is up already: this cluster joins it, no second JVM.)"""
    config = fast_config(**{"io.tmp.dirs": str(tmp_path / "data"), "taskmanager.spark.warm-up": "true"})
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=1) as cluster:
        (taskmanager,) = cluster.taskmanagers
        assert taskmanager.spark_session.session is spark  # held at "ready", before any task
        pipeline = Pipeline("first job after ready", parallelism=1)
        pipeline.read_text(str(text_dir / "*.txt")).write_json(str(tmp_path / "out"), mode="overwrite")
        started = time.monotonic()
        run(cluster, pipeline)
        print(f"first job after ready: {time.monotonic() - started:.2f} s")
    assert (tmp_path / "out" / "_SUCCESS").exists()


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_word_count_matches_plain_pyspark(minicluster, spark, text_dir, tmp_path, parallelism) -> None:
    out = tmp_path / "counts"
    pipeline = Pipeline(f"word count p{parallelism}", parallelism=parallelism)
    (
        pipeline.read_text(str(text_dir / "*.txt"), split_size="4k")
        .select("explode(split(value, ' ')) AS word")
        .filter("word != ''")
        .key_by("word")
        .agg("count(*) AS count")
        .write_parquet(str(out), mode="overwrite")
    )
    run(minicluster, pipeline)
    reference = (
        spark.read.text(str(text_dir))
        .selectExpr("explode(split(value, ' ')) AS word")
        .filter("word != ''")
        .groupBy("word")
        .count()
    )
    assert rows(spark, out) == sorted(tuple(r) for r in reference.collect())
    assert (out / "_SUCCESS").exists()
    assert not (out / "_flink_staging").exists()


def test_each_aggregate_subtask_runs_one_spark_job(minicluster, spark, text_dir, tmp_path) -> None:
    """Default split size: one split per source subtask, read, combined (partial count)
    and written in one Spark job; the final aggregate's subtask reads the partials,
    merges and writes in one too. A job per split and a second one for each shuffle
    (issue 26) took 2 x 2 jobs or more in the sources and 2 per final subtask here."""
    out = tmp_path / "counts"
    pipeline = Pipeline("word count, one job per source subtask", parallelism=2)
    words = pipeline.read_text(str(text_dir / "*.txt")).select("explode(split(value, ' ')) AS word")
    words.filter("word != ''").key_by("word").agg("count(*) AS count").write_parquet(str(out))
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    run(minicluster, pipeline)
    started = set(tracker.getJobIdsForGroup()) - before
    # 2 source subtasks x 1 job, and the 2 final-aggregate subtasks x 1 job.
    assert len(started) <= 2 + 2, f"{len(started)} Spark jobs ran for the job"
    # The splits are small: each combines in one Spark partition, without a shuffle.
    assert [len(tracker.getJobInfo(job).stageIds) for job in sorted(started)] == [1] * len(started)
    reference = spark.read.text(str(text_dir)).selectExpr("explode(split(value, ' ')) AS word").filter("word != ''")
    assert rows(spark, out) == sorted(tuple(r) for r in reference.groupBy("word").count().collect())


def test_only_a_small_split_that_combines_is_read_in_one_partition(spark, text_dir) -> None:
    """A split up to SMALL_SPLIT_BYTES whose chain has a partial aggregate is one Spark
    partition (its aggregate then needs no shuffle); a larger one keeps the scan's
    partitions, and a chain that does not combine is left alone."""
    df = spark.read.text(str(text_dir))
    scanned = df.rdd.getNumPartitions()
    assert scanned > 1  # 8 small files: one scan partition each
    partial = [{"op": "aggregate", "phase": "partial", "keys": ["value"], "aggregates": ["count(*) AS n"]}]
    assert small_split_in_one_partition(df, partial, SMALL_SPLIT_BYTES).rdd.getNumPartitions() == 1
    assert small_split_in_one_partition(df, partial, SMALL_SPLIT_BYTES + 1).rdd.getNumPartitions() == scanned
    assert small_split_in_one_partition(df, [{"op": "select", "exprs": ["value"]}], 0) is df


def test_multi_key_group_by_matches_plain_pyspark(minicluster, spark, sales_dir, tmp_path) -> None:
    out = tmp_path / "by-category-region"
    aggregates = [
        "count(*) AS orders",
        "sum(amount) AS total",
        "avg(amount) AS mean",
        "min(amount) AS low",
        "max(amount) AS high",
    ]
    pipeline = Pipeline("sales", parallelism=3)
    (
        pipeline.read_csv(str(sales_dir), schema=SALES_SCHEMA)
        .key_by("category", "region")
        .agg(*aggregates)
        .write_parquet(str(out), mode="overwrite")
    )
    run(minicluster, pipeline)
    reference = spark.read.csv(str(sales_dir), schema=SALES_SCHEMA, header=True).groupBy("category", "region")
    expected = sorted(tuple(r) for r in reference.agg(*[F.expr(a) for a in aggregates]).collect())
    actual = rows(spark, out)
    assert [r[:3] for r in actual] == [r[:3] for r in expected]
    for got, want in zip(actual, expected, strict=True):
        assert got[3:] == pytest.approx(want[3:])


def test_join_filters_sql_union_and_distinct_match_plain_pyspark(minicluster, spark, sales_dir, tmp_path) -> None:
    regions = tmp_path / "regions.json"
    regions.write_text(
        "\n".join(json.dumps({"region": r, "manager": m}) for r, m in [("north", "ann"), ("south", "bob")]) + "\n"
    )
    out = tmp_path / "joined"
    pipeline = Pipeline("join", parallelism=2)
    sales = (
        pipeline.read_csv(str(sales_dir), schema=SALES_SCHEMA)
        .filter("amount > 20")
        .with_column("cents", "cast(amount * 100 AS BIGINT)")
    )
    managers = pipeline.read_json(str(regions), schema="region STRING, manager STRING")
    joined = sales.join(managers, on="region", how="left").sql(
        "SELECT category, region, coalesce(manager, 'none') AS manager FROM input"
    )
    extra = pipeline.read_json(str(regions), schema="region STRING, manager STRING").select(
        "'c-extra' AS category", "region", "manager"
    )
    joined.union(extra).distinct().write_json(str(out), mode="overwrite")
    run(minicluster, pipeline)

    plain_sales = (
        spark.read.csv(str(sales_dir), schema=SALES_SCHEMA, header=True)
        .filter("amount > 20")
        .withColumn("cents", F.expr("cast(amount * 100 AS BIGINT)"))
    )
    plain_managers = spark.read.json(str(regions), schema="region STRING, manager STRING")
    expected = (
        plain_sales.join(plain_managers, on="region", how="left")
        .selectExpr("category", "region", "coalesce(manager, 'none') AS manager")
        .unionByName(plain_managers.selectExpr("'c-extra' AS category", "region", "manager"))
        .distinct()
    )
    actual = spark.read.schema("category STRING, region STRING, manager STRING").json(str(out))
    assert sorted(tuple(r) for r in actual.collect()) == sorted(tuple(r) for r in expected.collect())


def test_a_failed_and_retried_task_leaves_no_duplicates(minicluster, spark, text_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLINK_RUNTIME_TEST_MARKERS", str(tmp_path / "markers"))
    out = tmp_path / "lines"
    pipeline = Pipeline(
        "retried",
        parallelism=2,
        config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "100 ms"},
    )
    (
        pipeline.read_text(str(text_dir / "*.txt"), split_size="2k")
        .transform("tests.helpers.transforms:fail_on_third_split")
        .write_parquet(str(out), mode="overwrite")
    )
    job_id = run(minicluster, pipeline)
    assert (tmp_path / "markers" / "failed").exists(), "the injected failure did not happen"
    with JobClient(minicluster.rest_url) as client:
        history = client.exceptions(job_id)["exceptionHistory"]["entries"]
    assert any("injected failure" in entry["stacktrace"] for entry in history)
    assert rows(spark, out) == sorted(tuple(r) for r in spark.read.text(str(text_dir / "*.txt")).collect())


def test_empty_input_gives_empty_output(minicluster, spark, tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    pipeline = Pipeline("empty", parallelism=2)
    pipeline.read_text(str(empty)).key_by("value").agg("count(*) AS n").write_parquet(str(out), mode="overwrite")
    run(minicluster, pipeline)
    assert (out / "_SUCCESS").exists()
    assert not list(out.glob("*.parquet")) or rows(spark, out) == []


def test_sink_modes(minicluster, spark, text_dir, tmp_path) -> None:
    out = tmp_path / "modes"

    def lines(mode: str) -> Pipeline:
        pipeline = Pipeline(f"mode {mode}", parallelism=2)
        pipeline.read_text(str(text_dir / "part-0.txt")).write_parquet(str(out), mode=mode)
        return pipeline

    run(minicluster, lines("error"))
    once = len(rows(spark, out))
    run(minicluster, lines("append"))
    assert len(rows(spark, out)) == 2 * once
    run(minicluster, lines("overwrite"))
    assert len(rows(spark, out)) == once
    with JobClient(minicluster.rest_url) as client, pytest.raises(RestClientError) as refused:
        client.submit(lines("error").job_graph())
    assert refused.value.status_code == 400
    assert "already exists" in str(refused.value)


def _pipeline_with(text_dir: Path, out: Path, build) -> Pipeline:
    pipeline = Pipeline("bad", parallelism=1)
    build(pipeline.read_text(str(text_dir / "*.txt"))).write_parquet(str(out), mode="overwrite")
    return pipeline


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda ds: ds.select("no_such_column"), "no_such_column"),
        (lambda ds: ds.sql("SELEKT value FROM input"), "SELEKT"),
        (lambda ds: ds.transform("tests.helpers.nowhere:fn"), "cannot import module 'tests.helpers.nowhere'"),
        (lambda ds: ds.transform("tests.helpers.transforms:not_a_dataframe"), "not a DataFrame"),
    ],
    ids=["unknown column", "invalid SQL", "unimportable function", "function returns no DataFrame"],
)
def test_bad_pipelines_are_refused_at_submit(minicluster, spark, text_dir, tmp_path, build, expected) -> None:
    with JobClient(minicluster.rest_url) as client, pytest.raises(RestClientError) as refused:
        client.submit(_pipeline_with(text_dir, tmp_path / "out", build).job_graph())
    assert refused.value.status_code == 400
    assert expected in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_missing_input_path_is_refused_at_submit(minicluster, spark, tmp_path) -> None:
    pipeline = Pipeline("missing", parallelism=1)
    pipeline.read_text(str(tmp_path / "nowhere" / "*.txt")).write_parquet(str(tmp_path / "out"))
    with JobClient(minicluster.rest_url) as client, pytest.raises(RestClientError) as refused:
        client.submit(pipeline.job_graph())
    assert "does not exist" in str(refused.value)


def test_runtime_failure_shows_the_spark_message(minicluster, spark, text_dir, tmp_path) -> None:
    pipeline = Pipeline("boom", parallelism=1)
    pipeline.read_text(str(text_dir / "part-0.txt")).filter("raise_error('record rejected') IS NULL").write_parquet(
        str(tmp_path / "out")
    )
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        assert client.wait(job_id, timeout=60).value == "FAILED"
        root = client.exceptions(job_id)["root-exception"]
    assert "record rejected" in root
    assert "Traceback" in root
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.parquet"))


def test_partitions_are_released_when_the_job_ends(minicluster, spark, text_dir, tmp_path) -> None:
    pipeline = Pipeline("released", parallelism=2)
    pipeline.read_text(str(text_dir / "*.txt")).key_by("value").agg("count(*) AS n").write_parquet(
        str(tmp_path / "out")
    )
    job_id = run(minicluster, pipeline)
    data_dir = Path(minicluster.config.raw("io.tmp.dirs"))
    deadline = time.monotonic() + 5
    while (data_dir / job_id).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (data_dir / job_id).exists()
    assert os.path.isdir(data_dir)


def test_cancel_interrupts_the_running_spark_job(minicluster, spark, text_dir, tmp_path) -> None:
    """A cancelled task cancels its Spark jobs at once. On a classic session
    SparkSession.interruptTag finds nothing to interrupt (spark/session.py): were it used,
    the task would be given up after task.cancellation.timeout and its Spark job run on,
    holding the executors."""
    pipeline = Pipeline("endless", parallelism=1)
    pipeline.read_text(str(text_dir / "*.txt")).transform("tests.helpers.transforms:endless").write_json(
        str(tmp_path / "out")
    )
    tracker = spark.sparkContext.statusTracker()
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        deadline = time.monotonic() + 60
        while not tracker.getActiveJobsIds():
            assert time.monotonic() < deadline, "the endless Spark job never started"
            time.sleep(0.2)
        cancelled_at = time.monotonic()
        client.cancel(job_id)
        assert client.wait(job_id, timeout=30).value == "CANCELED"
        while tracker.getActiveJobsIds():
            assert time.monotonic() - cancelled_at < 15, "the cancelled task's Spark job is still running"
            time.sleep(0.2)


def test_a_pooled_task_thread_carries_no_scheduler_pool_into_its_next_task(spark) -> None:
    """Task threads are reused (taskmanager/task_threads.py) and Spark's local properties
    live on the thread: a scope without a pool must not run in the previous task's pool, nor carry its tags
    (cancelling one task's Spark jobs by tag must not cancel the next task's)."""
    from flink_runtime.spark.session import TaskScope
    from flink_runtime.taskmanager.task_threads import TaskThread, TaskThreadPool

    pools: list[str | None] = []
    tags: list[set[str]] = []

    def task(pool: str | None) -> None:
        if pool is not None:  # a tag left behind, as an interrupted __exit__ would leave it
            spark.sparkContext.addJobTag("left-behind")
        with TaskScope(spark, tag=f"t-{pool}", pool=pool):
            pools.append(spark.sparkContext.getLocalProperty("spark.scheduler.pool"))
            tags.append({str(tag) for tag in spark.sparkContext.getJobTags()})

    threads = TaskThreadPool("scope-test")
    for pool in ("slot-3", None):
        handle = TaskThread(f"task {pool}")
        threads.start(handle, lambda pool=pool: task(pool))
        handle.join(30)
    assert pools == ["slot-3", None]
    assert tags == [{"t-slot-3"}, {"t-None"}]


@pytest.mark.parametrize(
    "schema",
    [
        "value string",
        "id INT, name STRING, amount DECIMAL(10,2), tags ARRAY<STRING>, at TIMESTAMP",
        "int",
        "struct<a: int, b: map<string, double>>",
    ],
)
def test_an_empty_frame_has_the_schema_createdataframe_gives(spark, schema) -> None:
    """The planner's empty DataFrames (built in the JVM, so pandas stays unimported) have
    exactly the schema of `createDataFrame([], schema)`, DDL strings and atomic types too."""
    assert empty_frame(spark, schema).schema == spark.createDataFrame([], schema).schema


def test_an_empty_frame_keeps_non_nullable_fields(spark) -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", LongType(), False), StructField("name", StringType(), True)])
    frame = empty_frame(spark, schema)
    assert frame.schema == schema
    assert frame.count() == 0
    assert frame.groupBy("name").count().schema.names == ["name", "count"]


def test_a_malformed_source_schema_is_refused_at_submit_saying_what(minicluster, spark, text_dir, tmp_path) -> None:
    """The declared schema is parsed at submit (spark/frames.py builds its empty DataFrame
    in the JVM now, not through createDataFrame): a typo still refuses the job clearly."""
    pipeline = Pipeline("bad schema", parallelism=1)
    pipeline.read_csv(str(text_dir / "*.txt"), schema="id INTT, name STRING").write_parquet(
        str(tmp_path / "out"), mode="overwrite"
    )
    with JobClient(minicluster.rest_url) as client, pytest.raises(RestClientError) as refused:
        client.submit(pipeline.job_graph())
    assert refused.value.status_code == 400
    assert "INTT" in str(refused.value), str(refused.value)
    assert "Traceback" not in str(refused.value)
