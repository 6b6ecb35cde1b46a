"""A source attempt removes the chunks its earlier attempts left unreported only once the
JobManager answered it (seed 6787 of tests/simulation): a superseded attempt whose
SubmitTask arrived late is refused at its first split request and must leave alone what
the current attempt of its subtask committed meanwhile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.invokable import COMPLETED_SPLITS_KEY, Environment
from flink_runtime.io.partitions import CHUNK_MANIFEST, partition_dir
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import Partitioner
from flink_runtime.operators.spark.task import RESOLVED, SparkTask
from flink_runtime.rpc.messages import ResultPartitionDeploymentDescriptor
from flink_runtime.rpc.service import RpcException

_NAMESPACE, _RESULT = "job-ns", "result-0"


class _Context:
    """Just what TaskScope touches on a classic local session (no JVM needed here)."""

    master = "local[1]"

    def clearJobTags(self) -> None:  # noqa: N802 - pyspark's names
        pass

    def addJobTag(self, tag: str) -> None:  # noqa: N802
        pass

    def removeJobTag(self, tag: str) -> None:  # noqa: N802
        pass

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802
        pass


class _Spark:
    sparkContext = _Context()  # noqa: N815


def _source_task(tmp_path: Path, next_split: Any, completed: list[int]) -> tuple[SparkTask, Path]:
    partition = ResultPartitionDeploymentDescriptor(
        partition_id="p0",
        result_id=_RESULT,
        partition_number=1,
        number_of_subpartitions=1,
        partitioner=Partitioner.FORWARD,
    )
    env = Environment(
        job_id="job",
        vertex_id="source",
        task_name="source (2/4)",
        subtask_index=1,
        parallelism=4,
        attempt_number=0,
        config={
            "source": {"paths": [str(tmp_path / "in")]},
            RESOLVED: {"source_schema": json.dumps({"type": "struct", "fields": []})},
            COMPLETED_SPLITS_KEY: completed,
        },
        job_config={},
        next_input_split=next_split,
        execution_id="exec-1-0",
        data_namespace=_NAMESPACE,
        data_dir=str(tmp_path / "data"),
        produced_partitions=[partition],
        spark=_Spark,
    )
    directory = Path(partition_dir(env.data_dir, _NAMESPACE, _RESULT, 1))
    for split in (2, 5):  # what the current attempt (exec-1-1) committed meanwhile
        (directory / f"split-{split}").mkdir(parents=True)
        (directory / f"split-{split}" / CHUNK_MANIFEST).write_text("{}")
    return SparkTask(env), directory


def test_a_refused_attempt_leaves_the_chunks_of_its_subtask(tmp_path: Path) -> None:
    def refused(completed: int | None = None) -> InputSplit | None:
        raise RpcException("execution exec-1-0 of job job is unknown: it must stop")

    task, directory = _source_task(tmp_path, refused, completed=[])
    with pytest.raises(RpcException, match="it must stop"):
        task.invoke()
    assert sorted(p.name for p in directory.iterdir()) == ["split-2", "split-5"]
    assert (directory / "split-2" / CHUNK_MANIFEST).is_file()


def test_an_answered_attempt_removes_the_unreported_chunks(tmp_path: Path) -> None:
    def none_left(completed: int | None = None) -> InputSplit | None:
        return None

    task, directory = _source_task(tmp_path, none_left, completed=[5])
    task.invoke()
    # split-2 was committed but never reported: another attempt redoes it, so it goes.
    assert not (directory / "split-2").exists()
    assert (directory / "split-5").is_dir()
