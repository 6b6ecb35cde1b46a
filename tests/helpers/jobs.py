"""JobGraphs of the built-in invokables that several test modules run."""

from __future__ import annotations

from pathlib import Path

from flink_runtime.jobgraph import JobGraph, JobVertex, Partitioner


def modulo_sum_job(out: Path, count: int = 1000, modulo: int = 3, name: str = "modulo sum") -> JobGraph:
    """numbers (2 subtasks, 5 splits) --hash(key)--> sum (2) --rebalance--> sink writing to `out`."""
    graph = JobGraph(
        name=name,
        vertices=[
            JobVertex(
                id="src",
                name="Numbers",
                invokable="number-source",
                parallelism=2,
                config={"count": count, "splits": 5, "modulo": modulo},
            ),
            JobVertex(id="sum", name="Sum", invokable="modulo-sum", parallelism=2),
            JobVertex(id="sink", name="Sink", invokable="collect-sink", config={"path": str(out)}),
        ],
    )
    graph.connect("src", "sum", partitioner=Partitioner.HASH, keys=["key"])
    graph.connect("sum", "sink", partitioner=Partitioner.REBALANCE)
    return graph


def sleep_job(seconds: float = 30.0, name: str = "sleeper") -> JobGraph:
    return JobGraph(
        name=name,
        vertices=[JobVertex(id="zzz", name="Sleep", invokable="sleep", config={"seconds": seconds})],
    )


def flaky_job(name: str = "flaky") -> JobGraph:
    """One subtask (vertex "flaky") whose first attempt fails with "flaky on purpose"; the
    restart strategy runs a second attempt, which finishes."""
    graph = JobGraph(
        name=name,
        vertices=[
            JobVertex(id="flaky", name="Flaky", invokable="fail", config={"attempts": 1, "message": "flaky on purpose"})
        ],
    )
    graph.config.update({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "100 ms"})
    return graph
