"""Checkpoint statistics (checkpoint/statistics.py) against what Flink 2.3 answered."""

from __future__ import annotations

import pytest

from flink_runtime.checkpoint.statistics import NOT_PERIODIC, CheckpointStatsTracker, checkpoint_config, percentile
from tests.flink_shapes import assert_flink_shape, recorded, shape_problems


def tracker_like_the_recorded_stopped_job() -> CheckpointStatsTracker:
    """Two checkpoints, a savepoint, a failed savepoint, a checkpoint, then a stop's savepoint."""
    tracker = CheckpointStatsTracker()
    for checkpoint_id, (savepoint, terminal, fails) in enumerate(
        [(False, False, False), (False, False, False), (True, False, False), (True, False, True), (False, False, False)]
        + [(True, True, False)],
        start=1,
    ):
        tracker.triggered(checkpoint_id, savepoint, terminal, 1000.0 + checkpoint_id, ["source", "sink"])
        if fails:
            tracker.failed(checkpoint_id, "cannot write a savepoint to /proc/nope")
            continue
        tracker.acknowledged(checkpoint_id, "source")
        tracker.acknowledged(checkpoint_id, "sink")
        tracker.completed(checkpoint_id, f"/chk/chk-{checkpoint_id}", 6451 if not terminal else 3765)
        if checkpoint_id > 1 and not savepoint:
            tracker.discarded([f"/chk/chk-{checkpoint_id - 1}"])
    return tracker


@pytest.mark.parametrize(
    "name", ["job_running_checkpoints", "job_running_checkpoints_after_savepoints", "job_stopped_checkpoints"]
)
def test_statistics_have_flinks_shape(name: str) -> None:
    ours = tracker_like_the_recorded_stopped_job().snapshot()
    assert_flink_shape(ours, name)
    # The history's items of each kind against Flink's item of that kind.
    for flink_item in recorded("job_stopped_checkpoints")["history"]:
        item = next(i for i in ours["history"] if i["className"] == flink_item["className"])
        assert shape_problems(item, flink_item) == []
        assert set(item) == set(flink_item)  # and nothing of the other kinds


def test_counts_latest_and_kinds() -> None:
    stats = tracker_like_the_recorded_stopped_job().snapshot()
    assert stats["counts"] == {"restored": 0, "total": 6, "in_progress": 0, "completed": 5, "failed": 1}
    latest = stats["latest"]
    assert (latest["completed"]["id"], latest["savepoint"]["id"], latest["failed"]["id"]) == (5, 6, 4)
    assert latest["savepoint"]["checkpoint_type"] == "SYNC_SAVEPOINT"
    assert latest["savepoint"]["savepointFormat"] == "CANONICAL" and latest["completed"]["savepointFormat"] is None
    assert latest["failed"]["latest_ack_timestamp"] == -1 and latest["failed"]["failure_message"].endswith("nope")
    by_id = {item["id"]: item for item in stats["history"]}
    assert [by_id[i]["discarded"] for i in (1, 2, 3, 5)] == [True, False, False, False]  # 2 is subsumed by 5
    assert by_id[3]["checkpoint_type"] == "SAVEPOINT" and by_id[1]["checkpoint_type"] == "CHECKPOINT"
    assert all(item["tasks"] == {} for item in stats["history"])  # as Flink: tasks only in the details


def test_in_progress_and_bounded_history_keeps_counts_and_latest() -> None:
    tracker = CheckpointStatsTracker(history_size=2)
    tracker.triggered(1, True, False, 1.0, [])
    tracker.completed(1, "/sp/savepoint-1", 10)
    for checkpoint_id in (2, 3):
        tracker.triggered(checkpoint_id, False, False, 2.0, ["v"])
    stats = tracker.snapshot()
    assert [item["id"] for item in stats["history"]] == [3, 2]
    assert stats["history"][0]["className"] == "in_progress"
    assert stats["counts"] == {"restored": 0, "total": 3, "in_progress": 2, "completed": 1, "failed": 0}
    assert stats["latest"]["savepoint"]["external_path"] == "/sp/savepoint-1"  # out of the history, still latest
    assert tracker.details(1) is not None and tracker.details(99) is None


def test_details_have_flinks_shape_with_tasks_per_vertex() -> None:
    details = tracker_like_the_recorded_stopped_job().details(5)
    assert details is not None
    assert_flink_shape(details, "job_running_checkpoint_details", keyed_by_id=frozenset({"$.tasks"}))
    assert {vertex: task["num_acknowledged_subtasks"] for vertex, task in details["tasks"].items()} == {
        "source": 1,
        "sink": 1,
    }


def test_summary_quantiles_are_flinks() -> None:
    """The recorded running job: end-to-end durations 23 and 100 ms."""
    assert [percentile([23, 100], p) for p in (50, 90, 99.9)] == [61.5, 100.0, 100.0]
    assert percentile([], 50) == 0.0 and percentile([7], 50) == 7.0
    assert percentile(list(range(1, 11)), 25) == 2.75


def test_config_has_flinks_shape() -> None:
    ours = checkpoint_config(2.0, 600.0, "rocksdb")
    assert_flink_shape(ours, "job_running_checkpoints_config")
    assert (ours["interval"], ours["timeout"], ours["state_backend"]) == (2000, 600000, "EmbeddedRocksDBStateBackend")
    assert checkpoint_config(None, 1.0, None)["interval"] == NOT_PERIODIC


def test_details_list_every_vertex_and_count_subtasks_not_running_as_acknowledged() -> None:
    """As Flink's CheckpointCoordinator reports finished tasks: every vertex of the job has
    its entry (Flink's web UI reads tasks[vertex.id] of each), with all its subtasks; those
    not running at the trigger (finished, between a continuous job's rounds) acknowledged."""
    tracker = CheckpointStatsTracker()
    tracker.triggered(1, False, False, 5.0, ["a"], {"a": 2, "b": 3})
    details = tracker.details(1)
    assert details is not None
    counts = {vertex: (t["num_acknowledged_subtasks"], t["num_subtasks"]) for vertex, t in details["tasks"].items()}
    assert counts == {"a": (1, 2), "b": (3, 3)}
    assert (details["num_acknowledged_subtasks"], details["num_subtasks"]) == (4, 5)
    assert details["tasks"]["b"]["latest_ack_timestamp"] == 5000
    tracker.acknowledged(1, "a")
    tracker.completed(1, "/chk/chk-1", 10)
    done = tracker.details(1)
    assert done is not None and (done["num_acknowledged_subtasks"], done["num_subtasks"]) == (5, 5)


def test_subtask_details_say_when_each_subtask_acknowledged() -> None:
    """Flink's TaskCheckpointStatisticsWithSubtaskDetails (what the web UI shows when an
    operator's row of a checkpoint is expanded)."""
    tracker = CheckpointStatsTracker()
    tracker.triggered(1, False, False, 5.0, ["a"], {"a": 3}, subtasks=[2])
    details = tracker.subtask_details(1, "a")
    assert details is not None
    assert [(s["index"], s["status"]) for s in details["subtasks"]] == [
        (0, "completed"),
        (1, "completed"),
        (2, "pending_or_failed"),
    ]
    assert details["subtasks"][0]["ack_timestamp"] == 5000 and details["num_acknowledged_subtasks"] == 2
    tracker.acknowledged(1, "a", 2)
    after = tracker.subtask_details(1, "a")
    assert after is not None and after["subtasks"][2]["status"] == "completed"
    assert set(after["summary"]) >= {"end_to_end_duration", "checkpoint_duration", "alignment", "start_delay"}
    assert tracker.subtask_details(1, "nope") is None and tracker.subtask_details(9, "a") is None
