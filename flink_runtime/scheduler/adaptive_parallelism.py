"""Deciding a vertex's parallelism from the data it reads: Flink's adaptive batch scheduling.

A vertex whose parallelism was not configured (JobVertex.parallelism_configured False:
the Pipeline API's vertices without set_parallelism) gets its parallelism when every
partition it reads is finished, from the bytes those hold: ceil(bytes / the average
volume per task), within [min-parallelism, its parallelism]
(`execution.batch.adaptive.auto-parallelism.*`, Flink's names and defaults). A 1 MB word
count's final aggregate then runs as one Spark job instead of two that contend for the
same two cores (issue 26: 183 against 250 ms), and its second slot stays free.

Its producers have already split their partitions for the upper bound (one subpartition
per subtask it could have), so the subtasks decided read contiguous runs of
subpartitions (wiring.subpartition_range): every key of a hash exchange still lands in
exactly one subtask. Which vertices qualify is deliberately narrow: Spark vertices (the
only invokable that reads runs of subpartitions, operators/spark/io.py) with inputs, all
over all-to-all edges and none of their outputs pointwise (whose wiring needs the
parallelism fixed), outside co-location groups. A source of the same kind is decided
before it starts, from its input splits: at most one subtask per split.

The decision is pure (`decided_parallelism`); `AdaptiveParallelism.decide` applies it to
the ExecutionGraph, where the JobMaster asks: when a finished partition completes a
vertex's inputs, and at start for inputs a savepoint restored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph import ExecutionGraph, ExecutionJobVertex
from flink_runtime.jobgraph.jobgraph import DistributionPattern, Partitioner

log = logging.getLogger(__name__)

# The built-in invokable of the Pipeline API's vertices (operators/spark/task.py).
SPARK_INVOKABLE = "spark"


def decided_parallelism(consumed_bytes: int | None, upper: int, lower: int, bytes_per_task: int) -> int:
    """ceil(consumed_bytes / bytes_per_task) within [lower, upper] (lower capped at upper);
    `upper` when the bytes are not known."""
    lower = min(max(1, lower), upper)
    if consumed_bytes is None:
        return upper
    wanted = -(-max(0, consumed_bytes) // max(1, bytes_per_task))
    return max(lower, min(upper, wanted))


def is_adaptive(ejv: ExecutionJobVertex) -> bool:
    """Whether the scheduler may still decide this vertex's parallelism (see the module);
    a source qualifies too (`AdaptiveParallelism.decide_sources`)."""
    job_vertex = ejv.job_vertex
    if ejv.parallelism_decided or job_vertex.invokable != SPARK_INVOKABLE or job_vertex.co_location_group:
        return False
    if any(edge.distribution_pattern is not DistributionPattern.ALL_TO_ALL for edge in ejv.input_edges):
        return False
    return all(
        result.edge is None or result.edge.distribution_pattern is DistributionPattern.ALL_TO_ALL
        for result in ejv.produced_results
    )


def consumed_bytes(ejv: ExecutionJobVertex) -> int | None:
    """What the vertex's inputs hold, a broadcast input once; None when a partition's
    size is not known (restored from a savepoint, or reported without it)."""
    total = 0
    for result in ejv.inputs:
        sizes = [partition.size_bytes for partition in result.partitions]
        if any(size < 0 for size in sizes):
            return None
        broadcast = result.edge is not None and result.edge.partitioner is Partitioner.BROADCAST
        total += max(sizes, default=0) if broadcast else sum(sizes)
    return total


class AdaptiveParallelism:
    """The JobMaster's side of it: decides the vertices of one job's graph, with the job's
    configuration, and tells `removed` how many subtasks each decision took away."""

    def __init__(
        self, config: Configuration, graph: Callable[[], ExecutionGraph | None], removed: Callable[[int], None]
    ) -> None:
        self.enabled = config.get(cfg.AUTO_PARALLELISM_ENABLED)
        self.min_parallelism = config.get(cfg.AUTO_PARALLELISM_MIN_PARALLELISM)
        self.bytes_per_task = config.get(cfg.AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK)
        self._graph = graph
        self._removed = removed

    def decide(self, ejv: ExecutionJobVertex, restored: int = 0) -> None:
        """Decide `ejv`'s parallelism if it is adaptive and every partition it reads is
        finished.

        `restored`: the parallelism a savepoint recorded for it, decided again as it was
        whatever the configuration says now: its finished subtasks' output covers the
        runs of subpartitions of that parallelism."""
        graph = self._graph()
        if graph is None or not is_adaptive(ejv) or not (self.enabled or restored) or not (ejv.inputs or restored):
            return
        upper = ejv.parallelism
        if restored:
            self._fix(graph, ejv, min(restored, upper), "as the restored progress recorded")
        elif all(result.all_partitions_finished for result in ejv.inputs):
            volume = consumed_bytes(ejv)
            parallelism = decided_parallelism(volume, upper, self.min_parallelism, self.bytes_per_task)
            self._fix(
                graph,
                ejv,
                parallelism,
                "its input's size not known" if volume is None else f"for {volume:,} bytes of input",
            )

    def decide_restored(self, parallelism: Mapping[str, int]) -> None:
        """Before a restore marks subtasks finished: the parallelism it recorded, by vertex id."""
        graph = self._graph()
        for vertex_id, restored in parallelism.items():
            if graph is not None and vertex_id in graph.vertices:
                self.decide(graph.vertices[vertex_id], restored)

    def decide_sources(self, splits: Mapping[str, int]) -> None:
        """At start, before any split is handed out: a source with fewer input splits than
        subtasks runs one subtask per split (Flink's dynamic source parallelism inference
        for batch jobs), so no subtask is deployed only to find nothing to read. `splits`:
        by vertex id, those of sources whose splits are all known now (not a continuous
        source's, whose rounds bring more; not a restored job's, whose savepoint may name
        subtasks the splits left no longer need)."""
        graph = self._graph()
        for vertex_id, count in splits.items():
            ejv = graph.vertices.get(vertex_id) if graph is not None else None
            if graph is None or ejv is None or ejv.inputs or not self.enabled or not is_adaptive(ejv):
                continue
            # A split is a task's worth: the same rule, in splits instead of bytes.
            parallelism = decided_parallelism(count, ejv.parallelism, self.min_parallelism, 1)
            self._fix(graph, ejv, parallelism, f"for {count} input split(s)")

    def _fix(self, graph: ExecutionGraph, ejv: ExecutionJobVertex, parallelism: int, why: str) -> None:
        upper = ejv.parallelism
        removed = graph.decide_parallelism(ejv, parallelism)
        log.info("Parallelism of %s (%s) decided: %d of at most %d, %s", ejv.name, ejv.id, parallelism, upper, why)
        if removed:
            self._removed(len(removed))

    def decide_ready(self) -> None:
        """Every vertex whose inputs are all finished already (restored whole)."""
        graph = self._graph()
        for ejv in graph.vertices.values() if graph is not None else ():
            self.decide(ejv)
