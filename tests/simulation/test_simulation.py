"""The control plane under thousands of seeded fault schedules (tests/simulation/).

Every schedule runs in a spawned process (runner.py): a run patches its process's clocks.

test_schedules runs SIM_SCHEDULES seeds (10,000 by default) over two processes and fails
on any broken invariant except the kinds in KNOWN_BUGS: bugs the simulator found, whose
replayable seeds are pinned below as strict xfails. Fixing one makes its xfail pass
(strict: the test then fails): delete its KNOWN_BUGS entry and the xfail with it.
"""

from __future__ import annotations

import os

import pytest

from tests.simulation.runner import (
    collect_background,
    failing_seeds_with_lost_splits,
    in_subprocess,
    replay,
    replay_continuous,
    replays_exactly,
    run_many,
)
from tests.simulation.schedule import Result, run

SCHEDULES = int(os.environ.get("SIM_SCHEDULES", "10000"))
FIRST_SEED = int(os.environ.get("SIM_SEED_START", "0"))
WORKERS = min(2, os.cpu_count() or 1)

# kind of violation -> the bug, as reported; a bug found and not fixed yet goes here, with
# a strict xfail on one of its seeds. Every bug found so far is fixed; the tests below
# replay their seeds.
KNOWN_BUGS: dict[str, str] = {}
# Seeds whose violation is found and not yet understood well enough to excuse its whole
# kind: excused by seed alone (a schedule is a pure function of its seed), each pinned by
# a strict xfail below. Any other seed with the same kind still fails the test.
KNOWN_FAILING_SEEDS: dict[int, str] = {}


# ~2 minutes on two idle cores (about 20 ms of CPU a schedule); far longer on a loaded machine.
# In a session with other tests they ran in its background since it started (conftest.py).
@pytest.mark.timeout(1500)
def test_schedules() -> None:
    summary = collect_background()
    if summary is None:
        summary = run_many(FIRST_SEED, SCHEDULES, WORKERS)
    print(summary.describe())
    assert summary.schedules == SCHEDULES
    unknown = {
        seed: v
        for seed, v in summary.failures.items()
        if v[0].split("]", 1)[0].lstrip("[") not in KNOWN_BUGS and seed not in KNOWN_FAILING_SEEDS
    }
    assert not unknown, "new invariant violations:\n" + "\n".join(
        f"seed {seed}: {violations[0]}\n  replay: .venv/bin/python -m tests.simulation --seed {seed} --trace"
        for seed, violations in sorted(unknown.items())[:10]
    )
    # Most schedules end with every job FINISHED: the faults are survivable, not fatal.
    assert summary.job_states["FINISHED"] > 0.9 * sum(summary.job_states.values())


def replay_as_found(seed: int) -> Result:
    """The seed's schedule as it was when its bug was found: before consumer vertices,
    cancels and savepoints were drawn (last, so its cluster, jobs and faults are the same)."""
    return run(seed, record=True, clients=False, continuous=False)


def test_a_seed_replays_exactly() -> None:
    same, steps = in_subprocess(replays_exactly, 1490)
    assert same
    assert steps > 50


def test_late_submit_task_does_not_oversubscribe_a_task_manager() -> None:
    # tm-0 (1 slot): SubmitTask(job1 subtask 2) is slow, the JobManager's ask times out, it
    # frees the slot and deploys job0 subtask 0 there; both SubmitTasks arrive: the second is
    # refused (the slot is occupied), the late one cancelled; both jobs finish.
    result = in_subprocess(replay, 413)
    assert result.ok, result.violations


def test_a_subtask_its_task_manager_cancelled_is_restarted() -> None:
    # The JobManager is cut off for a few seconds; a TaskManager misses its heartbeats,
    # cancels its task and registers again (same JobManager); the task's CANCELED, which the
    # JobMaster did not ask for, fails the attempt and the restart strategy reruns it.
    result = in_subprocess(replay, 3692)
    assert result.ok, result.violations


def test_a_deposed_leader_does_not_acknowledge_a_job_it_cannot_store() -> None:
    # jobmanager-a is deposed at t=0.15 and learns it up to 3 s later; job1 is submitted
    # to it meanwhile; its add_job is refused by the fenced store, so the submission must
    # be answered with an error (a Success would lose the job) and the client resubmits.
    result = in_subprocess(replay_as_found, 63)
    assert result.ok, result.violations


def test_checkpoint_ids_increase_across_leader_changes() -> None:
    # jobmanager-a triggers checkpoint 2 of job0 at t=2.03 and dies at 2.05; jobmanager-b,
    # leader from 4.05, recovers job0 and triggers its next checkpoint at 4.35: after the
    # block of ids jobmanager-a reserved in the job store, never a second checkpoint 2.
    result = in_subprocess(replay, 196)
    assert result.ok, result.violations


def test_a_superseded_attempt_does_not_delete_the_current_attempts_chunks() -> None:
    # SubmitTask(job0 source[1] attempt 0) to tm-0 is slow (arrives at t=4.73); meanwhile
    # attempt 1 runs on tm-1 and commits splits 2 and 5; the late attempt 0 starts
    # at t=4.76; had it deleted them as orphans ("not completed" by its stale
    # COMPLETED_SPLITS list) before the JobManager refused it, splits 2 and 5 would never
    # be published: an attempt removes orphans only once the JobManager answered it.
    result = in_subprocess(replay, 6787)
    assert result.ok, result.violations


def test_a_deposed_leaders_first_checkpoint_is_ranked_by_its_leadership() -> None:
    # jobmanager-a (lease 1) is deposed at t=3.09 and does not notice before it crashes at
    # 4.33; jobmanager-b (lease 2) triggers checkpoint 21 of job1 at 4.10 (after a's block
    # 1-20); a triggers its first checkpoint of job1, 3, from its own block at 4.18. Not a
    # reuse: the invariant orders epochs by lease, not by their first checkpoint.
    result = in_subprocess(replay_as_found, 5031)
    assert result.ok, result.violations


def test_a_lost_partition_reported_twice_reruns_its_producer_once() -> None:
    # tm-0 (job0's three source partitions) dies at t=4.0; consumers sink[1]#1 and sink[0]#3
    # both fail on partition source-to-sink#2 of source[2]#0. The first failure's region
    # restart reruns source[2] (#1), which finishes at 11.31; sink[1]#2 is deployed on its
    # partition; the second failure's restart must not rerun source[2] again (#2) under
    # the consumer reading #1's partition: a producer whose attempt changed since the
    # failure is not rerun.
    result = in_subprocess(replay, 184)
    assert result.ok, result.violations


def test_a_deposed_leader_deletes_no_checkpoint_the_store_points_at() -> None:
    # jobmanager-a (lease 1) is deposed at t=1.61 and learns it only at ~3.6; meanwhile job1
    # finishes there at 1.94: its FINISHED is refused by the fenced store, which still names
    # job1 RUNNING from chk-2. Had a's job-end cleanup deleted chk-2 anyway, job1,
    # recovered by a (lease 3), would FAIL with SavepointRestoreError: the cleanup runs
    # only once the store took the job's end, and job1 is rerun from chk-2.
    result = in_subprocess(replay, 265)
    assert result.ok, result.violations
    assert result.job_states["job1"] == "FINISHED", result.job_states


def test_a_consumer_is_not_deployed_from_a_restarted_producers_partition() -> None:
    # The JobManager is cut off from t=2.72 to 9.46 right after source[2]#0 reported its
    # partition and before its FINISHED arrived; the lost TaskManager fails source[2]#0, which
    # gets attempt #1 (SCHEDULED). sink[0]#1 must not be deployed from #0's partition
    # under a descriptor naming #1 as its producer: a failed attempt's partitions are
    # released, and sink[0]#1 waits for #1's.
    result = in_subprocess(replay, 1307)
    assert result.ok, result.violations


def test_a_consumer_is_not_deployed_from_a_failed_producers_late_partition_report() -> None:
    # source[1]#0's ScheduleOrUpdateConsumers is slow: its ask times out (t=2.71) and the
    # task fails; the late report still arrives (4.32) before that FAILED, and schedules
    # sink[1]#0 on the partition of the failed attempt: the FAILED releases that
    # partition and fails the consumer scheduled from it.
    result = in_subprocess(replay, 1779)
    assert result.ok, result.violations


def test_a_consumer_deployed_from_a_partition_its_producer_reruns_fails() -> None:
    # tm-1 (source[1]#0's partition) is cut off; sink[1] restarts (#1) on that partition,
    # still counted finished; sink[0]#0's failure (partition unreachable) then reruns
    # source[1]; sink[1]#1 must not go on reading #0's partition under #1: the rerun
    # releases the partition and fails the consumer deployed from it.
    result = in_subprocess(replay, 704)
    assert result.ok, result.violations


def test_a_failed_savepoint_leaves_no_folder_behind() -> None:
    # tm-0 (the only one) dies at t=0.799; a savepoint of job0 is triggered at 0.807, job0
    # is cancelled at 1.764, the savepoint request completes failed at 1.807 while its
    # write is under way: the folder that write renames into place (with a _metadata
    # file) is deleted, as is every savepoint written after its request failed.
    result = in_subprocess(replay, 217)
    assert result.ok, result.violations


def test_a_deposed_leaders_unrecorded_savepoint_leaves_no_folder_behind() -> None:
    # jobmanager-a is deposed at t=2.75 and does not notice; it writes job0's stop
    # savepoint, which the fenced store refuses to record: no leader lists it and its
    # request answers failed there, so its folder is deleted too.
    result = in_subprocess(replay, 881)
    assert result.ok, result.violations


def test_a_stop_of_a_job_cancelled_meanwhile_completes() -> None:
    # job1 is stopped with a savepoint at t=1.630 and cancelled at 1.660; it ends CANCELED
    # and the stop's request completes failed (not IN_PROGRESS for ever).
    result = in_subprocess(replay, 3416)
    assert result.ok, result.violations


def test_a_stop_whose_jobmanager_died_answers_completed() -> None:
    # job1 is stopped at t=1.31 and cancelled at 1.73; it ends CANCELED and the JobManager
    # dies at 2.99. The request is completed failed at the job's end, and its successor,
    # serving it from the store, answers a request of an ended job that its JobManager
    # never completed as failed: IN_PROGRESS would never change, the job having ended.
    result = in_subprocess(replay, 9736)
    assert result.ok, result.violations


def test_a_stop_that_finds_a_round_publishing_ends_the_continuous_job() -> None:
    # job0 runs in rounds; a stop arrives while a round's output is being published (in
    # a worker, which takes a while): neither tasks running nor the job between rounds.
    # the savepoint follows the publish and the job ends FINISHED (nothing else would
    # trigger it: the job would run on for ever).
    result = in_subprocess(replay_continuous, 983)
    assert result.ok, result.violations
    assert result.notes.get("continuous job stopped") == 1


def test_a_continuous_job_recovered_without_a_checkpoint_adds_to_its_output() -> None:
    # job0 published its first round at t=2.49; its JobManager dies at 4.02 (no
    # checkpoints). The run recovered from the store's job finds its sink holding output,
    # which mode 'error' refuses; the sink's marker of published rounds says the output
    # is the job's own: the run goes on, reading its input again (at-least-once,
    # counted; published again at 9.49), and the stop ends it. (Seed 2339 until
    # protocol 6 batched SubmitTasks, which changed its message timings.)
    result = in_subprocess(replay_continuous, 984)
    assert result.ok, result.violations
    assert result.notes.get("continuous: a file published before a JobManager failover is read again")


def test_the_invariants_catch_a_lost_split() -> None:
    """A JobMaster that forgets to hand out again the splits of a failed attempt is caught."""
    failures = in_subprocess(failing_seeds_with_lost_splits, 300)
    assert failures, "300 schedules with task failures and crashes, and no invariant noticed lost splits"
    kinds = {violations[0].split("]", 1)[0] for _, violations in failures}
    assert "[exactly-once" in kinds, kinds


KEPT = "continuous: a round deployed into the slots its job kept"
GIVEN_BACK = "continuous: the slots kept between rounds were given back before the next"


def test_a_continuous_job_keeps_its_slots_between_rounds_until_the_idle_timeout() -> None:
    # slot.idle.timeout 2 s. job1 (2 subtasks, in rounds) ends round 1 at t=2.97 and keeps
    # its 2 slots; a file arrives at 4.54 and round 2 is deployed into them at 4.65 (no
    # slot request). Round 2 ends at 4.83; no file comes within 2 s, the slots go back at
    # 7.01, and round 3 (7.31) asks the pool for slots again. Slots never miscounted.
    result = in_subprocess(replay_continuous, 370)
    assert result.ok, result.violations
    assert result.notes.get(KEPT) == 1 and result.notes.get(GIVEN_BACK)
    assert result.job_states == {"job0": "FINISHED", "job1": "FINISHED"}


def test_a_task_manager_lost_between_rounds_takes_the_kept_slots_with_it() -> None:
    # slot.idle.timeout 50 s. tm-0 crashed at t=0.61; job1's round ends at 2.56 with its
    # slots kept on tm-1, the only TaskManager left, which crashes at 4.05: the kept slots
    # are gone with it, and round 2 (5.30) gets slots of the new processes. (Seed 242
    # until protocol 6 batched SubmitTasks, which changed its message timings.)
    result = in_subprocess(replay_continuous, 12419)
    assert result.ok, result.violations
    assert result.notes.get(GIVEN_BACK) and not result.notes.get(KEPT)
    assert result.job_states["job1"] == "FINISHED"
