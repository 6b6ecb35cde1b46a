"""Which partitions a continuous job's new round releases (jobmanager/rounds.py)."""

from __future__ import annotations

from flink_runtime.io.partitions import partition_dir, validate_namespace
from flink_runtime.jobmanager.rounds import namespace_released_by_new_round

JOB = "0123456789abcdef0123456789abcdef"


def test_the_first_rounds_directory_holds_every_later_round_so_it_is_kept() -> None:
    """Later rounds' directories lie inside the first round's (`<job>/round-1` under `<job>`):
    releasing `<job>` when round 1 starts would delete them under the round's first tasks,
    failing the job."""
    later = partition_dir("/data", f"{JOB}/round-1", "result", 0)
    assert later.startswith(f"/data/{JOB}/")  # inside the first round's directory
    assert namespace_released_by_new_round(JOB, JOB) is None


def test_a_later_round_releases_its_predecessor() -> None:
    assert namespace_released_by_new_round(f"{JOB}/round-1", JOB) == f"{JOB}/round-1"
    run = f"{JOB}/run-0badcafe"
    assert namespace_released_by_new_round(f"{run}/round-2", run) == f"{run}/round-2"


def test_a_recovered_runs_later_rounds_are_inside_its_directory_so_it_is_kept() -> None:
    """A recovered run numbers its rounds from 1 again: inside its own directory they never
    meet the rounds of the run before it (whose staged output a crash may have left)."""
    run = f"{JOB}/run-0badcafe"
    validate_namespace(f"{run}/round-1")
    assert namespace_released_by_new_round(run, run) is None
