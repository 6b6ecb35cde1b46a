"""What the planner runs: the JobManager's calls into a job's own code.

Each function takes and returns plain picklable values (`spark`: the session to
use in-process; None in the planner process, which starts its own), and raises only
VertexPreparationError / HookError (picklable, carrying the original exception's
name and traceback as text): a user's exception class may not survive pickling, and
its module is not importable in the JobManager on purpose.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime.blob import activate_libraries_lazily
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import ExecutionGraph, JobStatus
from flink_runtime.invokable import MasterContext, Prepared, resolve_invokable
from flink_runtime.jobgraph.jobgraph import JobGraph, JobVertex
from flink_runtime.operators.spark.plan import plan_key, resolve_vertex
from flink_runtime.planner import guard
from flink_runtime.planner.plan_cache import PlanCache, Resolver, configure_from
from flink_runtime.planner.remote_plan import RemotePlanResolver, TaskManagerTarget
from flink_runtime.planner.user_code import UserCodeError, describe

log = logging.getLogger(__name__)

Spark = Callable[[], Any]


class VertexPreparationError(UserCodeError):
    """A vertex could not be prepared at submit (bad input path, unknown column, ...)."""


class HookError(UserCodeError):
    """A vertex's on_job_terminal hook (publishing its output) failed."""


# -- the planner process ---------------------------------------------------------------------------

_config: dict[str, Any] = {}


def initialize(config: dict[str, Any], parent_pid: int) -> None:
    """Runs once in a new planner process: it dies with `parent_pid` (the JobManager) and
    gets its memory limit (guard.py)."""
    global _config
    guard.bind_to_parent(parent_pid)
    _config = config
    # Whatever the job's code prints goes nowhere (not into the JobManager's log).
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)-7s planner %(name)s: %(message)s")
    options = Configuration(config)
    guard.limit_memory(options.get(cfg.PLANNER_MEMORY), options.as_written(cfg.PLANNER_MEMORY))


# The planner's JVM only resolves plans on empty DataFrames: one core, a small heap (Spark
# refuses less than 450 MB of max heap), a small young generation and code cache, no
# optimising JIT (short-lived plans). Each a default the configuration's spark.* keys win over.
PLANNER_SPARK: dict[str, str] = {
    "spark.driver.memory": "512m",
    "spark.driver.extraJavaOptions": (
        "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xms16m -Xmn8m -XX:ReservedCodeCacheSize=32m -Xss512k "
        "-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30"
    ),
}


def _own_spark() -> Any:
    """The planner process's SparkSession (local[1], plan checks only), started on first use."""
    from flink_runtime.spark.session import acquire_session, current_session

    session = current_session()
    if session is None:
        with guard.memory_limit_lifted():  # the JVM inherits rlimits: spark.driver.memory bounds its heap
            session = acquire_session({**PLANNER_SPARK, **_config}, default_cores=1, planning_only=True)
    return session


def warm_up(start_spark: bool) -> None:
    """Runs first in a new planner process: start the SparkSession before the first job needs it."""
    if start_spark:
        _own_spark()


def _context(
    job_id: str, job_name: str, config: Configuration, spark: Spark | None, restored: dict[str, Any], namespace: str
) -> MasterContext:
    return MasterContext(
        job_id=job_id,
        job_name=job_name,
        config=config,
        spark=spark or _own_spark,
        restored=restored,
        data_namespace=namespace,
    )


def _own_spark_running() -> bool:
    from flink_runtime.spark.session import current_session

    return current_session() is not None


def _plan_resolver(
    task_manager: TaskManagerTarget | None, job_graph: JobGraph, spark: Spark
) -> RemotePlanResolver | None:
    """Spark plans resolved by `task_manager` while this planner process has no JVM
    running (planner/remote_plan.py); None in-process (a MiniCluster shares its
    TaskManagers' SparkSession) or with no TaskManager registered."""
    if task_manager is None:
        return None
    return RemotePlanResolver(
        task_manager,
        job_graph.job_id or "",
        job_graph.libraries,
        _resolved_with(spark),
        _own_spark_running,
        Configuration(_config).get_seconds(cfg.PLANNER_TIMEOUT),
    )


# The process's plan answers (plan_cache.py), kept across the jobs it prepares.
_plan_cache = PlanCache()


def _cached_plan_resolver(
    job_graph: JobGraph, config: Configuration, spark: Spark, remote: RemotePlanResolver | None
) -> Resolver | None:
    """The vertices' plan checks through the plan cache: resolved by `remote` (a
    TaskManager's JVM) or else with `spark`. A job with libraries is checked without it
    (its code may make a name resolve that would not otherwise)."""
    if job_graph.libraries:
        return remote
    return configure_from(_plan_cache, config).resolver(plan_key, remote or _resolved_with(spark))


def _resolved_with(spark: Spark) -> Resolver:
    """Plans resolved with `spark` (started on first use), as resolve_vertex does."""
    return lambda config, input_schemas, files: resolve_vertex(spark(), config, input_schemas, files)


# -- the calls -------------------------------------------------------------------------------------


def prepare_job(
    job_graph_json: bytes,
    config: Configuration,
    restored: dict[str, Any],
    data_namespace: str,
    blob_dir: str,
    task_manager: TaskManagerTarget | None = None,
    spark: Spark | None = None,
) -> dict[str, Prepared]:
    """Every vertex's input splits and plan check, producers first (VertexPreparationError
    names the vertex that failed). task_manager: resolves the Spark plans when the planner
    process has no JVM (remote_plan.py); ignored in-process (`spark` given)."""
    in_process = spark is not None
    job_graph = JobGraph.from_json(job_graph_json)
    try:
        # The planner's SparkSession starts only if a vertex's plan check asks for it.
        spark = activate_libraries_lazily(
            job_graph.libraries, cache_dir=blob_dir, blob_server=None, spark=spark or _own_spark
        )
    except BaseException as exc:  # noqa: BLE001 - sys.exit in the job's code included
        raise VertexPreparationError.wrapping("the job's libraries", exc) from None
    graph = ExecutionGraph(job_graph)
    context = _context(job_graph.job_id or "", job_graph.name, config, spark, restored, data_namespace)
    remote = None if in_process else _plan_resolver(task_manager, job_graph, spark)
    context.plan_resolver = _cached_plan_resolver(job_graph, config, spark, remote)
    producer_of = {dataset.id: dataset.producer for dataset in job_graph.intermediate_datasets}
    prepared: dict[str, Prepared] = {}
    for ejv in graph.vertices.values():  # topological: producers first
        inputs = [prepared[producer_of[edge.source]].output for edge in ejv.input_edges]
        prepared[ejv.id] = _prepare_vertex(ejv.job_vertex, inputs, context)
    return prepared


def prepare_sources(
    job_graph_json: bytes,
    config: Configuration,
    completed_files: dict[str, list[str]],
    data_namespace: str,
    task_manager: TaskManagerTarget | None = None,
    spark: Spark | None = None,
) -> dict[str, Prepared]:
    """A job's next round (continuous, or going on after a failed stop): its sources
    prepared again, without the files already processed (task_manager: as prepare_job's)."""
    from flink_runtime.checkpoint.metadata import VertexProgress

    job_graph = JobGraph.from_json(job_graph_json)
    vertices = {vertex.id: vertex for vertex in job_graph.vertices}
    restored = {vertex_id: VertexProgress(completed_files=files) for vertex_id, files in completed_files.items()}
    context = _context(job_graph.job_id or "", job_graph.name, config, spark, restored, data_namespace)
    context.continuation = True
    remote = _plan_resolver(task_manager, job_graph, _own_spark) if spark is None else None
    context.plan_resolver = _cached_plan_resolver(job_graph, config, spark or _own_spark, remote)
    prepared = {}
    for vertex_id in completed_files:
        prepared[vertex_id] = _prepare_vertex(vertices[vertex_id], [], context)
    return prepared


def _prepare_vertex(vertex: JobVertex, inputs: list[Any], context: MasterContext) -> Prepared:
    try:
        invokable = resolve_invokable(vertex.invokable)
        prepared = invokable.prepare_on_master(vertex, inputs, context)
        prepared.output_staging_dir = invokable.output_staging_dir(vertex)
        return prepared
    except BaseException as exc:  # noqa: BLE001 - sys.exit in the job's code included
        raise VertexPreparationError.wrapping(f"vertex {vertex.id!r} ({vertex.name})", exc) from None


def run_terminal_hooks(
    job_graph_json: bytes,
    config: Configuration,
    prepared: dict[str, Prepared],
    data_namespace: str,
    status: JobStatus,
    continuation: bool = False,
    more_rounds: bool = False,
    spark: Spark | None = None,
) -> None:
    """Each vertex publishes (FINISHED) or discards its staged output; `more_rounds`: the
    job runs in rounds (a continuous job)."""
    job_graph = JobGraph.from_json(job_graph_json)
    vertices = {vertex.id: vertex for vertex in job_graph.vertices}
    context = _context(job_graph.job_id or "", job_graph.name, config, spark, {}, data_namespace)
    context.continuation = continuation
    context.more_rounds = more_rounds
    errors = []
    for vertex_id, vertex_prepared in prepared.items():
        vertex = vertices[vertex_id]
        try:
            resolve_invokable(vertex.invokable).on_job_terminal(vertex, vertex_prepared, context, status)
        except BaseException as exc:  # noqa: BLE001 - sys.exit in the job's code included
            if status is not JobStatus.FINISHED:
                log.warning("cleanup of vertex %s after %s failed: %s", vertex_id, status.value, exc)
                continue
            errors.append(f"vertex {vertex_id!r}: {describe(exc)}")
    if errors:
        raise HookError("publishing the job's output failed: " + "; ".join(errors))


def forget_job(
    job_graph_json: bytes,
    config: Configuration,
    prepared: dict[str, Prepared],
    data_namespace: str,
    spark: Spark | None = None,
) -> None:
    """The job's end is stored: each vertex forgets what only a recovery of it needed
    (on_job_gone); a failure is logged, never raised (the job is over)."""
    job_graph = JobGraph.from_json(job_graph_json)
    vertices = {vertex.id: vertex for vertex in job_graph.vertices}
    context = _context(job_graph.job_id or "", job_graph.name, config, spark, {}, data_namespace)
    for vertex_id, vertex_prepared in prepared.items():
        try:
            resolve_invokable(vertices[vertex_id].invokable).on_job_gone(vertices[vertex_id], vertex_prepared, context)
        except BaseException as exc:  # noqa: BLE001 - sys.exit in the job's code included
            log.warning("cleanup of vertex %s after the job ended failed: %s", vertex_id, exc)
