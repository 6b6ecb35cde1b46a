"""security.allowed-directories against symbolic links.

A real MiniCluster whose allowed directory is configured through a link (as /tmp is a
link on some systems), real files and links in temporary folders, jobs submitted and
watched over HTTP. Its TaskManagers' own lists are emptied after start: what they enforce
comes from the JobManager with each task, as for a standalone TaskManager whose
configuration lacks the key. Refusals at submit cost no Spark; the two jobs that make
a link while they run do.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from flink_runtime.jobgraph import JobGraph
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.conftest import fast_config
from tests.helpers.jobs import sleep_job
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.integration


@dataclass
class Confined:
    rest_url: str
    allowed: Path  # the real folder (the configuration names it through a link)
    outside: Path
    _cases: Iterator[int]

    def case(self) -> tuple[Path, Path]:
        """A new folder inside the allowed directory and one outside it."""
        number = next(self._cases)
        inside, outside = self.allowed / f"case-{number}", self.outside / f"case-{number}"
        inside.mkdir()
        outside.mkdir()
        return inside, outside


@pytest.fixture(scope="module")
def confined(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Confined]:
    root = tmp_path_factory.mktemp("confined")
    allowed, outside = root / "allowed", root / "outside"
    allowed.mkdir()
    outside.mkdir()
    (root / "allowed-link").symlink_to(allowed)
    config = fast_config(
        **{"io.tmp.dirs": str(root / "data"), "security.allowed-directories": str(root / "allowed-link")}
    )
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as cluster:
        for taskmanager in cluster.taskmanagers:
            taskmanager.allowed_directories = []
        yield Confined(cluster.rest_url, allowed, outside, itertools.count())


def submit(confined: Confined, graph: JobGraph) -> httpx.Response:
    return httpx.post(
        f"{confined.rest_url}/jobs",
        content=graph.to_json(),
        headers={"Content-Type": "application/json"},
        timeout=180,
    )


def errors(answer: httpx.Response) -> str:
    assert answer.status_code == 400, answer.text
    return " ".join(answer.json()["errors"])


def files_under(directory: Path) -> list[Path]:
    return [Path(root) / name for root, _, names in os.walk(directory) for name in names]


def test_a_source_through_a_link_to_etc_is_refused_at_submit(confined: Confined) -> None:
    case, _ = confined.case()
    (case / "link_etc").symlink_to("/etc")
    pipeline = Pipeline("read passwd")
    pipeline.read_text(str(case / "link_etc" / "passwd")).write_json(str(case / "out"), mode="overwrite")
    graph = pipeline.job_graph()
    problem = errors(submit(confined, graph))
    assert f"vertex '{graph.vertices[0].id}'" in problem and "resolves to '/etc/passwd'" in problem, problem
    assert not (case / "out").exists()


@pytest.mark.parametrize("named_as", ["glob", "directory"])
def test_a_listed_file_that_links_out_is_refused_at_submit(confined: Confined, named_as: str) -> None:
    """The path named passes (it lies inside); one file the planner lists links out."""
    case, outside = confined.case()
    (outside / "secret.txt").write_text("SECRET\n")
    (case / "in").mkdir()
    (case / "in" / "a.txt").write_text("fine\n")
    (case / "in" / "b.txt").symlink_to(outside / "secret.txt")
    (case / "in" / "passwd.txt").symlink_to("/etc/passwd")
    pipeline = Pipeline("read through links")
    path = str(case / "in" / "*.txt") if named_as == "glob" else str(case / "in")
    pipeline.read_text(path).write_json(str(case / "out"), mode="overwrite")
    graph = pipeline.job_graph()
    problem = errors(submit(confined, graph))
    assert f"vertex '{graph.vertices[0].id}'" in problem, problem
    assert f"'{case}/in/b.txt' resolves to '{outside}/secret.txt'" in problem, problem
    assert not (case / "out").exists()


def test_a_sink_through_a_linked_folder_is_refused_at_submit(confined: Confined) -> None:
    case, outside = confined.case()
    (case / "in.txt").write_text("row\n")
    (case / "link_out").symlink_to(outside)
    pipeline = Pipeline("write through a link")
    pipeline.read_text(str(case / "in.txt")).write_json(str(case / "link_out" / "result"), mode="overwrite")
    graph = pipeline.job_graph()
    problem = errors(submit(confined, graph))
    assert f"vertex '{graph.vertices[-1].id}': config sink.path" in problem, problem
    assert f"resolves to '{outside}/result'" in problem, problem
    assert files_under(outside) == []


def run_until_failed(confined: Confined, graph: JobGraph) -> str:
    """Submit (accepted), wait for FAILED, return the root exception's text."""
    answer = submit(confined, graph)
    assert answer.status_code in (200, 202), answer.text
    job_id = answer.json()["jobid"]

    def state() -> str:
        return httpx.get(f"{confined.rest_url}/jobs/{job_id}", timeout=10).json()["state"]

    eventually(lambda: state() in ("FAILED", "FINISHED", "CANCELED"), timeout=180, what="the job to end")
    assert state() == "FAILED"
    return httpx.get(f"{confined.rest_url}/jobs/{job_id}/exceptions", timeout=10).json()["root-exception"]


def test_a_sink_folder_that_becomes_a_link_out_while_the_job_runs_fails_the_task(
    confined: Confined, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's transform replaces its (accepted) sink folder by a link out before the
    task writes: the TaskManager refuses to write, the job fails naming the path, and
    nothing lands outside."""
    case, outside = confined.case()
    (case / "in.txt").write_text("hello\n")
    (case / "links").write_text(f"{case / 'out'}\t{outside}\n")
    monkeypatch.setenv("FLINK_RUNTIME_TEST_MARKERS", str(case))
    pipeline = Pipeline("sink redirected", parallelism=1)
    source = pipeline.read_text(str(case / "in.txt")).transform("tests.helpers.transforms:make_links")
    source.write_json(str(case / "out"), mode="overwrite")
    reason = run_until_failed(confined, pipeline.job_graph())
    assert "PathNotAllowedError: sink:" in reason, reason
    assert f"'{case}/out/_flink_staging/" in reason and f"resolves to '{outside}/_flink_staging/" in reason, reason
    assert (case / "out").is_symlink()  # the job did make its link
    assert files_under(outside) == []


def test_a_later_split_that_becomes_a_link_out_is_not_read(confined: Confined, monkeypatch: pytest.MonkeyPatch) -> None:
    """Splits carry the resolved paths the planner checked; the first split's transform
    replaces the folder of the second by a link out: the TaskManager refuses to read it."""
    case, outside = confined.case()
    # a's file is the larger: the split assigner hands out the largest split first.
    for name, text in (("a", "the first split"), ("b", "second")):
        (case / "in" / name).mkdir(parents=True)
        (case / "in" / name / f"{name}.txt").write_text(f"{text}\n")
    (outside / "secret").mkdir()
    (outside / "secret" / "b.txt").write_text("SECRET\n")
    (case / "links").write_text(f"{case / 'in' / 'b'}\t{outside / 'secret'}\n")
    monkeypatch.setenv("FLINK_RUNTIME_TEST_MARKERS", str(case))
    pipeline = Pipeline("source redirected", parallelism=1)
    source = pipeline.read_text(str(case / "in"), split_size=1).transform("tests.helpers.transforms:make_links")
    source.write_json(str(case / "out"), mode="overwrite")
    reason = run_until_failed(confined, pipeline.job_graph())
    assert "PathNotAllowedError: input split 1:" in reason, reason
    assert f"'{case}/in/b/b.txt' resolves to '{outside}/secret/b.txt'" in reason, reason
    assert (case / "in" / "b").is_symlink()
    written = [path for path in files_under(case) if path.parent != case and "in" not in path.parts]
    assert not any("SECRET" in path.read_text(errors="replace") for path in written)
    assert not (case / "out" / "_SUCCESS").exists()


def test_a_savepoint_target_through_a_link_out_is_refused(confined: Confined) -> None:
    case, outside = confined.case()
    (case / "link_sp").symlink_to(outside)
    answer = submit(confined, sleep_job(60, name="savepoint through a link"))
    job_id = answer.json()["jobid"]
    try:
        answer = httpx.post(
            f"{confined.rest_url}/jobs/{job_id}/savepoints",
            json={"target-directory": str(case / "link_sp" / "sp"), "cancel-job": False},
            timeout=30,
        )
        problem = errors(answer)
        assert f"resolves to '{outside}/sp'" in problem and "security.allowed-directories" in problem, problem
        assert files_under(outside) == []
    finally:
        httpx.patch(f"{confined.rest_url}/jobs/{job_id}", params={"mode": "cancel"}, timeout=30)
