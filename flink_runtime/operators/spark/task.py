"""SparkTask: the invokable of every Pipeline API vertex (built-in name "spark").

Vertex config (see README, "JobGraph JSON for Spark vertices"):

    {"source":    {format, paths, options, schema, split_size}      # source vertices
     "operators": [{"op": "select", ...}, ...]                      # the chain
     "sink":      {format, path, mode, options}}                    # sink vertices

On the JobManager, `prepare_on_master` lists the input files into splits and resolves
the whole chain against the input schemas on empty DataFrames, so a missing path, an
unknown column or invalid SQL refuses the job at submit; the resolved schemas travel
to the tasks in the vertex config. In the TaskManager, a source subtask pulls splits
one at a time and runs the chain on each; any other subtask reads its subpartition of
every input. The result goes to the vertex's result partitions (Parquet) and/or its
sink's staging directory.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, ClassVar

from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.io.partitions import partition_dirs
from flink_runtime.operators.spark import io
from flink_runtime.operators.spark.chain import apply_operators, combine_inputs
from flink_runtime.operators.spark.session import TaskScope
from flink_runtime.pipeline.pipeline import parse_size
from flink_runtime.taskmanager.invokable import AbstractInvokable, MasterContext, Prepared

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from flink_runtime.jobgraph.jobgraph import JobVertex

log = logging.getLogger(__name__)

# Vertex config key under which the JobManager hands the resolved schemas to the tasks.
RESOLVED = "__resolved__"
DEFAULT_SPLIT_SIZE = 128 << 20


class SparkTask(AbstractInvokable):
    writes_own_partitions: ClassVar[bool] = True

    # -- on the JobManager ------------------------------------------------------------------

    @classmethod
    def prepare_on_master(cls, vertex: JobVertex, inputs: list[Any], context: MasterContext) -> Prepared:
        from flink_runtime.operators.spark.plan import resolve_vertex

        config = vertex.config
        splits = []
        files: list[str] = []
        if "source" in config:
            source = config["source"]
            statuses = io.list_source_files(source)
            files = [status.path for status in statuses]
            split_size = parse_size(source.get("split_size") or DEFAULT_SPLIT_SIZE)
            splits = io.file_splits(statuses, split_size, vertex.parallelism)
        if "sink" in config:
            io.check_sink_target(config["sink"])
        resolved, output_schema = resolve_vertex(context.spark(), config, inputs, files)
        return Prepared(splits=splits, config={RESOLVED: resolved}, output=output_schema)

    @classmethod
    def on_job_terminal(cls, vertex: JobVertex, prepared: Prepared, context: MasterContext, status: JobStatus) -> None:
        sink = vertex.config.get("sink")
        if sink is None:
            return
        if status is JobStatus.FINISHED:
            published = io.publish_sink(sink, context.job_id, vertex.parallelism)
            log.info("Published %d files of %s to %s", published, vertex.name, sink["path"])
        else:
            io.discard_sink_staging(sink, context.job_id)

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
                schema = io.schema_from_json(resolved["source_schema"])
                for split in env.input_splits():
                    df = io.read_source(spark, config["source"], split.payload["files"], schema)
                    self._emit(apply_operators(spark, df, operators))
                    env.check_cancelled()
            else:
                inputs = [
                    io.read_gate(spark, gate, io.schema_from_json(schema))
                    for gate, schema in zip(env.input_gates, resolved["input_schemas"], strict=True)
                ]
                df, rest = combine_inputs(inputs, operators)
                self._emit(apply_operators(spark, df, rest))
            env.check_cancelled()
            if "sink" in config:
                io.commit_sink_attempt(config["sink"], env.job_id, env.execution_id, env.subtask_index)

    def _emit(self, df: DataFrame) -> None:
        env = self.environment
        for partition in env.produced_partitions:
            staging, _ = partition_dirs(
                env.data_dir, env.job_id, partition.result_id, partition.partition_number, env.execution_id
            )
            io.write_partition(df, partition, staging)
        if "sink" in env.config:
            io.write_sink_attempt(df, env.config["sink"], env.job_id, env.execution_id)

    def cancel(self) -> None:
        scope = getattr(self, "_scope", None)
        if scope is not None:
            scope.cancel()
