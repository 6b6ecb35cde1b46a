"""SubmitJobOperator(resume_failed=True): a retry after a FAILED job resumes it from its
latest checkpoint, on the session MiniCluster with PySpark tasks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.airflow.exceptions import FlinkRuntimeJobFailed
from flink_runtime.airflow.job_ids import deterministic_job_id
from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator
from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from tests.helpers.waiting import eventually
from tests.integration.test_checkpoint_retention import POISON_ENV, copy_lines, output_lines, write_lines
from tests.integration.test_savepoints import input_splits

pytestmark = pytest.mark.integration

Context = dict[str, Any]


def job_of_try(try_number: int, run_id: str) -> str:
    return deterministic_job_id("dag", "task", run_id, -1, try_number)


def submit_operator(conn_id: str, tmp_path: Path, **kwargs: Any) -> SubmitJobOperator:
    def graph(context: Context) -> Any:
        job_graph = copy_lines(tmp_path).job_graph()
        # Checkpoints often enough for a short test; the operator adds the retention.
        job_graph.config.update(
            {
                "execution.checkpointing.interval": "200 ms",
                "state.checkpoints.dir": str(tmp_path / "chk"),
                "restart-strategy.type": "none",
            }
        )
        return job_graph

    return SubmitJobOperator(task_id="task", job_graph=graph, flink_runtime_conn_id=conn_id, poll_timeout=2, **kwargs)


def test_a_retry_resumes_the_failed_job_from_its_checkpoint_and_reads_only_what_is_left(
    minicluster: MiniCluster,
    minicluster_conn_id: str,
    task_context: Callable[..., Context],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture,
) -> None:
    run_id = f"manual__{tmp_path.name}"  # job ids differ from every other test's

    def job_of(try_number: int) -> str:
        return job_of_try(try_number, run_id)

    expected = write_lines(tmp_path / "in")
    poison = tmp_path / "poison"
    poison.touch()
    monkeypatch.setenv(POISON_ENV, str(poison))
    operator = submit_operator(minicluster_conn_id, tmp_path, resume_failed=True)

    with pytest.raises(FlinkRuntimeJobFailed, match="poisoned split"):
        operator.execute(task_context(try_number=1, run_id=run_id))
    with JobClient(minicluster.rest_url) as client:
        checkpoint = client.checkpoints(job_of(1))["latest"]["completed"]
    assert checkpoint is not None and not checkpoint.get("discarded"), "the failed job kept its checkpoint"
    read_before = len(
        json.loads(Path(checkpoint["external_path"], "_metadata").read_text())["vertices"]["read-text-1"][
            "completed_files"
        ]
    )
    assert 0 < read_before < 8

    poison.unlink()  # what the failure was about is fixed; the task is retried
    capfd.readouterr()
    result = submit_operator(minicluster_conn_id, tmp_path, resume_failed=True).execute(
        task_context(try_number=2, run_id=run_id)
    )

    assert result["job_id"] == job_of(2) and result["state"] == "FINISHED"
    assert output_lines(tmp_path / "out") == expected  # every line once
    splits = input_splits(minicluster.rest_url, job_of(2))
    assert splits["total"] == 8 - read_before  # only the files the failed job had not read
    logged = capfd.readouterr()  # the operator logs through Airflow's structlog, to the console here
    resumed = [line for line in (logged.out + logged.err).splitlines() if "Resuming job" in line]
    assert resumed and job_of(1) in resumed[0] and checkpoint["external_path"] in resumed[0], resumed
    assert "got as far as" in resumed[0]
    # The repair claimed the failed try's checkpoint: once it FINISHED the cluster deleted
    # it (it would otherwise stay forever), and kept nothing of its own either.
    kept = Path(checkpoint["external_path"])
    eventually(lambda: not kept.exists(), 30, f"the failed try's checkpoint {kept} to be deleted")
    assert not (tmp_path / "chk" / job_of(2)).exists()


def test_without_resume_failed_a_retry_starts_over(
    minicluster: MiniCluster,
    minicluster_conn_id: str,
    task_context: Callable[..., Context],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_id = f"manual__{tmp_path.name}"

    def job_of(try_number: int) -> str:
        return job_of_try(try_number, run_id)

    write_lines(tmp_path / "in")
    poison = tmp_path / "poison"
    poison.touch()
    monkeypatch.setenv(POISON_ENV, str(poison))
    with pytest.raises(FlinkRuntimeJobFailed):
        submit_operator(minicluster_conn_id, tmp_path).execute(task_context(try_number=1, run_id=run_id))
    with JobClient(minicluster.rest_url) as client:
        # Flink's default retention: a failed job's checkpoints are deleted (just after it ended).
        eventually(lambda: client.checkpoints(job_of(1))["latest"]["completed"]["discarded"] is True)
    poison.unlink()
    result = submit_operator(minicluster_conn_id, tmp_path).execute(task_context(try_number=2, run_id=run_id))
    assert result["state"] == "FINISHED"
    assert input_splits(minicluster.rest_url, job_of(2))["total"] == 8
