"""Task (one attempt in its own thread) running the built-in invokables."""

from __future__ import annotations

import gc
import json
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.io.partitions import InputGate, stable_hash
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import Partitioner
from flink_runtime.operators.builtin import NumberSource
from flink_runtime.rpc.messages import (
    InputGateDeploymentDescriptor,
    ResultPartitionDeploymentDescriptor,
    TaskDeploymentDescriptor,
)
from flink_runtime.taskmanager.task import Task

JOB = "0123456789abcdef0123456789abcdef"
S = ExecutionState


def descriptor(invokable: str, config: dict[str, Any] | None = None, **fields: Any) -> TaskDeploymentDescriptor:
    values: dict[str, Any] = {
        "job_id": JOB,
        "job_name": "test job",
        "execution_id": "exec-1",
        "jobmanager_id": "jm-1",
        "allocation_id": "alloc-1",
        "slot_index": 0,
        "data_namespace": "",
        "vertex_id": "v1",
        "task_name": f"{invokable} (1/1)",
        "subtask_index": 0,
        "parallelism": 1,
        "attempt_number": 0,
        "invokable": invokable,
        "vertex_config": config or {},
    }
    values.update(fields)
    return TaskDeploymentDescriptor(**values)


class Harness:
    """Runs one Task and records, in order, everything it reports through its callbacks."""

    def __init__(
        self,
        data_dir: Path,
        tdd: TaskDeploymentDescriptor,
        splits: list[InputSplit] | None = None,
    ) -> None:
        self.log: list[tuple[str, Any]] = []
        self.states: list[ExecutionState] = []
        self.errors: list[str | None] = []
        self.partitions: list[tuple[str, str]] = []
        self.split_requests = 0
        self.threads: set[str] = set()
        self._splits = list(splits or [])
        self._lock = threading.Lock()
        self.terminal = threading.Event()
        self.running = threading.Event()
        self.task = Task(tdd, str(data_dir), self.report, self.request_split, self.notify_partition_ready)

    def report(self, task: Task, state: ExecutionState, error: str | None) -> None:
        assert task is self.task
        with self._lock:
            self.threads.add(threading.current_thread().name)
            self.states.append(state)
            self.errors.append(error)
            self.log.append(("state", state))
        if state is S.RUNNING:
            self.running.set()
        if state.is_terminal:
            self.terminal.set()

    def request_split(self, completed_split: int | None = None) -> InputSplit | None:
        with self._lock:
            self.split_requests += 1
            split = self._splits.pop(0) if self._splits else None
            self.log.append(("split", None if split is None else split.split_number))
        return split

    def notify_partition_ready(self, partition_id: str, location: str) -> None:
        with self._lock:
            self.partitions.append((partition_id, location))
            self.log.append(("partition", partition_id))

    def run(self, timeout: float = 3.0) -> Harness:
        self.task.start()
        return self.wait(timeout)

    def wait(self, timeout: float = 3.0) -> Harness:
        assert self.terminal.wait(timeout), f"task did not end; states so far {self.states}"
        self.task.thread.join(timeout)
        assert not self.task.thread.is_alive()
        return self

    @property
    def final_error(self) -> str | None:
        return self.errors[-1]


def read_partition(location: str, subpartitions: int) -> list[list[Any]]:
    """Every subpartition of one committed partition, read as a consumer reads it."""
    return [list(InputGate("result", i, [str(location)]).records()) for i in range(subpartitions)]


def leftover_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


# -- noop / fail / unknown ------------------------------------------------------------------


def test_noop_reports_initializing_running_finished(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("noop")).run()
    assert harness.states == [S.INITIALIZING, S.RUNNING, S.FINISHED]
    assert harness.errors == [None, None, None]
    assert harness.task.state is S.FINISHED
    assert harness.threads == {"noop (1/1) #0"}  # reported from the task's own thread
    assert harness.partitions == []
    assert harness.split_requests == 0


def test_a_finished_task_is_freed_without_the_cyclic_collector(tmp_path: Path) -> None:
    # No reference cycle through the task (its environment's next_input_split used to be a
    # bound method of it): a busy TaskManager's collector otherwise traversed every task.
    ended = threading.Event()

    def report(task: Task, state: ExecutionState, error: str | None) -> None:
        if state.is_terminal:
            ended.set()

    gc.collect()
    gc.disable()
    try:
        task = Task(descriptor("noop"), str(tmp_path), report, lambda completed=None: None, lambda p, loc: None)
        task.start()
        assert ended.wait(3.0)
        task.thread.join(3.0)
        assert task.state is S.FINISHED and task.invokable is not None
        freed = weakref.ref(task)
        del task
        deadline = time.monotonic() + 3.0
        while freed() is not None and time.monotonic() < deadline:  # its thread lets go of it
            time.sleep(0.01)
        assert freed() is None
    finally:
        gc.enable()


def test_task_starts_in_deploying(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("noop"))
    assert harness.task.state is S.DEPLOYING
    assert harness.task.execution_id == "exec-1"
    assert harness.task.job_id == JOB
    harness.run()


def test_fail_reports_failed_with_message_and_traceback(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("fail", {"message": "disk on fire"})).run()
    assert harness.states == [S.INITIALIZING, S.RUNNING, S.FAILED]
    error = harness.final_error
    assert error is not None
    assert error.startswith("RuntimeError: disk on fire")
    assert "fail (1/1) failed" in error
    assert "Traceback (most recent call last)" in error
    assert "FailingInvokable" in error or "builtin.py" in error
    assert harness.task.state is S.FAILED


def test_fail_only_on_the_named_subtask(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("fail", {"subtask": 1}, subtask_index=0, parallelism=2)).run()
    assert harness.states == [S.INITIALIZING, S.RUNNING, S.FINISHED]
    harness = Harness(tmp_path, descriptor("fail", {"subtask": 1}, subtask_index=1, parallelism=2)).run()
    assert harness.states[-1] is S.FAILED
    assert "task failed on purpose" in (harness.final_error or "")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("no-such-invokable", "unknown invokable 'no-such-invokable'"),
        ("no_such_package.mod:Thing", "cannot import module 'no_such_package.mod'"),
        ("flink_runtime.operators.builtin:Nope", "no AbstractInvokable subclass named 'Nope'"),
        ("json:JSONDecoder", "no AbstractInvokable subclass named 'JSONDecoder'"),
    ],
)
def test_unknown_invokable_fails_clearly(tmp_path: Path, name: str, expected: str) -> None:
    harness = Harness(tmp_path, descriptor(name)).run()
    assert harness.states == [S.INITIALIZING, S.FAILED]
    assert harness.final_error is not None
    assert harness.final_error.startswith("InvokableNotFound:")
    assert expected in harness.final_error


# -- cancellation --------------------------------------------------------------------------------


def test_cancel_sleep_task_is_canceled_quickly(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("sleep", {"seconds": 30}))
    harness.task.start()
    assert harness.running.wait(2)
    started = time.monotonic()
    harness.task.cancel()
    harness.wait(2)
    assert time.monotonic() - started < 0.5
    assert harness.states == [S.INITIALIZING, S.RUNNING, S.CANCELED]
    assert harness.final_error is None
    assert harness.task.state is S.CANCELED


def test_cancel_before_start_is_canceled_without_running(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("sleep", {"seconds": 30}))
    harness.task.cancel()
    harness.run(2)
    assert harness.states == [S.INITIALIZING, S.CANCELED]


def test_sleep_ignoring_cancel_stops_only_on_interrupt(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("sleep", {"seconds": 30, "ignore_cancel": True}))
    harness.task.start()
    assert harness.running.wait(2)
    harness.task.cancel()
    assert not harness.terminal.wait(0.2)  # cooperative cancel is ignored
    assert harness.task.thread.is_alive()
    started = time.monotonic()
    harness.task.interrupt()  # the forceful path
    harness.wait(2)
    assert time.monotonic() - started < 0.5
    assert harness.states == [S.INITIALIZING, S.RUNNING, S.CANCELED]


def test_interrupt_alone_reports_canceled(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("sleep", {"seconds": 30, "ignore_cancel": True}))
    harness.task.start()
    assert harness.running.wait(2)
    harness.task.interrupt()
    harness.wait(2)
    assert harness.states[-1] is S.CANCELED


def test_interrupt_of_finished_task_is_harmless(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("noop")).run()
    harness.task.interrupt()
    harness.task.cancel()
    assert harness.states == [S.INITIALIZING, S.RUNNING, S.FINISHED]


def test_short_sleep_finishes(tmp_path: Path) -> None:
    harness = Harness(tmp_path, descriptor("sleep", {"seconds": 0.05})).run()
    assert harness.states == [S.INITIALIZING, S.RUNNING, S.FINISHED]


# -- number-source and partitions ---------------------------------------------------------------


def hash_partition(partition_id: str, result_id: str, subpartitions: int) -> ResultPartitionDeploymentDescriptor:
    return ResultPartitionDeploymentDescriptor(
        partition_id=partition_id,
        result_id=result_id,
        partition_number=0,
        number_of_subpartitions=subpartitions,
        partitioner=Partitioner.HASH,
        keys=["key"],
    )


def test_number_source_pulls_splits_and_commits_partitions(tmp_path: Path) -> None:
    config = {"count": 20, "splits": 3, "modulo": 4}
    splits = NumberSource.create_input_splits(config, parallelism=1)
    assert [s.payload for s in splits] == [[0, 6], [6, 13], [13, 20]]
    broadcast = ResultPartitionDeploymentDescriptor(
        partition_id="p-broadcast",
        result_id="r-broadcast",
        partition_number=0,
        number_of_subpartitions=2,
        partitioner=Partitioner.BROADCAST,
    )
    tdd = descriptor("number-source", config, produced_partitions=[hash_partition("p-hash", "r-hash", 3), broadcast])
    harness = Harness(tmp_path, tdd, splits).run()

    assert harness.states == [S.INITIALIZING, S.RUNNING, S.FINISHED]
    assert harness.split_requests == 4  # three splits, then None
    expected_locations = [str(tmp_path / JOB / "r-hash" / "0"), str(tmp_path / JOB / "r-broadcast" / "0")]
    assert harness.partitions == [("p-hash", expected_locations[0]), ("p-broadcast", expected_locations[1])]
    # Every partition is announced after all splits were read and before FINISHED.
    assert harness.log == [
        ("state", S.INITIALIZING),
        ("state", S.RUNNING),
        ("split", 0),
        ("split", 1),
        ("split", 2),
        ("split", None),
        ("partition", "p-hash"),
        ("partition", "p-broadcast"),
        ("state", S.FINISHED),
    ]
    expected = [{"n": n, "key": n % 4} for n in range(20)]
    hashed = read_partition(expected_locations[0], 3)
    assert sorted((r for part in hashed for r in part), key=lambda r: r["n"]) == expected
    for index, part in enumerate(hashed):
        assert all(stable_hash([r["key"]]) % 3 == index for r in part)
    assert read_partition(expected_locations[1], 2) == [expected, expected]
    # Nothing but the committed partitions is left behind.
    assert sorted(p.name for p in (tmp_path / JOB / "r-hash").iterdir()) == ["0"]


def test_number_source_without_splits_commits_empty_partition(tmp_path: Path) -> None:
    tdd = descriptor("number-source", produced_partitions=[hash_partition("p", "r", 2)])
    harness = Harness(tmp_path, tdd, []).run()
    assert harness.states[-1] is S.FINISHED
    assert harness.split_requests == 1
    assert read_partition(harness.partitions[0][1], 2) == [[], []]


def test_failure_while_producing_commits_nothing(tmp_path: Path) -> None:
    tdd = descriptor("number-source", produced_partitions=[hash_partition("p", "r", 2)])
    harness = Harness(tmp_path, tdd, [InputSplit(split_number=0, payload=[0, 5])])

    def broken_request(completed_split: int | None = None) -> InputSplit | None:
        if harness.split_requests:
            raise ConnectionError("JobManager unreachable")
        return harness.request_split()

    harness.task._splits._request_split = broken_request
    harness.run()
    assert harness.states[-1] is S.FAILED
    assert "ConnectionError: JobManager unreachable" in (harness.final_error or "")
    assert harness.partitions == []
    assert leftover_files(tmp_path) == []
    assert not (tmp_path / JOB / "r" / "0").exists()


def test_cancel_while_producing_commits_nothing(tmp_path: Path) -> None:
    config = {"count": 1000, "splits": 100, "seconds_per_split": 0.02}
    splits = NumberSource.create_input_splits(config, parallelism=1)
    tdd = descriptor("number-source", config, produced_partitions=[hash_partition("p", "r", 2)])
    harness = Harness(tmp_path, tdd, splits)
    harness.task.start()
    assert harness.running.wait(2)
    time.sleep(0.05)
    harness.task.cancel()
    harness.wait(2)
    assert harness.states == [S.INITIALIZING, S.RUNNING, S.CANCELED]
    assert harness.split_requests < 100
    assert harness.partitions == []
    assert leftover_files(tmp_path) == []


def test_retried_attempt_replaces_the_committed_partition(tmp_path: Path) -> None:
    first = Harness(
        tmp_path,
        descriptor("number-source", {"count": 4}, produced_partitions=[hash_partition("p", "r", 1)]),
        NumberSource.create_input_splits({"count": 4}, 1),
    ).run()
    second = Harness(
        tmp_path,
        descriptor(
            "number-source",
            {"count": 2},
            produced_partitions=[hash_partition("p", "r", 1)],
            execution_id="exec-2",
            attempt_number=1,
        ),
        NumberSource.create_input_splits({"count": 2}, 1),
    ).run()
    assert first.partitions[0][1] == second.partitions[0][1]
    assert read_partition(second.partitions[0][1], 1) == [[{"n": 0, "key": 0}, {"n": 1, "key": 1}]]


# -- a small pipeline: number-source -> modulo-sum -> collect-sink ------------------------------


def test_pipeline_of_builtin_invokables(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    sources = []
    for index in range(2):
        config = {"count": 30, "splits": 2, "modulo": 3}
        splits = NumberSource.create_input_splits(config, 2)[index::2]
        tdd = descriptor(
            "number-source",
            config,
            execution_id=f"src-{index}",
            subtask_index=index,
            parallelism=2,
            produced_partitions=[
                ResultPartitionDeploymentDescriptor(
                    partition_id=f"src-p{index}",
                    result_id="numbers",
                    partition_number=index,
                    number_of_subpartitions=2,
                    partitioner=Partitioner.HASH,
                    keys=["key"],
                )
            ],
        )
        sources.append(Harness(data_dir, tdd, splits).run())
    source_locations = [h.partitions[0][1] for h in sources]

    sums = []
    for index in range(2):
        tdd = descriptor(
            "modulo-sum",
            execution_id=f"sum-{index}",
            subtask_index=index,
            parallelism=2,
            input_gates=[
                InputGateDeploymentDescriptor(
                    result_id="numbers",
                    partitioner=Partitioner.HASH,
                    consumed_subpartition_index=index,
                    partition_locations=source_locations,
                )
            ],
            produced_partitions=[
                ResultPartitionDeploymentDescriptor(
                    partition_id=f"sum-p{index}",
                    result_id="sums",
                    partition_number=index,
                    number_of_subpartitions=1,
                    partitioner=Partitioner.FORWARD,
                )
            ],
        )
        sums.append(Harness(data_dir, tdd).run())
    assert all(h.states[-1] is S.FINISHED for h in sums)

    out = tmp_path / "out"
    sink = Harness(
        data_dir,
        descriptor(
            "collect-sink",
            {"path": str(out)},
            execution_id="sink-0",
            input_gates=[
                InputGateDeploymentDescriptor(
                    result_id="sums",
                    partitioner=Partitioner.REBALANCE,
                    consumed_subpartition_index=0,
                    partition_locations=[h.partitions[0][1] for h in sums],
                )
            ],
        ),
    ).run()
    assert sink.states == [S.INITIALIZING, S.RUNNING, S.FINISHED]
    result = json.loads((out / "part-0.json").read_text())
    expected = {k: (sum(n for n in range(30) if n % 3 == k), 10) for k in range(3)}
    assert {r["key"]: (r["sum"], r["count"]) for r in result} == expected
    assert [p.name for p in out.iterdir()] == ["part-0.json"]  # no staging file left

    # I/O metrics: what each attempt read and wrote, as reported with FINISHED.
    source_metrics = [h.task.io_metrics for h in sources]
    assert [m.records_out for m in source_metrics] == [15, 15]  # 30 numbers over two splits each
    assert all(m.records_in == 0 and m.bytes_in == 0 and m.bytes_out > 0 for m in source_metrics)
    sum_metrics = [h.task.io_metrics for h in sums]
    assert sum(m.records_in for m in sum_metrics) == 30
    assert sum(m.records_out for m in sum_metrics) == 3  # one row per key
    assert sum(m.bytes_in for m in sum_metrics) == sum(m.bytes_out for m in source_metrics)
    # The sink writes its own file: it counts that itself, through Environment.io_metrics.
    assert sink.task.io_metrics.records_in == 3
    assert sink.task.io_metrics.records_out == 3
    assert sink.task.io_metrics.bytes_out == (out / "part-0.json").stat().st_size


def test_io_metrics_count_split_waits_as_idle_and_failures_report_what_was_done(tmp_path: Path) -> None:
    class SlowSplits(Harness):
        def request_split(self, completed_split: int | None = None) -> InputSplit | None:
            time.sleep(0.2)
            return super().request_split(completed_split)

    splits = [InputSplit(split_number=0, payload=[0, 5])]
    tdd = descriptor("number-source", produced_partitions=[hash_partition("p", "r", 2)])
    metrics = SlowSplits(tmp_path, tdd, splits).run().task.io_metrics
    assert metrics.records_out == 5
    assert metrics.idle_ms >= 350  # two waits of 200 ms: the split, then "no more"
    assert metrics.busy_ms < metrics.idle_ms

    failing = Harness(tmp_path, descriptor("fail", execution_id="exec-2")).run()
    assert failing.states[-1] is S.FAILED
    assert failing.task.io_metrics is not None and failing.task.io_metrics.records_out == 0
    # A task that never ran (its invokable cannot be found) has nothing to report.
    unknown = Harness(tmp_path, descriptor("no-such-invokable", execution_id="exec-3")).run()
    assert unknown.task.io_metrics is None
