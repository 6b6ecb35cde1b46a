"""The plan cache on a real MiniCluster (planner/plan_cache.py): a pipeline submitted
again is planned from it, and an input rewritten with other columns is checked anew
and refused at submit, never accepted on a stale answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from flink_runtime.planner import tasks

pytestmark = pytest.mark.integration


def doubled(data: Path, out: Path) -> Pipeline:
    pipeline = Pipeline("plan cache", parallelism=1)
    pipeline.read_json(str(data)).select("word", "n * 2 AS twice").write_json(str(out), mode="overwrite")
    return pipeline


def run(cluster: MiniCluster, pipeline: Pipeline) -> str:
    with JobClient(cluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        assert client.wait(job_id, timeout=120).value == "FINISHED", client.exceptions(job_id)
    return job_id


def output(out: Path) -> list[str]:
    return sorted(line for part in out.glob("*.json") for line in part.read_text().splitlines())


def test_a_pipeline_submitted_again_is_planned_from_the_cache_until_its_input_changes(
    minicluster: MiniCluster, tmp_path: Path
) -> None:
    data = tmp_path / "in"
    data.mkdir()
    (data / "part-0.json").write_text('{"word": "a", "n": 1}\n{"word": "b", "n": 2}\n')
    run(minicluster, doubled(data, tmp_path / "first"))
    hits = tasks._plan_cache.hits
    run(minicluster, doubled(data, tmp_path / "second"))
    assert tasks._plan_cache.hits == hits + 1  # its one vertex
    assert (
        output(tmp_path / "second")
        == output(tmp_path / "first")
        == [
            '{"word":"a","twice":2}',
            '{"word":"b","twice":4}',
        ]
    )

    # The same file rewritten without `n`: checked again, and refused naming the column.
    (data / "part-0.json").write_text('{"word": "a", "count": 1}\n')
    with JobClient(minicluster.rest_url) as client, pytest.raises(RestClientError) as refused:
        client.submit(doubled(data, tmp_path / "third").job_graph())
    assert refused.value.status_code == 400
    assert "`n`" in str(refused.value)
    assert tasks._plan_cache.hits == hits + 1
    assert not (tmp_path / "third").exists()
