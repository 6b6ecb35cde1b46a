"""A continuous job's sink knows it published rounds (operators/spark/io.py): a run of
the job recovered after a JobManager restart adds to them instead of refusing the path
(mode 'error') or replacing them (mode 'overwrite')."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_runtime.operators.spark import io

JOB = "0123456789abcdef0123456789abcdef"


def stage(sink: dict, namespace: str, chunk: str, name: str) -> None:
    staged = Path(io.sink_staging_root(sink, namespace)) / chunk
    staged.mkdir(parents=True)
    (staged / name).write_text(name)


def published(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if not p.name.startswith("_"))


def test_rounds_leave_a_marker_until_the_jobs_end_is_stored(tmp_path: Path) -> None:
    sink = {"path": str(tmp_path / "out"), "format": "json", "mode": "error"}
    assert not io.published_before(sink, JOB)
    stage(sink, JOB, "split-0", "a.json")
    assert io.publish_sink(sink, JOB, more_rounds=True) == 1
    # A recovered run (its own namespace) sees the job's rounds: the path is its own output.
    assert io.published_before(sink, f"{JOB}/run-0badcafe")
    with pytest.raises(ValueError, match="already exists"):
        io.check_sink_target(sink)
    stage(sink, f"{JOB}/run-0badcafe/round-1", "split-0", "b.json")
    assert io.publish_sink(sink, f"{JOB}/run-0badcafe/round-1", continuation=True, more_rounds=True) == 1
    assert published(tmp_path / "out") == ["split-0-a.json", "split-0-b.json"]
    # Stopped: a JobManager dying before the job's FINISHED is stored leaves a run that
    # must still know; once it is stored, nothing staged is left, marker included.
    assert io.published_before(sink, JOB)
    io.forget_published_rounds(sink, f"{JOB}/run-0badcafe/round-1")
    assert not io.published_before(sink, JOB)
    assert not (tmp_path / "out" / "_flink_staging").exists()


def test_a_job_ending_otherwise_removes_the_marker(tmp_path: Path) -> None:
    sink = {"path": str(tmp_path / "out"), "format": "json", "mode": "append"}
    stage(sink, JOB, "split-0", "a.json")
    io.publish_sink(sink, JOB, more_rounds=True)
    io.discard_sink_staging(sink, f"{JOB}/round-1")  # cancelled in its next round
    assert not io.published_before(sink, JOB)
    assert not (tmp_path / "out" / "_flink_staging").exists()
