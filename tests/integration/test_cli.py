"""The `flink-runtime` CLI, run in-process through `main([...])` against the MiniCluster."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime.client import JobClient, cli
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster
from tests.helpers.jobs import modulo_sum_job
from tests.helpers.jobs import sleep_job as sleep_job_of

pytestmark = pytest.mark.integration


@pytest.fixture
def rest(minicluster: MiniCluster) -> str:
    return minicluster.rest_url


@pytest.fixture
def client(rest: str) -> Iterator[JobClient]:
    with JobClient(rest, timeout=10) as job_client:
        yield job_client


def write(path: Path, graph: JobGraph) -> Path:
    path.write_bytes(graph.to_json())
    return path


def sum_job(out: Path) -> JobGraph:
    return modulo_sum_job(out, count=300, name="cli sum")


def sleep_job(seconds: float = 30.0) -> JobGraph:
    return sleep_job_of(seconds, name="cli sleeper")


def assert_clean_error(err: str) -> None:
    assert "error:" in err
    assert "Traceback" not in err


def test_run_attached_finishes(rest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job_file = write(tmp_path / "job.json", sum_job(tmp_path / "out"))
    assert cli.main(["run", "-m", rest, str(job_file)]) == 0
    out = capsys.readouterr().out
    assert "Job has been submitted with JobID" in out
    assert "switched from CREATED to RUNNING" in out
    assert "FINISHED" in out.splitlines()[-1] and "5/5 tasks finished" in out
    assert list((tmp_path / "out").glob("part-*.json"))

    # info shows what each vertex read and wrote.
    job_id = out.split("Job has been submitted with JobID", 1)[1].split()[0]
    assert cli.main(["info", "-m", rest, job_id]) == 0
    numbers = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Numbers"))
    assert "0 / 300" in numbers and "KiB" in numbers  # a source reads no records, as in Flink


def test_run_a_failing_job_exits_1_with_the_root_exception(
    rest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = JobGraph(
        name="boom",
        vertices=[JobVertex(id="f", name="Fail", invokable="fail", config={"message": "kaboom [b]99"})],
    )
    assert cli.main(["run", "-m", rest, str(write(tmp_path / "fail.json", graph))]) == 1
    captured = capsys.readouterr()
    assert "FAILED" in captured.out
    # Printed verbatim: the brackets are data, not rich markup.
    assert "Root exception" in captured.err and "RuntimeError: kaboom [b]99" in captured.err


def test_run_detached_prints_only_the_job_id(
    rest: str, client: JobClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = "d" * 32
    job_file = write(
        tmp_path / "noop.json",
        JobGraph(name="noop", vertices=[JobVertex(id="n", name="N", invokable="noop")]),
    )
    assert cli.main(["run", "-d", "-m", rest, "--job-id", job_id, str(job_file)]) == 0
    assert capsys.readouterr().out == f"{job_id}\n"
    assert client.wait(job_id, timeout=10) is JobStatus.FINISHED


def test_list_info_and_cancel(rest: str, client: JobClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job_file = write(tmp_path / "sleep.json", sleep_job())
    assert cli.main(["run", "-d", "-m", rest, str(job_file)]) == 0
    job_id = capsys.readouterr().out.strip()

    assert cli.main(["list", "-m", rest]) == 0
    listing = capsys.readouterr().out
    assert job_id in listing and "cli sleeper" in listing and "RUNNING" in listing
    assert cli.main(["list", "-r", "-m", rest, "--json"]) == 0
    assert job_id in [job["jid"] for job in json.loads(capsys.readouterr().out)["jobs"]]

    assert cli.main(["info", "-m", rest, job_id]) == 0
    info = capsys.readouterr().out
    assert "RUNNING" in info and "Sleep" in info and "zzz" in info
    assert cli.main(["info", "--json", "-m", rest, job_id]) == 0
    assert json.loads(capsys.readouterr().out)["jid"] == job_id

    assert cli.main(["cancel", "-m", rest, job_id]) == 0
    assert capsys.readouterr().out.strip() == f"Cancelled job {job_id}."
    assert client.wait(job_id, timeout=10) is JobStatus.CANCELED

    # Finished jobs show with -a only.
    assert cli.main(["list", "-m", rest]) == 0
    assert job_id not in capsys.readouterr().out
    assert cli.main(["list", "-a", "-m", rest]) == 0
    assert job_id in capsys.readouterr().out

    # Cancelling again: the JobManager's reason, exit 1.
    # Cancelling a CANCELED job again is acknowledged, as Flink's CLI sees it.
    assert cli.main(["cancel", "-m", rest, job_id]) == 0
    assert capsys.readouterr().out.strip() == f"Cancelled job {job_id}."


def test_info_shows_the_root_exception_of_a_failed_job(
    rest: str, client: JobClient, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = JobGraph(
        name="boom", vertices=[JobVertex(id="f", name="Fail", invokable="fail", config={"message": "oops 5"})]
    )
    job_id = client.submit(graph)
    client.wait(job_id, timeout=10)
    assert cli.main(["info", "-m", rest, job_id]) == 0
    out = capsys.readouterr().out
    assert "FAILED" in out and "Root exception" in out and "oops 5" in out


def test_address_default_comes_from_the_configuration(
    minicluster: MiniCluster, client: JobClient, capsys: pytest.CaptureFixture[str]
) -> None:
    port = minicluster.rest_url.rsplit(":", 1)[1]
    assert cli.main(["list", "-a", "-D", "rest.address=127.0.0.1", "-D", f"rest.port={port}"]) == 0
    assert "JOB ID" in capsys.readouterr().out


def test_ctrl_c_detaches_and_says_how_to_cancel(
    rest: str,
    client: JobClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(JobClient, "poll_events", interrupted)
    assert cli.main(["run", "-m", rest, str(write(tmp_path / "sleep.json", sleep_job()))]) == 130
    captured = capsys.readouterr()
    job_id = captured.out.split("JobID ")[1].split()[0]
    assert f"flink-runtime cancel -m {rest} {job_id}" in captured.err
    monkeypatch.undo()
    assert client.status(job_id) is JobStatus.RUNNING  # detached, not cancelled
    client.cancel(job_id)
    client.wait(job_id, timeout=10)


# -- failures: one line, no traceback ---------------------------------------------------------------


def test_missing_file(rest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "-m", rest, str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert_clean_error(err)
    assert "nope.json" in err and "does not exist" in err


def test_file_that_is_not_json(rest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("name: not json")
    assert cli.main(["run", "-m", rest, str(bad)]) == 2
    err = capsys.readouterr().err
    assert_clean_error(err)
    assert "bad.json" in err and "not valid JSON" in err


def test_invalid_job_graph_prints_the_servers_errors(
    rest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "invalid.json"
    bad.write_text(json.dumps({"name": "x", "vertices": [{"id": "wrong-one", "name": "W", "invokable": "nope"}]}))
    assert cli.main(["run", "-m", rest, str(bad)]) == 1
    err = capsys.readouterr().err
    assert_clean_error(err)
    assert "wrong-one" in err and "unknown invokable" in err


def test_unknown_job(rest: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info", "-m", rest, "a" * 32]) == 1
    err = capsys.readouterr().err
    assert_clean_error(err)
    assert "not found" in err


def test_unreachable_cluster(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the retries' back-off: their policy is covered by the unit tests.
    monkeypatch.setattr(cli, "JobClient", functools.partial(JobClient, retries=1, backoff=0.0))
    assert cli.main(["list", "-m", "http://127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert_clean_error(err)
    assert "http://127.0.0.1:1" in err and "-m host:port" in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], "required"),
        (["run"], "FILE.json"),
        (["list", "-a", "-r"], "not allowed with"),
        (["minicluster", "-n", "0"], "positive integer"),
        (["run", "-D", "no-equals-sign", "x.json"], "key=value"),
        (["list", "-m", "ftp://host:1"], "invalid REST address"),
        (["list", "-c", "/no/such/config.yaml"], "config.yaml"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert_clean_error(err)
    assert expected in err


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "minicluster" in capsys.readouterr().out
    assert cli.main(["--version"]) == 0
    assert "flink-runtime" in capsys.readouterr().out


def test_the_example_job_in_the_readme_runs(minicluster, capsys) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "modulo-sum.json"
    assert cli.main(["run", "-m", minicluster.rest_url, str(example)]) == 0
    assert "FINISHED" in capsys.readouterr().out
