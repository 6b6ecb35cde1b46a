"""Simulated tasks: what a TaskExecutor runs instead of Task's thread and invokable.

A SimTask has Task's surface as the TaskExecutor uses it (start, cancel, interrupt,
is_alive, descriptor, execution_id, io_metrics, ...) and reports its states
through the same `report` callback. It runs as a coroutine on the virtual loop and
talks to the JobManager over the TaskExecutor's transport with the messages a real
task sends: RequestNextInputSplit (reporting the split it completed), then
ScheduleOrUpdateConsumers for what it produced. Per split it works a while, then
commits a chunk into its subtask's partition (World.commit_chunk), as SparkTask
commits a chunk per split before asking for the next; or, as the seed decides, it
fails, or hangs (until cancelled, or, stubborn, until interrupted or for ever).

A new attempt, once the JobManager answered its first split request (so it is the
current attempt of its subtask), removes the chunks of splits the JobManager does not
list as completed by its subtask (COMPLETED_SPLITS_KEY), as SparkTask does.
"""

from __future__ import annotations

import asyncio
import random
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.invokable import COMPLETED_SPLITS_KEY
from flink_runtime.rpc.messages import (
    Acknowledge,
    NextInputSplit,
    RequestNextInputSplit,
    ScheduleOrUpdateConsumers,
    TaskDeploymentDescriptor,
)

if TYPE_CHECKING:
    from flink_runtime.taskmanager.taskexecutor import TaskExecutor
    from tests.simulation.world import World

_E = ExecutionState


class SimTaskFailure(RuntimeError):
    """The failure a seed injects into a task."""


class SimPartitionUnreachable(RuntimeError):
    """PartitionUnreachableError: a finished input partition cannot be fetched."""


class _Cancelled(Exception):
    pass


@dataclass
class TaskFaults:
    """Per-split probabilities of what a simulated task does."""

    fail: float = 0.0
    hang: float = 0.0
    stubborn: float = 0.0  # of the hanging ones: ignores cooperative cancellation


class SimTask:
    def __init__(
        self,
        world: World,
        executor: TaskExecutor,
        descriptor: TaskDeploymentDescriptor,
        data_dir: str,
        report: Any,
        rng: random.Random,
        **_: Any,
    ) -> None:
        self.world = world
        self.executor = executor
        self.descriptor = descriptor
        self.execution_id = descriptor.execution_id
        self.job_id = descriptor.job_id
        self._report = report
        self._rng = rng
        self.invokable = None
        self.io_metrics = None
        self.missing_partitions: list[str] = []
        self.state = _E.DEPLOYING
        self.cancelled = False
        self.killed = False  # its process died: it reports nothing more
        self.hanging = False
        self._wake = asyncio.Event()
        self._coroutine: asyncio.Task[None] | None = None
        self._hash = zlib.crc32(descriptor.execution_id.encode())

    def __hash__(self) -> int:
        # World.live_tasks is a set: hashed by the seeded execution id rather than by the
        # object's address (which differs from process to process), the order a TaskManager
        # crash and the end of faults walk it in is the same wherever the seed runs.
        return self._hash

    @property
    def namespace(self) -> str:
        return self.descriptor.data_namespace or self.job_id

    # -- Task's surface --------------------------------------------------------------------

    def is_alive(self) -> bool:
        return self._coroutine is not None and not self._coroutine.done()

    def start(self) -> None:
        self._coroutine = asyncio.get_running_loop().create_task(self._run())
        self.world.live_tasks.add(self)

    def cancel(self) -> None:
        self.cancelled = True
        if not self._stubborn:
            self._wake.set()

    def interrupt(self) -> None:
        if self._coroutine is not None and not self._coroutine.done() and not self._stubborn:
            self._coroutine.cancel()

    def unhang(self) -> None:
        """The faults stopped: a hanging task goes on (a stall, not a loop for ever)."""
        if self.hanging:
            self.hanging = False
            self._wake.set()

    def kill(self) -> None:
        """Its TaskManager process died with it."""
        self.killed = True
        if self._coroutine is not None:
            self._coroutine.cancel()

    # -- the task --------------------------------------------------------------------------

    _stubborn = False

    def _transition(self, state: ExecutionState, error: str | None = None) -> None:
        if self.killed:
            return
        self.state = state
        self.world.trace(f"task {self.world.name_of(self)} {state.value}" + (f": {error}" if error else ""))
        self._report(self, state, error)

    def _check(self) -> None:
        if self.cancelled:
            raise _Cancelled()

    async def _work(self) -> None:
        rng = self._rng
        await asyncio.sleep(rng.uniform(0.01, 0.5))
        faults = self.world.task_faults  # read now: the faults may have stopped meanwhile
        roll = rng.random()
        if roll < faults.fail:
            raise SimTaskFailure(f"injected failure in {self.world.name_of(self)}")
        if roll < faults.fail + faults.hang:
            self._stubborn = rng.random() < faults.stubborn
            self.world.trace(f"task {self.world.name_of(self)} hangs" + (" (stubborn)" if self._stubborn else ""))
            self.hanging = True
            while True:
                await self._wake.wait()
                if not self._stubborn or not self.hanging:
                    break
                self._wake.clear()
            self.hanging = False
        self._check()

    async def _consume(self) -> dict[int, str]:
        """As Task with fetch_remote_inputs: each input partition is read from the
        TaskManager its gate names (partition_addresses); one that cannot be fetched (its
        TaskManager is gone, or cut off past the ask timeout) fails the task with
        PartitionUnreachableError, reported as missing_partitions: its producer reruns.
        Returns split -> the producer attempt whose partition held it."""
        consumed: dict[int, str] = {}
        for gate in self.descriptor.input_gates:
            producers = gate.partition_producers or [""] * len(gate.partition_locations)
            for location, number, address, producer in zip(
                gate.partition_locations, gate.partition_numbers, gate.partition_addresses, producers, strict=True
            ):
                partition_id = f"{gate.result_id}#{number}"
                await asyncio.sleep(self._rng.uniform(0.001, 0.05))
                self._check()
                if address and address != self.executor.address:
                    reachable = self.world.serves(address)
                    isolated = self.world.network.isolated
                    if reachable and (address in isolated or self.executor.address in isolated):
                        await asyncio.sleep(self.executor.ask_timeout)  # the fetch's ask times out
                        reachable = False
                    if not reachable:
                        self.missing_partitions = [partition_id]
                        raise SimPartitionUnreachable(f"partition {partition_id} cannot be fetched from {address}")
                for split in self.world.read_partition(self, location, gate.consumed_subpartition_index, producer):
                    consumed[split] = producer
        return consumed

    async def _ask(self, message: Any) -> Any:
        executor = self.executor
        return await executor.rpc.ask(executor.jobmanager_address, message, executor.ask_timeout)

    async def _run(self) -> None:
        descriptor = self.descriptor
        try:
            self._transition(_E.INITIALIZING)
            await asyncio.sleep(self._rng.uniform(0.001, 0.05))
            self._check()
            self._transition(_E.RUNNING)
            if "splits" in descriptor.vertex_config:
                completed = set(descriptor.vertex_config.get(COMPLETED_SPLITS_KEY, []))
                confirmed = False
                done: int | None = None
                while True:
                    self._check()
                    answer = await self._ask(
                        RequestNextInputSplit(
                            job_id=descriptor.job_id,
                            execution_id=descriptor.execution_id,
                            jobmanager_id=descriptor.jobmanager_id,
                            host=self.executor.host,
                            completed_split=done,
                        )
                    )
                    assert isinstance(answer, NextInputSplit)
                    if not confirmed:
                        # As SparkTask (input_splits' on_confirmed): only an attempt the
                        # JobManager answered is current; a superseded one is refused first.
                        confirmed = True
                        self.world.remove_unreported_chunks(self, completed)
                    if answer.split is None:
                        break
                    await self._work()
                    self.world.commit_chunk(self, answer.split.split_number, answer.split.payload)
                    done = answer.split.split_number
            elif descriptor.input_gates:
                # A consumer: reads its subpartition of every input partition where the
                # runtime said it is, works, then commits its output from what it read.
                consumed = await self._consume()
                await self._work()
                self._check()
                self.world.commit_output(self, consumed)
            else:
                await self._work()
            self._check()
            for partition in descriptor.produced_partitions:
                answer = await self._ask(
                    ScheduleOrUpdateConsumers(
                        job_id=descriptor.job_id,
                        execution_id=descriptor.execution_id,
                        jobmanager_id=descriptor.jobmanager_id,
                        partition_id=partition.partition_id,
                        # Where its chunks are (World.read_partition parses it back).
                        location=self.world.partition_location(self, partition.number_of_subpartitions),
                        data_address=self.executor.address,
                    )
                )
                if isinstance(answer, Acknowledge) and not answer.ok:
                    raise RuntimeError(f"JobManager refused partition {partition.partition_id}: {answer.reason}")
            self._transition(_E.FINISHED)
        except (_Cancelled, asyncio.CancelledError):
            if not self.killed:
                self._transition(_E.CANCELED)
        except Exception as exc:  # noqa: BLE001 - every outcome is reported, as Task does
            if self.cancelled:
                self._transition(_E.CANCELED)
            else:
                self._transition(_E.FAILED, f"{type(exc).__name__}: {exc}")
        finally:
            self.world.live_tasks.discard(self)
