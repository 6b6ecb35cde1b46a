"""Continuous file sources: a job keeps running, picks up new files, and resumes from a savepoint."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.integration.test_savepoints import counts_in, input_splits, write_corpus

pytestmark = pytest.mark.integration


def continuous_count(input_dir: Path, output: Path) -> Pipeline:
    pipeline = Pipeline("continuous word count", parallelism=2)
    (
        pipeline.read_text(str(input_dir / "*.txt"), split_size=1, monitor_interval=0.3)
        .select("explode(split(value, ' ')) AS word")
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(output), mode="overwrite")
    )
    return pipeline


def wait_for_counts(output: Path, expected: dict[str, int], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if counts_in(output) == expected:
                return
        except (OSError, ValueError, KeyError):
            pass  # not published yet
        assert time.monotonic() < deadline, f"output never reached {sum(expected.values())} words"
        time.sleep(0.2)


def test_continuous_job_picks_up_new_files_and_resumes_from_a_savepoint(
    minicluster: MiniCluster, tmp_path: Path
) -> None:
    first = write_corpus(tmp_path / "in", files=3, seed=1)
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(continuous_count(tmp_path / "in", tmp_path / "out").job_graph())
        wait_for_counts(tmp_path / "out", dict(first))
        second = write_corpus(tmp_path / "in", files=2, seed=2, first=3)
        wait_for_counts(tmp_path / "out", dict(first + second))  # a new round, totals carried on
        assert client.status(job_id).value == "RUNNING"

        location = client.stop(job_id, target_directory=str(tmp_path / "savepoints"), timeout=60)
        assert client.status(job_id).value == "FINISHED"

        third = write_corpus(tmp_path / "in", files=2, seed=3, first=5)
        resumed = client.submit(
            continuous_count(tmp_path / "in", tmp_path / "out").job_graph(), savepoint_path=location
        )
        wait_for_counts(tmp_path / "out", dict(first + second + third))
        splits = input_splits(minicluster.rest_url, resumed)
        client.cancel(resumed)
        assert client.wait(resumed, timeout=30).value == "CANCELED"
    # The resumed job read only the files that arrived after the savepoint.
    assert splits["total"] == splits["completed"] == 2
