"""Continuous file sources: a job keeps running, picks up new files, and resumes from a savepoint."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.executiongraph import vertex_io_metrics
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers.waiting import eventually
from tests.integration.test_savepoints import counts_in, input_splits, write_corpus

pytestmark = pytest.mark.integration


def continuous_count(input_dir: Path, output: Path, slow: bool = False) -> Pipeline:
    pipeline = Pipeline("continuous word count", parallelism=2)
    source = pipeline.read_text(str(input_dir / "*.txt"), split_size=1, monitor_interval=0.3)
    if slow:
        source = source.transform("tests.helpers.transforms:slow")
    (
        source.select("explode(split(value, ' ')) AS word")
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(output), mode="overwrite")
    )
    return pipeline


def wait_for_counts(
    output: Path, expected: dict[str, int], timeout: float = 90, job: tuple[JobClient, str] | None = None
) -> None:
    """Wait until the sink holds `expected`; on a timeout say what became of `job`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if counts_in(output) == expected:
                return
        except (OSError, ValueError, KeyError):
            pass  # not published yet
        status = job[0].status(job[1]).value if job is not None else None
        if time.monotonic() >= deadline or status == "FAILED":
            why = f": job {status}, {job[0].exceptions(job[1])}" if job is not None else ""
            raise AssertionError(f"output never reached {sum(expected.values())} words{why}")
        time.sleep(0.2)


def test_continuous_job_picks_up_new_files_and_resumes_from_a_savepoint(
    minicluster: MiniCluster, tmp_path: Path
) -> None:
    first = write_corpus(tmp_path / "in", files=3, seed=1)
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(continuous_count(tmp_path / "in", tmp_path / "out").job_graph())
        wait_for_counts(tmp_path / "out", dict(first), job=(client, job_id))
        second = write_corpus(tmp_path / "in", files=2, seed=2, first=3)
        wait_for_counts(tmp_path / "out", dict(first + second), job=(client, job_id))  # a new round, totals carried on
        assert client.status(job_id).value == "RUNNING"
        # I/O metrics are summed over the rounds: the source has read all 5 files, the
        # sink written one count per distinct word in each round.
        graph = minicluster.jobmanager.jobs[job_id].graph
        source, sink = (vertex_io_metrics(ejv) for ejv in graph.vertices.values())
        assert source.complete and sink.complete
        assert source.metrics.bytes_in == sum(p.stat().st_size for p in (tmp_path / "in").iterdir())
        assert sink.metrics.records_out == len(first) + len(first + second)

        location = client.stop(job_id, target_directory=str(tmp_path / "savepoints"), timeout=60)
        assert client.status(job_id).value == "FINISHED"
        # Its end stored, the job leaves nothing behind in its sink's staging directory
        # (the marker of its published rounds, which only a recovery needed, included).
        eventually(lambda: not (tmp_path / "out" / "_flink_staging").exists(), 30, "the staging directory gone")

        third = write_corpus(tmp_path / "in", files=2, seed=3, first=5)
        resumed = client.submit(
            continuous_count(tmp_path / "in", tmp_path / "out").job_graph(), savepoint_path=location
        )
        wait_for_counts(tmp_path / "out", dict(first + second + third), job=(client, resumed))
        splits = input_splits(minicluster.rest_url, resumed)
        client.cancel(resumed)
        assert client.wait(resumed, timeout=30).value == "CANCELED"
    # The resumed job read only the files that arrived after the savepoint.
    assert splits["total"] == splits["completed"] == 2


def test_three_savepoints_then_a_stop_of_a_stateful_continuous_job(minicluster: MiniCluster, tmp_path: Path) -> None:
    """A savepoint's copy leaves the live keyed state's path as it is: a copy that rewrote it
    (to a relative one) would fail every later savepoint (FileNotFoundError 'state/...'),
    and a stop after it would end FINISHED with no savepoint, the state gone."""
    corpus = write_corpus(tmp_path / "in", files=2, seed=1)
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(continuous_count(tmp_path / "in", tmp_path / "out").job_graph())
        wait_for_counts(tmp_path / "out", dict(corpus), job=(client, job_id))
        locations = []
        for round_number in range(3):
            locations.append(client.savepoint(job_id, str(tmp_path / "savepoints"), timeout=60))
            corpus += write_corpus(tmp_path / "in", files=1, seed=10 + round_number, first=2 + round_number)
            wait_for_counts(tmp_path / "out", dict(corpus), job=(client, job_id))  # the job runs on between savepoints
        locations.append(client.stop(job_id, target_directory=str(tmp_path / "savepoints"), timeout=60))
        assert client.status(job_id).value == "FINISHED"
        assert len(set(locations)) == 4 and all(Path(p, "_metadata").is_file() for p in locations)

        corpus += write_corpus(tmp_path / "in", files=1, seed=20, first=5)
        resumed = client.submit(
            continuous_count(tmp_path / "in", tmp_path / "out").job_graph(), savepoint_path=locations[-1]
        )
        wait_for_counts(
            tmp_path / "out", dict(corpus), job=(client, resumed)
        )  # exactly once: totals continue from the state
        splits = input_splits(minicluster.rest_url, resumed)
        client.cancel(resumed)
        assert client.wait(resumed, timeout=30).value == "CANCELED"
    assert splits["total"] == splits["completed"] == 1


def test_a_stop_whose_savepoint_fails_leaves_the_continuous_job_running(
    minicluster: MiniCluster, tmp_path: Path
) -> None:
    """As in Flink, a stop whose savepoint fails leaves the job RUNNING and says
    why; a target that cannot be written is refused before the stop changes anything."""
    corpus = write_corpus(tmp_path / "in", files=8, seed=1)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the savepoint folder would go")
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(continuous_count(tmp_path / "in", tmp_path / "out", slow=True).job_graph())
        # A stop needs a RUNNING job (409 while it is INITIALIZING, its plan being prepared).
        eventually(lambda: client.status(job_id).value == "RUNNING", 60, "the job RUNNING")
        with pytest.raises(RestClientError) as refused:
            client.stop_with_savepoint(job_id, str(blocked / "savepoints"))
        assert refused.value.status_code == 400 and "cannot write a savepoint" in str(refused.value)

        target = tmp_path / "savepoints"
        trigger = client.stop_with_savepoint(job_id, str(target))
        # Accepted (the target was writable then); now it cannot be written any more.
        target.rmdir()
        target.write_text("the savepoint will fail")
        deadline = time.monotonic() + 60
        while (answer := client.savepoint_status(job_id, trigger))["status"]["id"] != "COMPLETED":
            assert time.monotonic() < deadline, "the stop never ended"
            time.sleep(0.1)
        assert "failure-cause" in answer["operation"], answer
        assert client.status(job_id).value == "RUNNING"
        # It goes on reading: the files the stopped round left, and new ones.
        corpus += write_corpus(tmp_path / "in", files=1, seed=2, first=8)
        wait_for_counts(tmp_path / "out", dict(corpus), job=(client, job_id))
        client.cancel(job_id)
        assert client.wait(job_id, timeout=30).value == "CANCELED"
