"""Spark plans resolved by a TaskManager instead of a JVM in the planner process.

A Spark vertex's plan check (operators/spark/plan.py) needs a JVM: Spark's analyzer
resolves the chain on empty DataFrames. Started in the planner, that JVM holds ~260 MB
(its floor: heap, metaspace and symbols of Spark SQL's classes; benchmarks/README.md,
round 38) beside the JobManager; a TaskManager has one warm for its tasks anyway. So
the JobManager names a registered TaskManager (`choose_task_manager`) with each
preparation, and the planner asks it (ResolvePlan, answered by
taskmanager/plan_resolution.py) before it would start its own:

- the answer is used as it comes: the same resolved config and output schema, and
  what the job's code raised, described as the planner describes it (the submission's
  400 names the same error);
- no answer (the TaskManager is gone, its connection dropped mid-call, it speaks
  another protocol, it cannot fetch the job's libraries or read a file the planner
  listed): the planner resolves the plan with its own SparkSession, as before, and
  asks no TaskManager again for that job's preparation;
- the job's code does not return within half the time the preparation has left
  (jobmanager.planner.timeout): the submission fails saying so, as in the planner.

A planner whose own SparkSession runs already (jobmanager.planner.warm-up, a JDBC
vertex's driver check, a source on hdfs://, s3a://, ..., a fallback) resolves with it:
the JVM is there, and asking costs a round trip. The planner holds the cluster's RPC
secret for the ask: it runs as the JobManager's user, who can read the secret anyway
(security/cluster_secret.py), and a TaskManager runs the job's code with it too.

A transform that exits or crashes its interpreter on a TaskManager takes that
TaskManager down (as the same transform would once the job's tasks run it there); the
planner then resolves the plan itself and refuses the job as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flink_runtime.planner.user_code import UserCodeError
from flink_runtime.rpc.messages import Message, PlanRefused, PlanResolved, ResolvePlan

log = logging.getLogger(__name__)

# The heartbeat metric a TaskManager reports once its Spark JVM runs (system_metrics.py).
_JVM_METRIC = "Status.JVM.Memory.Heap.Used"
# Seconds a TaskManager's address gets to accept a TCP connection before the planner
# resolves the plan itself (a host that drops packets, not one that refuses).
PROBE_TIMEOUT = 3.0

Resolution = tuple[dict[str, Any], str]  # (resolved config, output schema as JSON)
LocalResolver = Callable[[dict[str, Any], list[Any], list[str]], Resolution]


@dataclass(frozen=True)
class TaskManagerTarget:
    """The TaskManager a preparation asks (picklable: it travels to the planner process)."""

    task_manager_id: str
    address: str  # its RPC address
    cluster_secret: str = field(repr=False)  # the RPC's (security/rpc_keys.py); never in a log line
    framesize: int  # pekko.framesize, bytes


def choose_task_manager(task_managers: Iterable[Any], cluster_secret: str, framesize: int) -> TaskManagerTarget | None:
    """A registered TaskManager to resolve plans (RegisteredTaskManager's), one whose Spark
    JVM runs already if any (its heartbeats report the JVM's figures); None: none registered."""
    candidates = sorted(task_managers, key=lambda tm: (_JVM_METRIC not in tm.metrics, tm.registered_at))
    if not candidates:
        return None
    chosen = candidates[0]
    return TaskManagerTarget(chosen.task_manager_id, chosen.address, cluster_secret, framesize)


class RemotePlanResolver:
    """MasterContext.plan_resolver of a preparation in the planner process."""

    def __init__(
        self,
        target: TaskManagerTarget | None,
        job_id: str,
        libraries: list[str],
        local: LocalResolver,
        own_spark_running: Callable[[], bool],
        time_limit: float,
    ) -> None:
        """local: resolves with the planner's own SparkSession (starting it);
        time_limit: seconds the preparation may take (jobmanager.planner.timeout), from now."""
        self._target = target
        self._job_id = job_id
        self._libraries = libraries
        self._local = local
        self._own_spark_running = own_spark_running
        self._deadline = time.monotonic() + time_limit

    def __call__(self, config: dict[str, Any], input_schemas: list[Any], files: list[str]) -> Resolution:
        target = self._target
        if target is None or self._own_spark_running():
            return self._local(config, input_schemas, files)
        budget = max(1.0, (self._deadline - time.monotonic()) / 2)
        message = ResolvePlan(
            job_id=self._job_id,
            libraries=list(self._libraries),
            config=config,
            input_schemas=list(input_schemas),
            files=list(files),
            timeout=budget,
        )
        try:
            # A few seconds past the TaskManager's own limit, for its timed_out answer to arrive.
            answer = asyncio.run(_ask(target, message, budget + 5.0))
        except Exception as exc:  # noqa: BLE001 - unreachable, gone, another protocol: resolve here
            return self._fall_back(f"{type(exc).__name__}: {exc}", config, input_schemas, files)
        if isinstance(answer, PlanResolved):
            return answer.resolved, answer.output_schema
        if isinstance(answer, PlanRefused) and answer.timed_out:
            raise UserCodeError(
                f"the job's code did not finish within {budget:g} s resolving the plan on TaskManager "
                f"{target.task_manager_id} (a transform that never returns?); it was interrupted. "
                "jobmanager.planner.timeout sets the limit (a TaskManager gets half of what is left of it)",
                "TimeoutError",
            )
        if isinstance(answer, PlanRefused) and answer.user_code:
            raise UserCodeError(answer.error, answer.cause_name, answer.cause_trace)
        reason = answer.error if isinstance(answer, PlanRefused) else f"unexpected answer {type(answer).__name__}"
        return self._fall_back(reason, config, input_schemas, files)

    def _fall_back(self, reason: str, config: dict[str, Any], input_schemas: list[Any], files: list[str]) -> Resolution:
        assert self._target is not None
        log.warning(
            "TaskManager %s did not resolve the plan of job %s (%s): the planner resolves it with its own SparkSession",
            self._target.task_manager_id,
            self._job_id,
            reason,
        )
        self._target = None  # not asked again in this preparation
        return self._local(config, input_schemas, files)


async def _ask(target: TaskManagerTarget, message: ResolvePlan, timeout: float) -> Message:
    """The TaskManager's answer; RpcException when nothing listens at its address or its
    connection drops first (a killed TaskManager: no need to wait out the timeout),
    AskTimeoutError without an answer."""
    from flink_runtime.rpc.service import RpcException, RpcService

    await _check_listening(target.address)
    # Bound to loopback: answers come back on the connection this side opens.
    service = RpcService("127.0.0.1", 0, framesize=target.framesize, cluster_secret=target.cluster_secret)
    lost: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    service.on_disconnect = lambda address: None if lost.done() else lost.set_result(address)
    await service.start(lambda _message, _reply: None)
    asked = asyncio.ensure_future(service.ask(target.address, message, timeout))
    try:
        await asyncio.wait({asked, lost}, return_when=asyncio.FIRST_COMPLETED)
        if not asked.done():
            raise RpcException(f"the connection to {target.address} dropped before it answered")
        return asked.result()
    finally:
        asked.cancel()
        await service.close()


async def _check_listening(address: str, timeout: float = PROBE_TIMEOUT) -> None:
    """RpcException unless something accepts a TCP connection at `address` (tcp://host:port).

    The RPC's sockets retry a refused connection quietly and report no disconnect for a
    connection that never was: a TaskManager that died before the JobManager noticed
    (its heartbeat timeout has not passed) would hold the plan for the whole time limit.
    A plain connect, closed at once, tells within a round trip."""
    from flink_runtime.rpc.service import RpcException

    host, _, port = address.removeprefix("tcp://").rpartition(":")
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)), timeout)
    except (OSError, TimeoutError, ValueError) as exc:
        raise RpcException(f"nothing accepts connections at {address} ({type(exc).__name__}: {exc})") from None
    writer.close()
