"""Partitioned sinks on the session MiniCluster: `partition_by` writes Hive-style
directories, mode 'overwrite_partitions' replaces only the partitions a job produced
(all others byte for byte untouched), a failed job changes nothing, and bad partition
columns or values are refused with a message that says what to do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from flink_runtime.spark.session import acquire_session, release_session
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.integration

SCHEMA = "day STRING, item STRING, amount BIGINT"
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")


@pytest.fixture(scope="module")
def spark(minicluster: MiniCluster) -> Iterator:
    session = acquire_session(minicluster.config.to_dict(), default_cores=4)
    yield session
    release_session()


def write_orders(directory: Path, day: str, scale: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["day,item,amount"] + [f"{day},i{n % 3},{n * scale}" for n in range(1, 13)]
    (directory / f"{day}.csv").write_text("\n".join(lines) + "\n")


def daily_totals(inputs: str, out: Path, name: str, transform: str | None = None) -> Pipeline:
    pipeline = Pipeline(name, parallelism=2)
    orders = pipeline.read_csv(inputs, schema=SCHEMA, split_size=1)
    if transform:
        orders = orders.transform(transform)
    (
        orders.key_by("day", "item")
        .agg("count(*) AS orders", "sum(amount) AS total")
        .write_parquet(str(out), mode="overwrite_partitions", partition_by=["day"])
    )
    return pipeline


def run(minicluster: MiniCluster, pipeline: Pipeline, expect: str = "FINISHED") -> str:
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        status = client.wait(job_id, timeout=120)
        assert status.value == expect, client.exceptions(job_id)["root-exception"]
        return client.exceptions(job_id)["root-exception"] or ""


def file_hashes(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def day_rows(spark, out: Path, day: str) -> list[tuple]:
    return sorted(tuple(row) for row in spark.read.parquet(str(out / f"day={day}")).collect())


def expected_rows(spark, inputs: str) -> list[tuple]:
    df = spark.read.csv(inputs, schema=SCHEMA, header=True)
    result = df.groupBy("item").agg({"*": "count", "amount": "sum"}).collect()
    return sorted((row["item"], row["count(1)"], row["sum(amount)"]) for row in result)


def test_overwrite_partitions_replaces_only_the_days_a_job_produced(minicluster, spark, tmp_path) -> None:
    out = tmp_path / "totals"
    first = tmp_path / "first"
    for day in DAYS:
        write_orders(first, day, scale=1)
    run(minicluster, daily_totals(str(first / "*.csv"), out, "three days"))
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("_")) == [f"day={d}" for d in DAYS]
    assert (out / "_SUCCESS").exists() and not (out / "_flink_staging").exists()
    before = {day: file_hashes(out / f"day={day}") for day in DAYS}

    # Day 2 again, with changed input: only day 2 changes, to exactly the new result.
    rerun = tmp_path / "rerun"
    write_orders(rerun, DAYS[1], scale=10)
    run(minicluster, daily_totals(str(rerun / "*.csv"), out, "day 2 again"))
    assert file_hashes(out / f"day={DAYS[0]}") == before[DAYS[0]]
    assert file_hashes(out / f"day={DAYS[2]}") == before[DAYS[2]]
    assert file_hashes(out / f"day={DAYS[1]}") != before[DAYS[1]]
    assert day_rows(spark, out, DAYS[1]) == expected_rows(spark, str(rerun / "*.csv"))
    assert day_rows(spark, out, DAYS[0]) == expected_rows(spark, str(first / f"{DAYS[0]}.csv"))
    after_rerun = file_hashes(out)

    # A job over days 2 and 3 that fails changes nothing at all, byte for byte.
    failing = tmp_path / "failing"
    write_orders(failing, DAYS[1], scale=100)
    write_orders(failing, DAYS[2], scale=100)
    root = run(
        minicluster,
        daily_totals(str(failing / "*.csv"), out, "fails", "tests.helpers.transforms:fail_on_data"),
        expect="FAILED",
    )
    assert "injected failure" in root
    assert file_hashes(out) == after_rerun
    assert not (out / "_flink_staging").exists()


def test_bad_partition_columns_and_values_are_refused_clearly(minicluster, spark, tmp_path) -> None:
    inputs = tmp_path / "in"
    write_orders(inputs, DAYS[0], scale=1)
    unknown = Pipeline("unknown partition column", parallelism=1)
    unknown.read_csv(str(inputs), schema=SCHEMA).write_parquet(
        str(tmp_path / "a"), mode="overwrite_partitions", partition_by=["dya"]
    )
    with JobClient(minicluster.rest_url) as client, pytest.raises(RestClientError) as refused:
        client.submit(unknown.job_graph())
    assert refused.value.status_code == 400
    assert "partition_by column 'dya' is not an output column" in str(refused.value)
    assert "'day'" in str(refused.value)

    slashed = Pipeline("slash in a partition value", parallelism=1)
    slashed.read_csv(str(inputs), schema=SCHEMA).with_column("day", "replace(day, '-', '/')").write_parquet(
        str(tmp_path / "b"), mode="overwrite_partitions", partition_by="day"
    )
    root = run(minicluster, slashed, expect="FAILED")
    assert "partition column 'day' has the value '2026/01/01', which contains '/'" in root
    # The job-end cleanup removes the failed attempt's staged files once the job is FAILED
    # (walking them while it does raced with it once): wait for it, then nothing was published.
    eventually(lambda: not (tmp_path / "b" / "_flink_staging").exists(), what="the failed job's staging to go")
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").rglob("*.parquet"))
