"""Global order, top-N and window functions on the session MiniCluster, against plain
PySpark's orderBy / limit / window over the same data (ties, nulls, descending)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from flink_runtime.spark.session import acquire_session, release_session

pytestmark = pytest.mark.integration

SCHEMA = "id BIGINT, region STRING, amount BIGINT"
ORDER = ("amount DESC", "region ASC NULLS LAST")


@pytest.fixture(scope="module")
def spark(minicluster: MiniCluster) -> Iterator:
    session = acquire_session(minicluster.config.to_dict(), default_cores=4)
    yield session
    release_session()


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("orders")
    rng = random.Random(3)
    row = 0
    for index in range(6):
        lines = ["id,region,amount"]
        for _ in range(200):
            region = rng.choice(["north", "south", "east", ""])  # "" reads as null
            amount = "" if rng.random() < 0.05 else str(rng.randint(0, 40))  # many ties, some nulls
            lines.append(f"{row},{region},{amount}")
            row += 1
        (directory / f"{index}.csv").write_text("\n".join(lines) + "\n")
    return directory


def run(minicluster: MiniCluster, pipeline: Pipeline) -> None:
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        assert client.wait(job_id, timeout=180).value == "FINISHED", client.exceptions(job_id)["root-exception"]


def in_subtask_order(out: Path) -> list[dict]:
    """The sink's files, subtask 0's first: the data set in its global order."""
    files = sorted(out.glob("subtask-*.parquet"), key=lambda p: (int(re.match(r"subtask-(\d+)-", p.name)[1]), p.name))
    return [row for path in files for row in pq.read_table(path).to_pylist()]


def test_order_by_and_top_n_equal_plain_pyspark(minicluster, spark, orders, tmp_path) -> None:
    pipeline = Pipeline("global order", parallelism=3)
    source = pipeline.read_csv(str(orders), schema=SCHEMA, split_size=1)
    # Three ranges, as set: left to the scheduler, this little data is sorted by one subtask
    # (tests/integration/test_adaptive_parallelism.py).
    ordered = source.order_by(*ORDER).set_parallelism(3)
    ordered.write_parquet(str(tmp_path / "sorted"))
    ordered.limit(25).write_parquet(str(tmp_path / "top"))
    graph = pipeline.job_graph()
    assert {vertex.parallelism for vertex in graph.vertices if vertex.name.startswith("Top-N")} == {1}
    run(minicluster, pipeline)

    reference = spark.read.csv(str(orders), schema=SCHEMA, header=True)
    expected = reference.orderBy(reference.amount.desc(), reference.region.asc_nulls_last())
    keys = [(row["amount"], row["region"]) for row in expected.collect()]
    got = in_subtask_order(tmp_path / "sorted")
    assert [(row["amount"], row["region"]) for row in got] == keys
    assert sorted(row["id"] for row in got) == sorted(row["id"] for row in reference.collect())
    assert len(list((tmp_path / "sorted").glob("subtask-*.parquet"))) == 3  # three ranges, each sorted
    assert keys[0][0] is not None and keys[-1][0] is None  # nulls last when descending

    top = in_subtask_order(tmp_path / "top")
    assert [(row["amount"], row["region"]) for row in top] == keys[:25]


def test_window_functions_in_sql_after_key_by_equal_plain_pyspark(minicluster, spark, orders, tmp_path) -> None:
    query = (
        "SELECT id, region, amount, rank() OVER (PARTITION BY region ORDER BY amount DESC NULLS LAST) AS r, "
        "sum(amount) OVER (PARTITION BY region) AS region_total FROM input"
    )
    pipeline = Pipeline("window", parallelism=2)
    pipeline.read_csv(str(orders), schema=SCHEMA, split_size=1).key_by("region").sql(query).write_parquet(
        str(tmp_path / "ranked")
    )
    run(minicluster, pipeline)
    reference = spark.read.csv(str(orders), schema=SCHEMA, header=True)
    reference.createOrReplaceTempView("window_reference")
    expected = sorted(tuple(r) for r in spark.sql(query.replace("FROM input", "FROM window_reference")).collect())
    got = sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "ranked")).collect())
    assert got == expected
