"""The CheckpointCoordinator's protocol: acknowledgements, declines, timeouts, retention.

A stub JobMaster stands in for the runtime (this is a unit test of the coordinator);
timers are captured and fired by hand.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.checkpoint.coordinator import ID_BLOCK, CheckpointCoordinator, CheckpointFailure
from flink_runtime.checkpoint.metadata import JobProgress, read_metadata
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.jobmanager.jobstore import JobStore
from flink_runtime.rpc.messages import TriggerCheckpoint


class StubGateway:
    jobmanager_id = "jm-1"  # the fencing token TriggerCheckpoint carries

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.timers: list[tuple[float, Any, tuple[Any, ...]]] = []
        self.tasks: list[asyncio.Task[Any]] = []

    def tell_task_manager(self, address: str, message: Any) -> None:
        self.sent.append((address, message))

    def blocking_ask(self) -> Any:
        def ask(address: str, message: Any) -> Any:
            raise AssertionError(f"no TaskManager serves partitions here ({address}: {message})")

        return ask

    def schedule_once(self, delay: float, function: Any, *args: Any) -> Any:
        self.timers.append((delay, function, args))

        class Handle:
            def cancel(self) -> None:
                pass

        return Handle()

    def run_async(self, awaitable: Any, on_done: Any = None) -> None:
        async def run() -> None:
            try:
                result = await awaitable
            except Exception as exc:
                if on_done:
                    on_done(None, exc)
                return
            if on_done:
                on_done(result, None)

        self.tasks.append(asyncio.get_running_loop().create_task(run()))


class StubJob:
    job_id = "ab" * 16
    name = "stub"
    status = JobStatus.RUNNING
    # One vertex "v" of two subtasks, e-0 and e-1 (vertex_and_subtask below).
    job_graph = JobGraph(name="stub", vertices=[JobVertex(id="v", name="v", invokable="noop", parallelism=2)])
    graph = None  # not built: the stats count the job graph's parallelism

    def __init__(self, running: dict[str, str]) -> None:
        self.gateway = StubGateway()
        self.running = running
        self.completed: list[tuple[int, str, bool]] = []
        self.subsumed: list[str] = []

    def running_task_addresses(self) -> dict[str, str]:
        return dict(self.running)

    def accepts_checkpoints(self) -> bool:
        return True

    data_namespace = job_id

    def progress_view(self, checkpoint_id: int, is_savepoint: bool, terminal: bool, served: Any) -> Any:
        return lambda: JobProgress(job_id=self.job_id, job_name=self.name, checkpoint_id=checkpoint_id, timestamp=1.0)

    def vertex_and_subtask(self, execution_id: str) -> tuple[str, int]:
        return "v", int(execution_id[-1])

    def checkpoint_completed(
        self, checkpoint_id: int, location: str, is_savepoint: bool, size: int, subsumed: list[str]
    ) -> None:
        """As the JobManager: record first, then delete what the new checkpoint subsumes."""
        self.completed.append((checkpoint_id, location, is_savepoint))
        self.subsumed.extend(subsumed)
        for old in subsumed:
            shutil.rmtree(old)


def coordinator(tmp_path: Path, **config: str) -> tuple[CheckpointCoordinator, StubJob]:
    job = StubJob({"e-0": "tcp://tm:1", "e-1": "tcp://tm:2"})
    values = {"state.checkpoints.dir": str(tmp_path / "chk"), "state.checkpoints.num-retained": "1", **config}
    return CheckpointCoordinator(job, Configuration(values)), job  # type: ignore[arg-type]


async def settle(job: StubJob) -> None:
    while job.gateway.tasks:
        await job.gateway.tasks.pop(0)


async def test_completes_when_every_running_task_acknowledged(tmp_path: Path) -> None:
    coord, job = coordinator(tmp_path)
    checkpoint_id = coord.trigger(is_savepoint=False)
    assert {type(m) for _, m in job.gateway.sent} == {TriggerCheckpoint}
    assert {m.jobmanager_id for _, m in job.gateway.sent} == {"jm-1"}  # fenced: a TaskManager checks it
    assert {a for a, _ in job.gateway.sent} == {"tcp://tm:1", "tcp://tm:2"}
    coord.acknowledge("e-0", checkpoint_id, {"path": "/s0", "backend": "hashmap"})
    await settle(job)
    assert job.completed == []  # e-1 has not answered
    coord.acknowledge("e-1", checkpoint_id, None)
    await settle(job)
    assert [c[0] for c in job.completed] == [checkpoint_id]
    progress = read_metadata(job.completed[0][1])
    assert progress.vertices["v"].operator_state["0"]["path"] == "/s0"
    assert coord.statistics()["counts"]["completed"] == 1


@pytest.mark.parametrize(("finished", "acknowledged"), [(True, 2), (False, 1)])
async def test_a_task_that_ends_completes_the_checkpoint_and_counts_if_it_finished(
    tmp_path: Path, finished: bool, acknowledged: int
) -> None:
    coord, job = coordinator(tmp_path)
    checkpoint_id = coord.trigger(is_savepoint=False)
    coord.acknowledge("e-0", checkpoint_id, None)
    coord.execution_stopped("e-1", finished=finished)
    await settle(job)
    assert [c[0] for c in job.completed] == [checkpoint_id]
    latest = coord.statistics()["latest"]["completed"]
    assert (latest["num_subtasks"], latest["num_acknowledged_subtasks"]) == (2, acknowledged)


async def test_decline_fails_the_checkpoint_and_tells_the_requester(tmp_path: Path) -> None:
    coord, job = coordinator(tmp_path)
    outcomes: list[tuple[Any, Any]] = []
    checkpoint_id = coord.trigger(True, str(tmp_path / "sp"), on_complete=lambda loc, err: outcomes.append((loc, err)))
    coord.decline("e-1", checkpoint_id, "no space left")
    await settle(job)
    assert outcomes[0][0] is None and "no space left" in str(outcomes[0][1])
    assert coord.statistics()["latest"]["failed"]["failure_message"].endswith("no space left")


async def test_unacknowledged_checkpoint_expires(tmp_path: Path) -> None:
    coord, job = coordinator(tmp_path, **{"execution.checkpointing.timeout": "2 s"})
    checkpoint_id = coord.trigger(is_savepoint=False)
    delay, expire, args = job.gateway.timers[-1]
    assert delay == 2.0
    expire(*args)
    stats = coord.statistics()
    assert stats["counts"]["failed"] == 1
    assert f"checkpoint {checkpoint_id} expired" in stats["latest"]["failed"]["failure_message"]


async def test_only_the_retained_checkpoints_stay(tmp_path: Path) -> None:
    coord, job = coordinator(tmp_path)
    for _ in range(3):
        checkpoint_id = coord.trigger(is_savepoint=False)
        coord.acknowledge("e-0", checkpoint_id, None)
        coord.acknowledge("e-1", checkpoint_id, None)
        await settle(job)
    await settle(job)
    remaining = sorted(p.name for p in (tmp_path / "chk" / job.job_id).iterdir())
    assert remaining == ["chk-3"]


async def test_subsumed_checkpoints_are_handed_to_the_job_not_deleted_by_the_coordinator(tmp_path: Path) -> None:
    """The job records the new checkpoint before deleting the old one (the store must never
    point at a deleted folder), so the coordinator only says which ones are subsumed."""
    coord, job = coordinator(tmp_path)
    job.checkpoint_completed = lambda *args: job.completed.append(args[:3])  # type: ignore[method-assign]
    for _ in range(2):
        checkpoint_id = coord.trigger(is_savepoint=False)
        coord.acknowledge("e-0", checkpoint_id, None)
        coord.acknowledge("e-1", checkpoint_id, None)
        await settle(job)
    remaining = sorted(p.name for p in (tmp_path / "chk" / job.job_id).iterdir())
    assert remaining == ["chk-1", "chk-2"]


async def test_a_recovered_job_continues_the_checkpoint_ids_and_subsumes_the_earlier_run(tmp_path: Path) -> None:
    coord, job = coordinator(tmp_path)
    earlier = tmp_path / "chk" / job.job_id / "chk-7"
    earlier.mkdir(parents=True)
    coord.resume_after([5, 7, 6], [str(earlier)])
    checkpoint_id = coord.trigger(is_savepoint=False)
    assert checkpoint_id == 8
    coord.acknowledge("e-0", checkpoint_id, None)
    coord.acknowledge("e-1", checkpoint_id, None)
    await settle(job)
    assert job.subsumed == [str(earlier)]
    assert sorted(p.name for p in (tmp_path / "chk" / job.job_id).iterdir()) == ["chk-8"]


async def test_a_checkpoint_folder_the_store_never_recorded_is_not_overwritten(tmp_path: Path) -> None:
    """The JobManager died between writing chk-8 and recording it: ids continue after 8,
    and chk-8 is subsumed before the recorded chk-7."""
    coord, job = coordinator(tmp_path)
    recorded, unrecorded = (tmp_path / "chk" / job.job_id / name for name in ("chk-7", "chk-8"))
    for folder in (recorded, unrecorded):
        folder.mkdir(parents=True)
    coord.resume_after([7], [str(recorded)])
    checkpoint_id = coord.trigger(is_savepoint=False)
    assert checkpoint_id == 9
    coord.acknowledge("e-0", checkpoint_id, None)
    coord.acknowledge("e-1", checkpoint_id, None)
    await settle(job)
    assert job.subsumed == [str(unrecorded), str(recorded)]


def test_a_savepoint_needs_a_directory(tmp_path: Path) -> None:
    coord, _ = coordinator(tmp_path)
    with pytest.raises(Exception, match="state.savepoints.dir"):
        coord.trigger(is_savepoint=True)


async def test_a_savepoint_is_written_aside_and_renamed_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    coord, job = coordinator(tmp_path)
    target = tmp_path / "savepoints"
    stale = target / f".savepoint-{job.job_id[:6]}-dead.inprogress"  # a JobManager died writing it
    stale.mkdir(parents=True)
    outcomes: list[tuple[Any, Any]] = []
    checkpoint_id = coord.trigger(True, str(target), on_complete=lambda loc, err: outcomes.append((loc, err)))
    coord.acknowledge("e-0", checkpoint_id, None)
    coord.acknowledge("e-1", checkpoint_id, None)
    await settle(job)
    location = Path(outcomes[0][0])
    assert [p.name for p in target.iterdir()] == [location.name]
    assert (location / "_metadata").is_file()

    def broken(directory: str, progress: Any) -> None:
        (Path(directory) / "_metadata").write_text("{half")
        raise OSError("disk full")

    monkeypatch.setattr("flink_runtime.checkpoint.coordinator.write_metadata", broken)
    checkpoint_id = coord.trigger(True, str(target), on_complete=lambda loc, err: outcomes.append((loc, err)))
    coord.acknowledge("e-0", checkpoint_id, None)
    coord.acknowledge("e-1", checkpoint_id, None)
    await settle(job)
    assert outcomes[1][0] is None and "disk full" in str(outcomes[1][1])
    assert [p.name for p in target.iterdir()] == [location.name]  # nothing half-written is left


async def test_a_savepoint_written_after_it_failed_leaves_no_folder(tmp_path: Path) -> None:
    # Every task acknowledged, the savepoint is being written, and the job is cancelled
    # meanwhile: the request fails, so the folder the write still renames into place goes
    # (as Flink's PendingCheckpoint.abort disposes the savepoint's location).
    coord, job = coordinator(tmp_path)
    target = tmp_path / "savepoints"
    outcomes: list[tuple[Any, Any]] = []
    checkpoint_id = coord.trigger(True, str(target), on_complete=lambda loc, err: outcomes.append((loc, err)))
    coord.acknowledge("e-0", checkpoint_id, None)
    coord.acknowledge("e-1", checkpoint_id, None)  # the write starts in a worker thread
    coord.fail_all(f"job {job.job_id} is CANCELED")
    await settle(job)
    assert outcomes[0][0] is None and "CANCELED" in str(outcomes[0][1])
    assert job.completed == []
    assert list(target.iterdir()) == []


def test_a_recovered_job_removes_its_half_written_savepoints(tmp_path: Path) -> None:
    target = tmp_path / "savepoints"
    coord, job = coordinator(tmp_path, **{"state.savepoints.dir": str(target)})
    ours = target / f".savepoint-{job.job_id[:6]}-dead.inprogress"
    another_jobs = target / ".savepoint-ffffff-dead.inprogress"
    complete = target / f"savepoint-{job.job_id[:6]}-done"
    for folder in (ours, another_jobs, complete):
        folder.mkdir(parents=True)
    coord.resume_after([3], [])
    assert sorted(p.name for p in target.iterdir()) == sorted([another_jobs.name, complete.name])


async def test_a_savepoint_target_that_became_a_link_out_after_the_request_is_not_written(tmp_path: Path) -> None:
    """security.allowed-directories, links resolved: checked at the request and again at
    the write, so a link made in between writes nothing outside."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    outside.mkdir()
    allowed.mkdir()
    coord, job = coordinator(tmp_path, **{"security.allowed-directories": str(allowed)})
    target = coord.check_savepoint_target(str(allowed / "sp"))
    outcomes: list[tuple[Any, Any]] = []
    checkpoint_id = coord.trigger(True, target, on_complete=lambda loc, err: outcomes.append((loc, err)))
    shutil.rmtree(allowed / "sp")  # the check made it; the job's code, say, replaces it by a link
    (allowed / "sp").symlink_to(outside)
    coord.acknowledge("e-0", checkpoint_id, None)
    coord.acknowledge("e-1", checkpoint_id, None)
    await settle(job)
    assert outcomes[0][0] is None
    assert f"resolves to '{outside}'" in str(outcomes[0][1]), outcomes
    assert list(outside.iterdir()) == []
    with pytest.raises(CheckpointFailure, match=f"savepoint directory .* resolves to '{outside}'"):
        coord.check_savepoint_target(str(allowed / "sp"))


async def test_a_next_jobmanager_continues_after_every_id_an_earlier_one_triggered(tmp_path: Path) -> None:
    """Flink's CheckpointIDCounter: ids a JobManager triggered but never completed (it died,
    or lost the leadership) are never triggered again by the next one, which knows only the
    job store (no completed checkpoint, no chk-N folder)."""
    with JobStore(f"sqlite:///{tmp_path / 'jobstore.db'}") as store:
        store.add_job(StubJob.job_id, "stub", "{}", 1.0)
        triggered: list[int] = []
        for _epoch in range(2):
            coord, _job = coordinator(tmp_path)
            coord.resume_after([], [])
            coord.count_ids_in(
                lambda at_least, count, coord=coord: coord.ids_reserved(
                    store.reserve_checkpoint_ids(StubJob.job_id, at_least, count), count
                )
            )
            triggered += [coord.trigger(is_savepoint=False) for _ in range(ID_BLOCK)]  # none completes
        assert len(set(triggered)) == len(triggered), triggered
        assert min(triggered[ID_BLOCK:]) > max(triggered[:ID_BLOCK])


async def test_without_a_reserved_id_no_checkpoint_is_triggered(tmp_path: Path) -> None:
    coord, job = coordinator(tmp_path)
    asked: list[tuple[int, int]] = []
    coord.count_ids_in(lambda at_least, count: asked.append((at_least, count)))
    assert asked == [(1, ID_BLOCK)]
    with pytest.raises(CheckpointFailure, match="no checkpoint id is reserved"):
        coord.trigger(is_savepoint=False)
    assert job.gateway.sent == [] and asked == [(1, ID_BLOCK)]  # one request in flight at a time
    coord.ids_reserved(1, ID_BLOCK)
    assert coord.trigger(is_savepoint=False) == 1
