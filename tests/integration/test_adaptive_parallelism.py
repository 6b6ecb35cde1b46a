"""Adaptive batch parallelism on a real MiniCluster (scheduler/adaptive_parallelism.py):
a vertex whose parallelism was not set runs with as many subtasks as the bytes it reads
call for, its output the same as plain PySpark's; the options and set_parallelism keep it."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.integration

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Counter]:
    """Four small text files, and the word count they should give."""
    directory = tmp_path_factory.mktemp("adaptive-text")
    rng = random.Random(11)
    expected: Counter = Counter()
    for index in range(4):
        lines = [[rng.choice(WORDS) + str(rng.randint(0, 300)) for _ in range(8)] for _ in range(200)]
        expected.update(word for line in lines for word in line)
        (directory / f"part-{index}.txt").write_text("\n".join(" ".join(line) for line in lines) + "\n")
    return directory, expected


def word_count(text_dir: Path, out: Path, config: dict[str, Any] | None = None, pinned: bool = False) -> Pipeline:
    pipeline = Pipeline("adaptive word count", parallelism=2, config=config or {})
    words = pipeline.read_text(str(text_dir / "*.txt")).select("explode(split(value, ' ')) AS word")
    counts = words.key_by("word").agg("count(*) AS n")
    (counts.set_parallelism(2) if pinned else counts).write_csv(str(out), mode="overwrite")
    return pipeline


def run(cluster: MiniCluster, pipeline: Pipeline) -> dict[str, int]:
    """Run it to FINISHED; the parallelism of each vertex, by name, as the REST API shows
    it: the same in `/jobs/:id` and in its plan (which the Flink web UI draws)."""
    with JobClient(cluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        assert client.wait(job_id, timeout=120).value == "FINISHED", client.exceptions(job_id)
        vertices = {vertex["name"]: vertex["parallelism"] for vertex in client.details(job_id)["vertices"]}
    plan = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/plan", timeout=10).json()["plan"]
    assert {node["description"]: node["parallelism"] for node in plan["nodes"]} == vertices
    return vertices


def counted(out: Path) -> Counter:
    found: Counter = Counter()
    for part in out.glob("*.csv"):
        header, *lines = part.read_text().splitlines()
        assert header == "word,n"
        for line in lines:
            word, n = line.rsplit(",", 1)
            assert word not in found, f"{word} counted by two subtasks"
            found[word] = int(n)
    return found


def test_a_small_final_aggregate_runs_as_one_subtask_with_the_same_counts(
    minicluster: MiniCluster, text: tuple[Path, Counter], tmp_path: Path
) -> None:
    text_dir, expected = text
    vertices = run(minicluster, word_count(text_dir, tmp_path / "out"))
    assert vertices == {"Read text -> Select -> Partial aggregate": 2, "Final aggregate -> Write CSV": 1}
    assert counted(tmp_path / "out") == expected
    assert len(list((tmp_path / "out").glob("*.csv"))) == 1


@pytest.mark.parametrize(
    ("config", "pinned"),
    [
        ({"execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "1 kb"}, False),
        ({"execution.batch.adaptive.auto-parallelism.enabled": "false"}, False),
        ({}, True),
    ],
    ids=["more subtasks for less data each", "disabled", "set_parallelism"],
)
def test_the_options_and_set_parallelism_keep_two_subtasks_each_key_counted_once(
    minicluster: MiniCluster, text: tuple[Path, Counter], tmp_path: Path, config: dict[str, Any], pinned: bool
) -> None:
    text_dir, expected = text
    vertices = run(minicluster, word_count(text_dir, tmp_path / "out", config, pinned))
    assert vertices["Final aggregate -> Write CSV"] == 2
    assert counted(tmp_path / "out") == expected  # each word in one subtask's output only


def test_a_global_order_decided_to_one_subtask_stays_in_order(
    minicluster: MiniCluster, text: tuple[Path, Counter], tmp_path: Path
) -> None:
    text_dir, expected = text
    pipeline = Pipeline("adaptive order", parallelism=2)
    words = pipeline.read_text(str(text_dir / "*.txt")).select("explode(split(value, ' ')) AS word")
    words.key_by("word").agg("count(*) AS n").order_by("n DESC", "word").write_csv(str(tmp_path / "out"))
    vertices = run(minicluster, pipeline)
    assert sorted(vertices.values()) == [1, 1, 2]  # the final aggregate and the sort decided
    (part,) = sorted((tmp_path / "out").glob("*.csv"))
    header, *lines = part.read_text().splitlines()
    rows = [(word, int(n)) for word, n in (line.rsplit(",", 1) for line in lines)]
    assert rows == sorted(expected.items(), key=lambda item: (-item[1], item[0]))


def held_count(text_dir: Path, out: Path, config: dict[str, Any] | None = None) -> Pipeline:
    """The word count, then a vertex held by wait_for_release: a savepoint can come after
    the final aggregate finished."""
    pipeline = Pipeline("adaptive then held", parallelism=2, config=config or {})
    words = pipeline.read_text(str(text_dir / "*.txt"), split_size=1).select("explode(split(value, ' ')) AS word")
    counts = words.key_by("word").agg("count(*) AS n").rebalance()
    counts.transform("tests.helpers.transforms:wait_for_release").write_csv(str(out), mode="overwrite")
    return pipeline


def test_a_job_resumed_from_a_savepoint_keeps_the_parallelism_it_had_decided(
    minicluster: MiniCluster, text: tuple[Path, Counter], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final aggregate finished as one subtask reading both subpartitions; the job
    resumed with the decision switched off must not run a second subtask over half of them
    again (its words would be counted twice)."""
    text_dir, expected = text
    monkeypatch.setenv("FLINK_RUNTIME_TEST_MARKERS", str(tmp_path / "markers"))
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(held_count(text_dir, tmp_path / "out").job_graph())

        def final_vertex() -> dict[str, Any]:
            vertices = client.details(job_id)["vertices"]
            return next(vertex for vertex in vertices if vertex["name"].startswith("Final aggregate"))

        eventually(lambda: final_vertex()["status"] == "FINISHED", 120, "the final aggregate finished")
        assert final_vertex()["parallelism"] == 1
        location = client.savepoint(job_id, target_directory=str(tmp_path / "savepoints"), cancel_job=True, timeout=60)
        assert client.wait(job_id, timeout=60).value == "CANCELED"

        (tmp_path / "markers").mkdir()
        (tmp_path / "markers" / "release").touch()
        off = {"execution.batch.adaptive.auto-parallelism.enabled": "false"}
        resumed = client.submit(held_count(text_dir, tmp_path / "out", off).job_graph(), savepoint_path=location)
        assert client.wait(resumed, timeout=120).value == "FINISHED", client.exceptions(resumed)
        parallelism = {vertex["name"]: vertex["parallelism"] for vertex in client.details(resumed)["vertices"]}
    assert parallelism["Final aggregate"] == 1  # as recorded, though the job switched the decision off
    assert parallelism["Rebalance -> Transform -> Write CSV"] == 2  # decided now: the option is off
    assert counted(tmp_path / "out") == expected


def test_keyed_state_resumes_in_the_subtasks_that_wrote_it(minicluster: MiniCluster, tmp_path: Path) -> None:
    """A stop-with-savepoint keeps the final aggregate's keyed state, written by the
    subtasks of its decided parallelism (one here): the resumed job, whose input would
    call for two, runs it as one again, or the restored totals of half the words would be
    counted apart from their new counts."""
    from tests.integration.test_savepoints import counts_in, wait_for_splits, wait_running, write_corpus

    expected = write_corpus(tmp_path / "in", files=12)

    def word_count(config: dict[str, str]) -> Pipeline:
        pipeline = Pipeline("resumed keyed state", parallelism=2, config=config)
        source = pipeline.read_text(str(tmp_path / "in" / "*.txt"), split_size=1)
        words = source.transform("tests.helpers.transforms:slow").select("explode(split(value, ' ')) AS word")
        words.key_by("word").agg("count(*) AS n").write_parquet(str(tmp_path / "out"), mode="overwrite")
        return pipeline

    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(word_count({}).job_graph())
        wait_running(client, job_id)
        wait_for_splits(minicluster.rest_url, job_id, 2)
        location = client.stop(job_id, target_directory=str(tmp_path / "savepoints"), timeout=120)
        first = {vertex["name"]: vertex["parallelism"] for vertex in client.details(job_id)["vertices"]}
        assert first["Final aggregate -> Write Parquet"] == 1
        assert sum(counts_in(tmp_path / "out").values()) < sum(expected.values())

        two = {"execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "1 b"}
        resumed = client.submit(word_count(two).job_graph(), savepoint_path=location)
        assert client.wait(resumed, timeout=120).value == "FINISHED", client.exceptions(resumed)
        second = {vertex["name"]: vertex["parallelism"] for vertex in client.details(resumed)["vertices"]}
    assert second["Final aggregate -> Write Parquet"] == 1
    assert counts_in(tmp_path / "out") == dict(expected)
