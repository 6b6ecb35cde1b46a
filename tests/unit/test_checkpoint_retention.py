"""Externalized checkpoint retention (checkpoint/retention.py): Flink's table of what a
job's end keeps, the config key, and the file work on a real local file system."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flink_runtime import configuration as cfg
from flink_runtime.checkpoint.metadata import JobProgress, VertexProgress, read_metadata, write_metadata
from flink_runtime.checkpoint.retention import (
    JobEnd,
    checkpoint_folder,
    clean_up,
    discard_checkpoint,
    externalize,
    retains,
    retention_of,
)
from flink_runtime.checkpoint.statistics import checkpoint_config
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph.job_config import job_config_problems

NO, DELETE, RETAIN = "NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION"
JOB = "ab" * 16


@pytest.mark.parametrize(
    ("retention", "finished", "canceled", "failed"),
    [(NO, False, False, False), (DELETE, False, False, True), (RETAIN, False, True, True)],
)
def test_what_each_end_keeps_is_flinks_table(retention: str, finished: bool, canceled: bool, failed: bool) -> None:
    assert retains(retention, JobStatus.FINISHED) is finished
    assert retains(retention, JobStatus.CANCELED) is canceled
    assert retains(retention, JobStatus.FAILED) is failed


def test_the_key_defaults_to_no_externalized_and_reads_flinks_values_in_any_case() -> None:
    assert retention_of(Configuration()) == NO
    assert retention_of(Configuration({cfg.CHECKPOINT_RETENTION.key: "retain_on_cancellation "})) == RETAIN
    # A job's config wins over the cluster's, as in Flink.
    cluster = Configuration({cfg.CHECKPOINT_RETENTION.key: DELETE})
    assert retention_of(cluster.copy({cfg.CHECKPOINT_RETENTION.key: RETAIN})) == RETAIN


def test_an_unknown_value_names_the_key_and_the_values() -> None:
    with pytest.raises(ConfigurationError) as raised:
        retention_of(Configuration({cfg.CHECKPOINT_RETENTION.key: "KEEP_FOREVER"}))
    message = str(raised.value)
    assert cfg.CHECKPOINT_RETENTION.key in message and "KEEP_FOREVER" in message
    assert all(value in message for value in (NO, DELETE, RETAIN))
    problems = job_config_problems({cfg.CHECKPOINT_RETENTION.key: "yes"}, Configuration())
    assert len(problems) == 1 and DELETE in problems[0] and "config['execution.checkpointing" in problems[0]


@pytest.mark.parametrize(
    ("retention", "enabled", "delete_on_cancellation"), [(NO, False, True), (DELETE, True, True), (RETAIN, True, False)]
)
def test_rest_externalization_is_flinks_reading_of_the_setting(
    retention: str, enabled: bool, delete_on_cancellation: bool
) -> None:
    info = checkpoint_config(1.0, 60.0, None, retention)["externalization"]
    assert info == {"enabled": enabled, "delete_on_cancellation": delete_on_cancellation}


def live_checkpoint(root: Path, checkpoint_id: int = 3) -> Path:
    """A checkpoint as the coordinator writes one: `_metadata` pointing at chunks in the
    data directory, staged sink chunks and a keyed-state snapshot where they lie."""
    chunk = root / "data" / JOB / "result-1" / "0" / "split-4"
    chunk.mkdir(parents=True, exist_ok=True)
    (chunk / "part-0.parquet").write_bytes(b"p" * 100)
    sink = root / "data" / JOB / "sinks" / "v2" / "subtask-0"
    sink.mkdir(parents=True, exist_ok=True)
    (sink / "part-0.json").write_text('{"n": 1}\n')
    state = root / "chk" / JOB / "state" / "attempt-1"
    state.mkdir(parents=True, exist_ok=True)
    (state / "hashmap-state.bin").write_bytes(b"s" * 10)
    vertex = VertexProgress(
        completed_files=["/in/a.txt"],
        partition_chunks={"result-1": {"0": [str(chunk)]}},
        sink_chunks=[str(sink)],
        operator_state={"0": {"kind": "hashmap", "path": str(state)}},
    )
    folder = root / "chk" / JOB / f"chk-{checkpoint_id}"
    progress = JobProgress(job_id=JOB, job_name="j", checkpoint_id=checkpoint_id, timestamp=1.0, vertices={"v": vertex})
    write_metadata(str(folder), progress)
    return folder


def test_externalize_makes_a_checkpoint_stand_alone_and_twice_copies_nothing(tmp_path: Path) -> None:
    folder = live_checkpoint(tmp_path)
    assert externalize(str(folder / "_metadata")) == 100 + 9 + 10
    stored = json.loads((folder / "_metadata").read_text())["vertices"]["v"]
    assert stored["partition_chunks"] == {"result-1": {"0": ["data/result-1/0/split-4"]}}
    assert stored["sink_chunks"] == ["sinks/v/subtask-0"]
    assert stored["operator_state"]["0"]["path"] == "state/v/0"
    # The originals go (the job's end removes them); the checkpoint still reads whole.
    for original in ("data", f"chk/{JOB}/state"):
        shutil.rmtree(tmp_path / original)
    progress = read_metadata(str(folder))
    chunk = Path(progress.vertices["v"].partition_chunks["result-1"]["0"][0])
    assert (chunk / "part-0.parquet").read_bytes() == b"p" * 100
    assert Path(progress.vertices["v"].operator_state["0"]["path"], "hashmap-state.bin").exists()
    assert externalize(str(folder)) == 0


def test_a_failed_job_keeps_its_checkpoint_and_loses_its_keyed_state(tmp_path: Path) -> None:
    folder = live_checkpoint(tmp_path)
    discarded_staging: list[bool] = []
    end = JobEnd(JOB, JobStatus.FAILED, DELETE, str(tmp_path / "chk"), keep=[str(folder)], discard=[])
    report = clean_up(end, lambda: discarded_staging.append(True))
    assert report.kept == [str(folder)] and not report.problems and discarded_staging == [True]
    assert not (tmp_path / "chk" / JOB / "state").exists()
    assert sorted(p.name for p in (tmp_path / "chk" / JOB).iterdir()) == ["chk-3"]
    assert read_metadata(str(folder)).vertices["v"].sink_chunks == [str(folder / "sinks/v/subtask-0")]


def test_a_finished_job_leaves_nothing_but_its_savepoints_and_its_siblings(tmp_path: Path) -> None:
    folder = live_checkpoint(tmp_path)
    sibling = tmp_path / "chk" / ("cd" * 16) / "chk-1"
    sibling.mkdir(parents=True)
    (sibling / "_metadata").write_text("{}")
    end = JobEnd(JOB, JobStatus.FINISHED, RETAIN, str(tmp_path / "chk"), keep=[], discard=[str(folder)])
    report = clean_up(end)
    assert report.discarded == [str(folder)] and not report.problems
    assert not (tmp_path / "chk" / JOB).exists()
    assert (sibling / "_metadata").exists()

    # A savepoint someone wrote into the job's folder stays, and so does the folder.
    folder = live_checkpoint(tmp_path, checkpoint_id=5)
    savepoint = tmp_path / "chk" / JOB / "savepoint-ababab-1"
    savepoint.mkdir()
    (savepoint / "_metadata").write_text("{}")
    clean_up(JobEnd(JOB, JobStatus.CANCELED, DELETE, str(tmp_path / "chk"), keep=[], discard=[str(folder)]))
    assert sorted(p.name for p in (tmp_path / "chk" / JOB).iterdir()) == ["savepoint-ababab-1"]


def test_the_checkpoint_a_job_started_from_is_never_deleted(tmp_path: Path) -> None:
    """A job resubmitted under the same id from its own kept checkpoint."""
    folder = live_checkpoint(tmp_path)
    end = JobEnd(
        JOB, JobStatus.FINISHED, NO, str(tmp_path / "chk"), keep=[], discard=[str(folder)], protected={f"{folder}/"}
    )
    report = clean_up(end)
    assert report.discarded == [] and (folder / "_metadata").exists()


def test_a_checkpoint_that_cannot_be_read_is_reported_not_raised(tmp_path: Path) -> None:
    broken = tmp_path / "chk" / JOB / "chk-9"
    broken.mkdir(parents=True)
    (broken / "_metadata").write_text("{not json")
    report = clean_up(JobEnd(JOB, JobStatus.FAILED, RETAIN, str(tmp_path / "chk"), keep=[str(broken)], discard=[]))
    assert report.not_externalized == [str(broken)] and "corrupt" in report.problems[0]
    assert (broken / "_metadata").exists()  # kept as it is


def test_discard_removes_the_metadata_first_and_is_idempotent(tmp_path: Path) -> None:
    folder = live_checkpoint(tmp_path)
    discard_checkpoint(str(folder / "_metadata"))
    assert not folder.exists()
    discard_checkpoint(str(folder))  # a second time (a retried cleanup): nothing to do, no error
    assert checkpoint_folder(f"{folder}/_metadata") == checkpoint_folder(f"{folder}/") == str(folder)


def claimed_checkpoint(root: Path) -> Path:
    """A self-contained checkpoint of an earlier (failed) job, as a repair claims it."""
    folder = root / "chk" / ("cd" * 16) / "chk-7"
    folder.mkdir(parents=True)
    (folder / "_metadata").write_text("{}")
    return folder


@pytest.mark.parametrize(
    ("status", "keeps_its_own", "claimed_goes"),
    [
        (JobStatus.FINISHED, False, True),  # the repair is done: nothing needs the old one
        (JobStatus.FAILED, True, True),  # a newer, self-contained checkpoint replaces it
        (JobStatus.FAILED, False, False),  # failed before a checkpoint: still the resume point
        (JobStatus.CANCELED, False, False),
    ],
)
def test_a_claimed_snapshot_goes_once_the_job_no_longer_needs_it(
    tmp_path: Path, status: JobStatus, keeps_its_own: bool, claimed_goes: bool
) -> None:
    claimed = claimed_checkpoint(tmp_path)
    own = live_checkpoint(tmp_path)
    end = JobEnd(
        JOB,
        status,
        DELETE,
        str(tmp_path / "chk"),
        keep=[str(own)] if keeps_its_own else [],
        discard=[] if keeps_its_own else [str(own)],
        claimed=str(claimed / "_metadata"),
    )
    report = clean_up(end)
    assert not report.problems
    assert claimed.exists() is not claimed_goes
    assert (str(claimed / "_metadata") in report.discarded) is claimed_goes


def test_the_restore_mode_is_flinks_key_and_values() -> None:
    assert Configuration().get(cfg.SAVEPOINT_RESTORE_MODE) == "NO_CLAIM"
    problems = job_config_problems({cfg.SAVEPOINT_RESTORE_MODE.key: "LEGACY"}, Configuration())
    assert len(problems) == 1 and "CLAIM" in problems[0] and "NO_CLAIM" in problems[0]
