"""Externalized checkpoint retention at a job's end, and resuming a FAILED job from its
latest retained checkpoint, on the session MiniCluster with PySpark tasks."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers.jobs import sleep_job
from tests.helpers.waiting import eventually
from tests.integration.test_savepoints import input_splits, wait_running

pytestmark = pytest.mark.integration

RETENTION = "execution.checkpointing.externalized-checkpoint-retention"
POISON_ENV = "FLINK_RUNTIME_TEST_POISON"  # a file: while it exists, file 05's split fails


def fail_on_poisoned_split(df: Any) -> Any:
    """0.15 s per split; the split of file 05 fails while the poison file exists
    (the JobManager's plan check calls this on empty input, which passes)."""
    if df.isEmpty():
        return df
    time.sleep(0.15)
    poison = os.environ.get(POISON_ENV)
    if poison and Path(poison).exists() and not df.filter(df.value.startswith("f05 ")).isEmpty():
        raise RuntimeError("poisoned split: file 05")
    return df


def write_lines(directory: Path, files: int = 8, lines: int = 20) -> list[str]:
    directory.mkdir()
    every = []
    for f in range(files):
        content = [f"f{f:02d} line {n:02d}" for n in range(lines)]
        (directory / f"{f:02d}.txt").write_text("\n".join(content) + "\n")
        every += content
    return sorted(every)


def copy_lines(tmp_path: Path) -> Pipeline:
    pipeline = Pipeline("copy with a poisoned split", parallelism=2)
    (
        pipeline.read_text(str(tmp_path / "in" / "*.txt"), split_size=1)
        .transform("tests.integration.test_checkpoint_retention:fail_on_poisoned_split")
        .write_json(str(tmp_path / "out"), mode="overwrite")
    )
    return pipeline


def output_lines(out: Path) -> list[str]:
    return sorted(json.loads(line)["value"] for part in out.glob("*.json") for line in part.read_text().splitlines())


def test_a_failed_job_keeps_its_checkpoint_and_resumes_from_it_exactly_once(
    minicluster: MiniCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="flink_runtime")
    expected = write_lines(tmp_path / "in")
    poison = tmp_path / "poison"
    poison.touch()
    monkeypatch.setenv(POISON_ENV, str(poison))
    graph = copy_lines(tmp_path).job_graph()
    graph.config.update(
        {
            "execution.checkpointing.interval": "200 ms",
            "state.checkpoints.dir": str(tmp_path / "chk"),
            RETENTION: "DELETE_ON_CANCELLATION",
            "restart-strategy.type": "none",
        }
    )
    rest = minicluster.rest_url
    with JobClient(rest) as client:
        failed = client.submit(graph)
        assert client.wait(failed, timeout=120).value == "FAILED"
        latest = client.checkpoints(failed)["latest"]["completed"]
        location = latest["external_path"]
        read_before = len(
            json.loads(Path(location, "_metadata").read_text())["vertices"]["read-text-1"]["completed_files"]
        )
        assert 0 < read_before < 8, "the checkpoint should record some of the splits"
        config = httpx.get(f"{rest}/jobs/{failed}/checkpoints/config").json()
        assert config["externalization"] == {"enabled": True, "delete_on_cancellation": True}

        # Resubmitted at once (its end may still be copying), from its _metadata file, as
        # Flink's `run -s` takes either; file 05 is fine now.
        poison.unlink()
        resumed = client.submit(copy_lines(tmp_path).job_graph(), savepoint_path=f"{location}/_metadata")
        assert client.wait(resumed, timeout=120).value == "FINISHED"
        splits = input_splits(rest, resumed)
        restored = client.checkpoints(resumed)["latest"]["restored"]

    assert output_lines(tmp_path / "out") == expected  # every line once: none lost, none twice
    assert splits["total"] == splits["completed"] == 8 - read_before
    assert restored["external_path"] == f"{location}/_metadata" and restored["is_savepoint"] is False
    # The failed job's checkpoint stands alone (its data copied in), its keyed-state and
    # partition folders are gone; the resumed job (FINISHED) left no checkpoint folder.
    assert sorted(p.name for p in (tmp_path / "chk" / failed).iterdir()) == [Path(location).name]
    stored = json.loads(Path(location, "_metadata").read_text())["vertices"]["read-text-1"]
    assert len(stored["sink_chunks"]) == read_before
    assert all(chunk.startswith("sinks/") and Path(location, chunk).is_dir() for chunk in stored["sink_chunks"])
    data_dir = Path(minicluster.config.raw("io.tmp.dirs"))
    eventually(lambda: not (data_dir / failed).exists() and not (tmp_path / "chk" / resumed).exists())
    messages = [record.getMessage() for record in caplog.records]
    assert any(f"restored from checkpoint {latest['id']} of job {failed}" in m for m in messages)
    assert any(f"{read_before} of 8 input files already read" in m for m in messages)
    assert any("kept checkpoint" in m and location in m for m in messages)


@pytest.mark.parametrize(
    ("retention", "kept"),
    [("NO_EXTERNALIZED_CHECKPOINTS", False), ("DELETE_ON_CANCELLATION", False), ("RETAIN_ON_CANCELLATION", True)],
)
def test_a_cancelled_job_keeps_its_checkpoint_only_with_retain_on_cancellation(
    minicluster: MiniCluster, tmp_path: Path, retention: str, kept: bool
) -> None:
    graph = sleep_job(30.0, name=f"cancelled with {retention}")
    graph.config.update({"state.checkpoints.dir": str(tmp_path / "chk"), RETENTION: retention.lower()})
    rest = minicluster.rest_url
    with JobClient(rest) as client:
        job_id = client.submit(graph)
        wait_running(client, job_id)
        request = httpx.post(f"{rest}/jobs/{job_id}/checkpoints", json={}).json()["request-id"]
        eventually(
            lambda: httpx.get(f"{rest}/jobs/{job_id}/checkpoints/{request}").json()["status"]["id"] == "COMPLETED"
        )
        savepoint = client.savepoint(job_id, str(tmp_path / "chk" / job_id), timeout=30)
        client.cancel(job_id)
        assert client.wait(job_id, timeout=30).value == "CANCELED"
        location = client.checkpoints(job_id)["latest"]["completed"]["external_path"]
        if kept:
            eventually(lambda: (Path(location) / "_metadata").exists())
            time.sleep(0.3)  # the cleanup is done by now: still there
            assert (Path(location) / "_metadata").exists()
        else:
            eventually(lambda: not Path(location).exists())
            eventually(lambda: client.checkpoints(job_id)["latest"]["completed"]["discarded"] is True)
        config = httpx.get(f"{rest}/jobs/{job_id}/checkpoints/config").json()["externalization"]
    # A savepoint is never removed, even inside the job's checkpoint folder.
    assert (Path(savepoint) / "_metadata").exists()
    assert config == {
        "enabled": retention != "NO_EXTERNALIZED_CHECKPOINTS",
        "delete_on_cancellation": retention != "RETAIN_ON_CANCELLATION",
    }


def test_an_unknown_retention_is_refused_at_submit(minicluster: MiniCluster) -> None:
    graph = sleep_job(1.0, name="bad retention")
    graph.config[RETENTION] = "KEEP_FOREVER"
    answer = httpx.post(
        f"{minicluster.rest_url}/jobs", content=graph.to_json(), headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 400
    assert RETENTION in answer.text and "RETAIN_ON_CANCELLATION" in answer.text
