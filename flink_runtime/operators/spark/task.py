"""SparkTask: the invokable of every Pipeline API vertex (built-in name "spark").

Vertex config (see docs/pipelines.md, "JobGraph JSON for Spark vertices"):

    {"source":    {format, paths, options, schema, split_size}      # source vertices
     "operators": [{"op": "select", ...}, ...]                      # the chain
     "sink":      {format, path, mode, options}}                    # sink vertices

On the JobManager, `prepare_on_master` lists the input files into splits and resolves
the whole chain against the input schemas on empty DataFrames, so a missing path, an
unknown column or invalid SQL refuses the job at submit; the resolved schemas travel
to the tasks in the vertex config. In the TaskManager, a source subtask pulls splits
one at a time and runs the chain on each; any other subtask reads its subpartition of
every input. The result goes to the vertex's result partitions (Parquet) and/or its
sink's staging directory, as chunks committed by rename: one per split for a source
subtask (so a restarted subtask keeps what its failed attempt finished), one per
subtask otherwise. A failed attempt's chunks in progress are removed by the Task.

I/O metrics (flink_runtime/io/metrics.py) never cost a Spark job of their own: the rows
a task writes are those in the Parquet footers of the files it wrote (recorded in the
chunk manifests), and the rows a non-source task reads are those its producers'
manifests recorded; only a sink whose files say nothing of their rows (CSV, JSON, a
database table) is counted by a Spark Observation during its write. Bytes are the sizes
already known from the splits, the chunk manifests and the sink listing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from flink_runtime.checkpoint.progress import STATE_CONFIG_KEY
from flink_runtime.configuration import parse_size_bytes
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.invokable import COMPLETED_SPLITS_KEY, AbstractInvokable, MasterContext, Prepared
from flink_runtime.io.filesystem import filesystem_for, is_local, join
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.io.partitions import (
    DataSize,
    chunk_dirs,
    commit_partition_dir,
    partition_dir,
    write_chunk_manifest,
    write_partition_manifest,
)
from flink_runtime.operators.aggregates import final_values, merge_partials, partial_columns
from flink_runtime.operators.spark import io, jdbc, partitioned_sink
from flink_runtime.operators.spark.chain import apply_operators, combine_inputs, reemits_all_it_read
from flink_runtime.operators.spark.ordering import range_of_subtask
from flink_runtime.security.paths import AllowedDirectories
from flink_runtime.security.secret_store import SecretStore
from flink_runtime.spark.session import TaskScope

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from flink_runtime.jobgraph.jobgraph import JobVertex

log = logging.getLogger(__name__)

# Vertex config key under which the JobManager hands the resolved schemas to the tasks.
RESOLVED = "__resolved__"


class SparkTask(AbstractInvokable):
    writes_own_partitions: ClassVar[bool] = True
    final_state_handle: dict[str, Any] | None = None

    # -- on the JobManager ------------------------------------------------------------------

    @classmethod
    def prepare_on_master(cls, vertex: JobVertex, inputs: list[Any], context: MasterContext) -> Prepared:
        from flink_runtime.operators.spark.plan import resolve_vertex

        config = vertex.config
        splits = []
        files: list[str] = []
        restored = context.restored.get(vertex.id)
        allowed = AllowedDirectories.of(context.config)
        if jdbc.is_jdbc(config.get("source")):
            done = set(restored.completed_files) if restored is not None else set()
            secrets = SecretStore.of(context.config)
            splits = jdbc.source_splits(config["source"], vertex.parallelism, secrets, done)
            spark = context.spark()
            jdbc.check_driver(spark)
            schema = jdbc.infer_schema(spark, config["source"], secrets)
            # The columns the database answered, for the plan check (io.infer_source_schema).
            config = {**config, "source": {**config["source"], RESOLVED: io.schema_to_json(schema)}}
        elif "source" in config:
            source = config["source"]
            # Files a savepoint recorded as read are never read again.
            done = set(restored.completed_files) if restored is not None else set()
            if not all(is_local(path) for path in source["paths"]):
                context.spark()  # Hadoop's FileSystem for hdfs://, s3a://, ... lives in its JVM
            listed = io.list_source_files(source)
            # Resolved (links followed) and checked with security.allowed-directories; a
            # savepoint may name a file by the path it was listed under before.
            statuses = [
                status
                for status, original in zip(io.confined_source_files(listed, allowed), listed, strict=True)
                if status.path not in done and original.path not in done
            ]
            files = [status.path for status in statuses]
            split_size = parse_size_bytes(source.get("split_size") or io.DEFAULT_SPLIT_SIZE, "source.split_size", 1)
            splits = io.file_splits(statuses, split_size, vertex.parallelism)
        if "sink" in config and config["sink"].get("mode") == "overwrite_partitions":
            job_id = context.data_namespace.split("/")[0]
            staging = join(io.sink_staging_dir(config["sink"]), job_id)
            partitioned_sink.complete_interrupted_publish(config["sink"], staging, job_id, allowed)
        if jdbc.is_jdbc(config.get("sink")):
            jdbc.check_driver(context.spark())
            jdbc.check_sink(config["sink"], SecretStore.of(context.config))
        elif "sink" in config:
            # A later round, or a run recovered after a JobManager restart that goes on from
            # rounds it published: the data there is the job's own.
            if not context.continuation and not io.published_before(config["sink"], context.data_namespace):
                io.check_sink_target(config["sink"])
            if restored is not None and restored.sink_chunks:
                io.restore_sink_chunks(config["sink"], context.data_namespace, restored.sink_chunks, allowed)
        if context.plan_resolver is not None:  # the planner's: its plan cache, or a TaskManager's JVM
            resolved, output_schema = context.plan_resolver(config, inputs, files)
        else:
            resolved, output_schema = resolve_vertex(context.spark(), config, inputs, files)
        if "sink" in config:
            # Parsed only for partition columns: a planner that resolved the plan on a
            # TaskManager imports no PySpark otherwise (~18 MB of its memory).
            partitioned_sink.check_partition_columns(config["sink"], lambda: io.schema_from_json(output_schema))
        monitor = config.get("source", {}).get("monitor_interval")
        operators = config.get("operators") or []
        return Prepared(
            splits=splits,
            config={RESOLVED: resolved},
            output=output_schema,
            monitor_interval=monitor,
            rereads_inputs_after_stop=bool(operators) and operators[0].get("op") == "join",
            reemits_all_it_read=reemits_all_it_read(operators),
        )

    @classmethod
    def output_staging_dir(cls, vertex: JobVertex) -> str | None:
        sink = vertex.config.get("sink")
        return io.sink_staging_dir(sink) if sink is not None and not jdbc.is_jdbc(sink) else None

    @classmethod
    def on_job_terminal(cls, vertex: JobVertex, prepared: Prepared, context: MasterContext, status: JobStatus) -> None:
        sink = vertex.config.get("sink")
        if sink is None:
            return
        if jdbc.is_jdbc(sink):
            secrets = SecretStore.of(context.config)
            if status is JobStatus.FINISHED:
                published = jdbc.publish(sink, context.data_namespace, secrets)
                log.info("Published %d chunks of %s to table %s", published, vertex.name, sink["table"])
            else:
                jdbc.discard(sink, context.data_namespace, secrets)
            return
        allowed = AllowedDirectories.of(context.config)
        if status is JobStatus.FINISHED:
            continuation = context.continuation or io.published_before(sink, context.data_namespace)
            replace = not continuation or reemits_all_it_read(vertex.config.get("operators") or [])
            published = io.publish_sink(
                sink,
                context.data_namespace,
                continuation=continuation,
                replace=replace,
                allowed=allowed,
                more_rounds=context.more_rounds,
            )
            log.info("Published %d files of %s to %s", published, vertex.name, sink["path"])
        else:
            io.discard_sink_staging(sink, context.data_namespace, allowed)

    @classmethod
    def on_job_gone(cls, vertex: JobVertex, prepared: Prepared, context: MasterContext) -> None:
        sink = vertex.config.get("sink")
        if jdbc.is_jdbc(sink):
            jdbc.forget(sink, context.data_namespace, SecretStore.of(context.config))
        elif sink is not None:
            io.forget_published_rounds(sink, context.data_namespace, AllowedDirectories.of(context.config))

    # -- in the TaskManager -------------------------------------------------------------------

    def invoke(self) -> None:
        env = self.environment
        spark: SparkSession = env.spark()
        config = env.config
        resolved = config[RESOLVED]
        operators = config.get("operators", [])
        self._scope = TaskScope(spark, tag=env.execution_id.replace(",", "_"), pool=f"slot-{env.slot_index}")
        with self._scope:
            if "source" in config:
                spark = _one_job_session(spark, operators)
                # Each split's output is committed on its own (a chunk), before the next
                # split is asked for: a restarted subtask never redoes a committed split.
                completed = set(config.get(COMPLETED_SPLITS_KEY, []))
                chunks = [f"split-{number}" for number in sorted(completed)]
                schema = io.schema_from_json(resolved["source_schema"])
                # Orphans go only once the JobManager answered this attempt: a superseded
                # attempt (its SubmitTask arrived late) would delete the chunks the current
                # attempt of its subtask committed since (input_splits, on_confirmed).
                splits = env.input_splits(
                    commits_per_split=True, on_confirmed=lambda: self._remove_unreported_chunks(completed)
                )
                for split in splits:
                    if jdbc.is_jdbc(config["source"]):
                        df = jdbc.read_split(spark, config["source"], split.payload["where"], env.secrets, schema)
                    else:
                        # Resolved when listed; a link made since (by this job's own code, say)
                        # must not lead the read outside the allowed directories.
                        paths = split.payload["files"]
                        io.check_paths(env.allowed_directories, paths, f"input split {split.split_number}")
                        df = io.read_source(spark, config["source"], paths, schema)
                        df = small_split_in_one_partition(df, operators, split.payload.get("bytes", 0))
                    env.io_metrics += IOMetrics(bytes_in=split.payload.get("bytes", 0))
                    chunks.append(f"split-{split.split_number}")
                    sink_chunk = jdbc.split_chunk(split.payload)
                    self._emit(apply_operators(spark, df, operators), chunks[-1], sink_chunk)
                    env.check_cancelled()
            else:
                spark = _one_job_session(spark, operators)
                state = config.get(STATE_CONFIG_KEY)
                # A final keyed aggregate merged into state (checkpoint/state): it counts the rows it merges.
                final_stateful = bool(state and state.get("enabled")) and reemits_all_it_read(operators)
                inputs, rows_in = [], 0
                for gate, schema in zip(env.input_gates, resolved["input_schemas"], strict=True):
                    df, size = io.read_gate(spark, gate, io.schema_from_json(schema))
                    env.io_metrics += IOMetrics(bytes_in=size.bytes)
                    rows_in += size.rows
                    inputs.append(df)
                df, rest = combine_inputs(inputs, operators)
                if rest and rest[0].get("op") == "order":
                    # Behind a broadcast exchange: this subtask keeps its range (ordering.py).
                    order = list(rest[0]["order"])
                    df, rest = range_of_subtask(df, order, env.subtask_index, env.parallelism), rest[1:]
                if final_stateful:
                    df, rest = self._stateful_final_aggregate(spark, df, rest[0], state), rest[1:]
                chunks = [f"subtask-{env.subtask_index}"]
                if self._emit(apply_operators(spark, df, rest), chunks[0]) and not final_stateful:
                    env.io_metrics += IOMetrics(records_in=rows_in)
            self._seal_partitions(chunks)

    def _stateful_final_aggregate(
        self, spark: SparkSession, partials: DataFrame, spec: dict[str, Any], state: dict[str, Any]
    ) -> DataFrame:
        """The final aggregation, merged with the keyed state of earlier runs.

        The partial rows of this run are merged, per key, into the state backend
        (restored from the savepoint, or empty); the result is every key's merged
        value, and the backend is snapshotted so the next run continues from it.
        """
        from flink_runtime.checkpoint.state import create_state_backend, restore_state_backend

        keys, aggregates = list(spec.get("keys", [])), spec["aggregates"]
        columns = partial_columns(aggregates)
        backend = (
            restore_state_backend(state["restored"], state["local_dir"])
            if state.get("restored")
            else create_state_backend(state["backend"], state["local_dir"])
        )
        try:
            merged = 0
            for row in partials.select(*keys, *columns).toLocalIterator():
                merged += 1
                values = list(row)
                backend.merge(
                    tuple(values[: len(keys)]),
                    values[len(keys) :],
                    lambda old, new: merge_partials(aggregates, old, new),
                )
            schema = apply_operators(spark, partials.limit(0), [spec]).schema
            rows = [(*key, *final_values(aggregates, partial)) for key, partial in backend.items()]
            if state.get("confined"):  # under the job's own state.checkpoints.dir
                self.environment.allowed_directories.check(state["snapshot_dir"], "keyed-state snapshot")
            self.final_state_handle = backend.snapshot(state["snapshot_dir"])
            self.environment.io_metrics += IOMetrics(records_in=merged)
        finally:
            backend.close()
        return spark.createDataFrame(rows, schema)

    def _remove_unreported_chunks(self, completed: set[int]) -> None:
        """An attempt that died between committing a split's chunk and reporting it left an
        orphan; the split is redone (maybe by another subtask), so the orphan must go."""
        env = self.environment
        for partition in env.produced_partitions:
            directory = partition_dir(env.data_dir, env.data_namespace, partition.result_id, partition.partition_number)
            fs = filesystem_for(directory)
            if not fs.exists(directory):
                continue
            for chunk in fs.glob(join(directory, "split-*")):
                number = chunk.path.rstrip("/").rsplit("split-", 1)[-1]
                if not number.isdigit() or int(number) not in completed:
                    fs.delete(chunk.path)

    def _emit(self, df: DataFrame, chunk: str, sink_chunk: str | None = None) -> bool:
        """Write one chunk to every output and commit it (rename into place). False when
        the vertex has no output at all (nothing ran on `df`). `sink_chunk`: a JDBC sink's
        name for the chunk (jdbc.split_chunk), when it is not `chunk`."""
        env = self.environment
        targets = [
            (partition_dir(env.data_dir, env.data_namespace, p.result_id, p.partition_number), p)
            for p in env.produced_partitions
        ]
        sink = env.config.get("sink")
        if not targets and sink is None:
            return False
        # Every output gets the same rows: they are counted in the first one's files,
        # or during the write when those files do not say (io.counts_rows_in_files).
        observed = None
        if not targets and not io.counts_rows_in_files(sink):
            df, observed = _counted(df)
        written: list[DataSize] = []
        for directory, partition in targets:
            in_progress, _ = chunk_dirs(directory, chunk, env.execution_id)
            io.write_partition(df, partition, in_progress)
            written.append(write_chunk_manifest(in_progress))
        if jdbc.is_jdbc(sink):
            jdbc.write_chunk(df, sink, env.data_namespace, sink_chunk or chunk, env.execution_id, env.secrets)  # type: ignore[arg-type]
        elif sink is not None:
            sink_chunk = chunk_dirs(io.sink_staging_root(sink, env.data_namespace), chunk, env.execution_id)
            # Before writing and again before committing: the sink's folders may have
            # become links out of the allowed directories since submit.
            io.check_paths(env.allowed_directories, sink_chunk, "sink")
            written.append(io.write_sink(df, sink, sink_chunk[0]))
        rows = observed() if observed is not None else written[0].rows
        env.io_metrics += IOMetrics(records_out=rows, bytes_out=sum(size.bytes for size in written))
        env.check_cancelled()
        for directory, _partition in targets:
            commit_partition_dir(*chunk_dirs(directory, chunk, env.execution_id))
        if sink is not None and not jdbc.is_jdbc(sink):
            io.check_paths(env.allowed_directories, sink_chunk, "sink")
            commit_partition_dir(*sink_chunk)
        return True

    def _seal_partitions(self, chunks: list[str]) -> None:
        """Every produced partition names the chunks it holds, earlier attempts' included:
        consumers read exactly those (io/partitions.py)."""
        env = self.environment
        for partition in env.produced_partitions:
            directory = partition_dir(env.data_dir, env.data_namespace, partition.result_id, partition.partition_number)
            write_partition_manifest(directory, partition.result_id, chunks, env.execution_id)

    def cancel(self) -> None:
        scope = getattr(self, "_scope", None)
        if scope is not None:
            scope.cancel()


def _one_job_session(spark: SparkSession, operators: list[dict[str, Any]]) -> SparkSession:
    """The session a subtask runs its chain in: for a chain that aggregates in two phases
    (a source's partial aggregate, or the final aggregate that merges the partials after
    the exchange), a child session with adaptive execution off, so that reading, the
    aggregate's shuffle and writing are one Spark job (two stages). With AQE, Spark runs
    the shuffle as a job of its own and plans the write after it, with a gap between the
    two (issue 26). Both phases see few rows: a partial aggregate combines what it reads,
    and the final one reads only those combined rows. The child shares the SparkContext
    (scheduler pools, job tags, executors) and the SparkConf's settings; Spark Connect,
    or any other chain, keeps the shared session."""
    from flink_runtime.spark.session import is_connect

    two_phase = any(spec.get("op") == "aggregate" and spec.get("phase") in ("partial", "final") for spec in operators)
    if not two_phase or is_connect(spark):
        return spark
    session = spark.newSession()
    session.conf.set("spark.sql.adaptive.enabled", "false")
    # What AQE's coalescing would leave of the shuffle partitions: one per core. The
    # aggregated rows are few, and each shuffle partition writes a file per output.
    session.conf.set("spark.sql.shuffle.partitions", str(max(1, spark.sparkContext.defaultParallelism)))
    return session


# A file split of at most this many bytes combines in one Spark partition (see below):
# Spark's own cost of opening a file (spark.sql.files.openCostInBytes' default), under
# which its scan packs a file into one partition anyway.
SMALL_SPLIT_BYTES = 4 << 20


def small_split_in_one_partition(df: DataFrame, operators: list[dict[str, Any]], size: int) -> DataFrame:
    """A small split read in one Spark partition when the chain combines it (a partial
    aggregate): the aggregate then needs no shuffle, and the split is one Spark stage of
    one task (scan, combine, write) instead of two stages (a 1 MB word count's source
    subtask: 7-19 % shorter, 12-18 % less CPU; benchmarks/README.md round 38). Its rows
    are the same: the partial aggregate's result does not depend on how the split was
    cut. Larger splits keep the scan's parallelism."""
    combines = any(spec.get("op") == "aggregate" and spec.get("phase") == "partial" for spec in operators)
    return df.coalesce(1) if combines and size <= SMALL_SPLIT_BYTES else df


def _counted(df: DataFrame) -> tuple[DataFrame, Callable[[], int]]:
    """`df` with a row count that Spark computes during the first action run on it (an
    Observation: no job of its own), and a function reading it once that action is done.

    Call the function only after an action ran: on a classic session it blocks until
    one has. The count is best effort: 0 when Spark optimised the counted rows away
    (e.g. a filter it knows to be false), never a failed task.
    """
    from pyspark.sql import functions as F  # noqa: N812

    if type(df).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect.observation import Observation
    else:
        from pyspark.sql.observation import Observation
    # Not Observation(): it picks the Connect class whenever any Connect session runs in
    # this process, and a classic DataFrame refuses that one.
    observation = object.__new__(Observation)
    observation.__init__()
    observed = df.observe(observation, F.count(F.lit(1)).alias("rows"))

    def rows() -> int:
        try:
            return int(observation.get.get("rows") or 0)
        except Exception:
            log.debug("no row count observed", exc_info=True)
            return 0

    return observed, rows
