"""Savepoints, stop-with-savepoint and resuming, on the MiniCluster with PySpark tasks."""

from __future__ import annotations

import collections
import json
import random
import time
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers.jobs import sleep_job

pytestmark = pytest.mark.integration


def write_corpus(directory: Path, files: int, seed: int = 3, first: int = 0) -> collections.Counter[str]:
    rng = random.Random(seed)
    directory.mkdir(exist_ok=True)
    counts: collections.Counter[str] = collections.Counter()
    for index in range(first, first + files):
        lines = [" ".join(rng.choice("abcdefgh") for _ in range(6)) for _ in range(40)]
        counts.update(word for line in lines for word in line.split())
        (directory / f"{index:02d}.txt").write_text("\n".join(lines) + "\n")
    return counts


def word_count(input_dir: Path, output: Path, slow: bool = True) -> Pipeline:
    pipeline = Pipeline("resumable word count", parallelism=2)
    source = pipeline.read_text(str(input_dir / "*.txt"), split_size=1)
    if slow:
        source = source.transform("tests.helpers.transforms:slow")
    (
        source.select("explode(split(value, ' ')) AS word")
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(output), mode="overwrite")
    )
    return pipeline


def counts_in(output: Path) -> dict[str, int]:
    table = pq.read_table(output)
    return dict(zip(table.column("word").to_pylist(), table.column("n").to_pylist(), strict=True))


def input_splits(rest_url: str, job_id: str, vertex_prefix: str = "Read text") -> dict[str, int]:
    details = httpx.get(f"{rest_url}/jobs/{job_id}").json()
    source = next(v for v in details["vertices"] if v["name"].startswith(vertex_prefix))
    return httpx.get(f"{rest_url}/jobs/{job_id}/vertices/{source['id']}").json()["input-splits"]


def wait_for_splits(rest_url: str, job_id: str, completed: int, vertex_prefix: str = "Read text") -> None:
    """Until the source has completed `completed` splits: "a few splits in" by the job's
    progress rather than a fixed sleep (which also had to guess how fast Spark runs)."""
    deadline = time.monotonic() + 60
    while input_splits(rest_url, job_id, vertex_prefix).get("completed", 0) < completed:
        assert time.monotonic() < deadline, f"job {job_id}: fewer than {completed} splits of {vertex_prefix} in 60 s"
        time.sleep(0.1)


def wait_running(client: JobClient, job_id: str, timeout: float = 60) -> None:
    """Plan resolution starts a SparkSession the first time, so RUNNING can take a while."""
    deadline = time.monotonic() + timeout
    while client.status(job_id).value != "RUNNING":
        assert time.monotonic() < deadline, f"job {job_id} not RUNNING after {timeout} s"
        time.sleep(0.1)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_stop_with_savepoint_then_resume_processes_every_file_exactly_once(
    minicluster: MiniCluster, tmp_path: Path, backend: str
) -> None:
    expected = write_corpus(tmp_path / "in", files=12)
    with JobClient(minicluster.rest_url) as client:
        graph = word_count(tmp_path / "in", tmp_path / "out").job_graph()
        graph.config["state.backend.type"] = backend
        job_id = client.submit(graph)
        wait_running(client, job_id)
        wait_for_splits(minicluster.rest_url, job_id, 2)  # a few splits in
        location = client.stop(job_id, target_directory=str(tmp_path / "savepoints"), timeout=120)
        assert client.status(job_id).value == "FINISHED"
        first = input_splits(minicluster.rest_url, job_id)
        assert 0 < first["completed"] < 12, "the stop should have come mid-job"
        assert Path(location, "_metadata").exists()
        assert sum(counts_in(tmp_path / "out").values()) < sum(expected.values())

        resumed = client.submit(word_count(tmp_path / "in", tmp_path / "out").job_graph(), savepoint_path=location)
        assert client.wait(resumed, timeout=120).value == "FINISHED"
        second = input_splits(minicluster.rest_url, resumed)
    assert counts_in(tmp_path / "out") == dict(expected)  # totals continue from the keyed state
    assert first["completed"] + second["completed"] == 12  # every file exactly once
    assert second["assignments"] == second["total"] == 12 - first["completed"]


def test_stop_then_resume_keeps_the_static_side_of_a_join(minicluster: MiniCluster, tmp_path: Path) -> None:
    """The resumed join reads its small side (one file, read at once) again: had the stop's
    savepoint recorded it as read, the resumed join would see an empty table and publish
    0 rows."""
    expected = write_corpus(tmp_path / "in", files=12)
    (tmp_path / "lengths.json").write_text(
        "\n".join(json.dumps({"word": word, "length": len(word)}) for word in expected) + "\n"
    )

    def counts_with_lengths() -> Pipeline:
        pipeline = Pipeline("word count joined with lengths", parallelism=2)
        words = (
            pipeline.read_text(str(tmp_path / "in" / "*.txt"), split_size=1)
            .transform("tests.helpers.transforms:slow")
            .select("explode(split(value, ' ')) AS word")
        )
        lengths = pipeline.read_json(str(tmp_path / "lengths.json"), schema="word STRING, length INT")
        (
            words.key_by("word")
            .agg("count(*) AS n")
            .join(lengths, on="word", how="inner")
            .write_parquet(str(tmp_path / "out"), mode="overwrite")
        )
        return pipeline

    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(counts_with_lengths().job_graph())
        wait_running(client, job_id)
        wait_for_splits(minicluster.rest_url, job_id, 2)  # a few splits in
        wait_for_splits(minicluster.rest_url, job_id, 1, "Read JSON")  # the one-file side is read
        location = client.stop(job_id, target_directory=str(tmp_path / "savepoints"), timeout=120)
        assert 0 < input_splits(minicluster.rest_url, job_id)["completed"] < 12, "the stop should come mid-job"
        resumed = client.submit(counts_with_lengths().job_graph(), savepoint_path=location)
        assert client.wait(resumed, timeout=120).value == "FINISHED"
    table = pq.read_table(tmp_path / "out")
    rows = zip(*(table.column(c).to_pylist() for c in ("word", "n", "length")), strict=True)
    assert {word: (n, length) for word, n, length in rows} == {w: (n, len(w)) for w, n in expected.items()}


def test_savepoint_of_a_running_job_and_resume(minicluster: MiniCluster, tmp_path: Path) -> None:
    expected = write_corpus(tmp_path / "in", files=10)
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(word_count(tmp_path / "in", tmp_path / "out").job_graph())
        wait_running(client, job_id)
        # A savepoint taken before any split completed would carry no work to skip: wait for
        # the first split rather than a fixed time (a cold SparkSession takes longer).
        deadline = time.monotonic() + 60
        while input_splits(minicluster.rest_url, job_id)["completed"] < 1:
            assert time.monotonic() < deadline, "no input split completed within 60 s"
            time.sleep(0.1)
        location = client.savepoint(job_id, str(tmp_path / "savepoints"), cancel_job=True, timeout=120)
        assert client.wait(job_id, timeout=60).value == "CANCELED"
        metadata = json.loads(Path(location, "_metadata").read_text())
        done = len(metadata["vertices"]["read-text-1"]["completed_files"])
        assert done >= 1
        # The savepoint carries the completed splits' chunks, so it stands alone.
        assert list(Path(location, "data").rglob("__sub=*"))

        resumed = client.submit(word_count(tmp_path / "in", tmp_path / "out").job_graph(), savepoint_path=location)
        assert client.wait(resumed, timeout=120).value == "FINISHED"
        splits = input_splits(minicluster.rest_url, resumed)
        checkpoints = client.checkpoints(job_id)
    assert counts_in(tmp_path / "out") == dict(expected)
    assert splits["total"] == 10 - done
    assert checkpoints["counts"]["completed"] >= 1
    assert checkpoints["latest"]["savepoint"]["external_path"] == location


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_bad_savepoint_is_refused_and_nothing_starts(minicluster: MiniCluster, tmp_path: Path, damage: str) -> None:
    write_corpus(tmp_path / "in", files=2)
    savepoint = tmp_path / "savepoint-x"
    if damage == "corrupt":
        savepoint.mkdir()
        (savepoint / "_metadata").write_text('{"job_id": "x", "vertices": [')
    with JobClient(minicluster.rest_url) as client, pytest.raises(RestClientError) as refused:
        client.submit(
            word_count(tmp_path / "in", tmp_path / "out", slow=False).job_graph(), savepoint_path=str(savepoint)
        )
    assert refused.value.status_code == 400
    assert ("does not exist" if damage == "missing" else "corrupt") in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_savepoint_of_a_finished_job_is_a_conflict(minicluster: MiniCluster, tmp_path: Path) -> None:
    write_corpus(tmp_path / "in", files=1)
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(word_count(tmp_path / "in", tmp_path / "out", slow=False).job_graph())
        assert client.wait(job_id, timeout=60).value == "FINISHED"
        response = httpx.post(
            f"{minicluster.rest_url}/jobs/{job_id}/savepoints", json={"target-directory": str(tmp_path)}
        )
    assert response.status_code == 409
    assert "not RUNNING" in response.json()["errors"][0]


def stop_whose_savepoint_fails(client: JobClient, job_id: str, target: Path) -> dict:
    """Trigger a stop to a writable target, then make the target unwritable."""
    trigger = client.stop_with_savepoint(job_id, str(target))
    target.rmdir()
    target.write_text("the savepoint will fail")
    deadline = time.monotonic() + 60
    while (answer := client.savepoint_status(job_id, trigger))["status"]["id"] != "COMPLETED":
        assert time.monotonic() < deadline, "the stop never ended"
        time.sleep(0.1)
    return answer


def test_a_batch_job_whose_stop_fails_keeps_running_and_finishes_all_its_input(
    minicluster: MiniCluster, tmp_path: Path
) -> None:
    """As in Flink, a batch job whose stop-with-savepoint fails stays RUNNING (ending
    FINISHED would leave part of its input unread); the totals cover every file once."""
    expected = write_corpus(tmp_path / "in", files=12)
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(word_count(tmp_path / "in", tmp_path / "out").job_graph())
        wait_running(client, job_id)
        wait_for_splits(minicluster.rest_url, job_id, 2)  # a few splits in
        answer = stop_whose_savepoint_fails(client, job_id, tmp_path / "savepoints")
        assert "failure-cause" in answer["operation"], answer
        assert client.status(job_id).value == "RUNNING"
        assert client.wait(job_id, timeout=120).value == "FINISHED"
    assert counts_in(tmp_path / "out") == dict(expected)  # keyed totals replace the first round's


def test_a_failed_stop_of_a_job_without_aggregation_adds_the_rest_of_its_rows(
    minicluster: MiniCluster, tmp_path: Path
) -> None:
    """The default sink mode ('error') would refuse the path the stopped round published
    to; the rows of the round after a failed stop are added to it, each row once."""
    write_corpus(tmp_path / "in", files=10)
    pipeline = Pipeline("copy lines", parallelism=2)
    (
        pipeline.read_text(str(tmp_path / "in" / "*.txt"), split_size=1)
        .transform("tests.helpers.transforms:slow")
        .write_parquet(str(tmp_path / "out"))
    )
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        wait_running(client, job_id)
        wait_for_splits(minicluster.rest_url, job_id, 2)  # a few splits in
        answer = stop_whose_savepoint_fails(client, job_id, tmp_path / "savepoints")
        assert "failure-cause" in answer["operation"], answer
        assert client.wait(job_id, timeout=120).value == "FINISHED", client.exceptions(job_id)
        splits = input_splits(minicluster.rest_url, job_id)
    assert splits["completed"] < 10, "the stop should have come mid-job: the last round reads the rest"
    lines = pq.read_table(tmp_path / "out").column("value").to_pylist()
    written = [line for f in sorted((tmp_path / "in").glob("*.txt")) for line in f.read_text().splitlines()]
    assert sorted(lines) == sorted(written)


def test_one_stop_at_a_time_and_a_retried_trigger_id_gets_the_same_request(
    minicluster: MiniCluster, tmp_path: Path
) -> None:
    """A job takes one savepoint request at a time: another is refused (409) naming the one
    in progress, so a burst of triggers cannot pile up; a retry with the same triggerId is
    the same request."""
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(sleep_job(3.0, name="slow to stop"))
        wait_running(client, job_id)
        trigger_id = "0123456789abcdef0123456789abcdef"
        body = {"targetDirectory": str(tmp_path / "sp"), "triggerId": trigger_id}
        first = httpx.post(f"{minicluster.rest_url}/jobs/{job_id}/stop", json=body)
        retried = httpx.post(f"{minicluster.rest_url}/jobs/{job_id}/stop", json=body)
        second = httpx.post(f"{minicluster.rest_url}/jobs/{job_id}/savepoints", json={})
        assert (first.status_code, retried.status_code) == (202, 202)
        assert first.json() == retried.json() == {"request-id": trigger_id}
        assert second.status_code == 409
        assert trigger_id in second.json()["errors"][0]
        location = client.wait_for_savepoint(job_id, trigger_id, timeout=60)
        assert Path(location).is_dir()
        assert client.wait(job_id, timeout=30).value == "FINISHED"


def test_periodic_checkpoints_are_written_and_retained(minicluster: MiniCluster, tmp_path: Path) -> None:
    write_corpus(tmp_path / "in", files=8)
    pipeline = word_count(tmp_path / "in", tmp_path / "out")
    graph = pipeline.job_graph()
    graph.config.update(
        {
            "execution.checkpointing.interval": "500 ms",
            "state.checkpoints.dir": str(tmp_path / "checkpoints"),
            "state.checkpoints.num-retained": "2",
        }
    )
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(graph)
        assert client.wait(job_id, timeout=120).value == "FINISHED"
        stats = client.checkpoints(job_id)
    assert stats["counts"]["completed"] >= 2
    # A FINISHED job's checkpoints are deleted (Flink's retention, whatever
    # execution.checkpointing.externalized-checkpoint-retention says), and so is its folder.
    deadline = time.monotonic() + 20
    while (tmp_path / "checkpoints" / job_id).exists():
        assert time.monotonic() < deadline, "the finished job's checkpoint folder stays"
        time.sleep(0.05)
    latest = stats["latest"]["completed"]
    assert latest["num_subtasks"] == latest["num_acknowledged_subtasks"]


def test_a_stop_of_a_job_cancelled_meanwhile_answers_failed(minicluster: MiniCluster, tmp_path: Path) -> None:
    """The stop waits for the running task; the job is cancelled meanwhile. The stop's
    trigger id answered IN_PROGRESS for ever; as Flink's, it completes failed, naming
    CANCELED, and no savepoint folder is left."""
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(sleep_job(60.0, name="stopped then cancelled"))
        wait_running(client, job_id)
        trigger = client.stop_with_savepoint(job_id, str(tmp_path / "sp"))
        client.cancel(job_id)
        assert client.wait(job_id, timeout=60).value == "CANCELED"
        answer = httpx.get(f"{minicluster.rest_url}/jobs/{job_id}/savepoints/{trigger}").json()
    assert answer["status"]["id"] == "COMPLETED", answer
    assert "reached CANCELED before its savepoint completed" in answer["operation"]["failure-cause"]["stack-trace"]
    assert not list((tmp_path / "sp").glob("savepoint-*"))
