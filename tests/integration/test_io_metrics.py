"""I/O metrics of a real job: counted by the Spark tasks, reported with FINISHED, summed per vertex.

The word count reads 4 files, each its own split (split_size=1), each holding every one
of 5 words at least once, so every count is known up front:

    source: 0 records in (it reads files, not partitions), the files' bytes in,
            4 splits x 5 distinct words = 20 partial counts out;
    sink:   the 20 partial counts in, 5 final counts out.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flink_runtime.client import JobClient
from flink_runtime.executiongraph import graph_io_metrics, subtask_io_metrics
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline

pytestmark = pytest.mark.integration

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]
FILES = 4


def write_input(directory: Path) -> int:
    directory.mkdir()
    for index in range(FILES):
        # Every word in every file, some more than once; 7 lines per file.
        lines = [" ".join(WORDS)] + [" ".join(WORDS[: 1 + (index + n) % len(WORDS)]) for n in range(6)]
        (directory / f"part-{index}.txt").write_text("\n".join(lines) + "\n")
    return sum(path.stat().st_size for path in directory.iterdir())


def test_word_count_reports_known_record_and_byte_counts(minicluster: MiniCluster, tmp_path: Path) -> None:
    input_bytes = write_input(tmp_path / "in")
    out = tmp_path / "out"
    pipeline = Pipeline("io metrics word count", parallelism=2)
    (
        pipeline.read_text(str(tmp_path / "in" / "*.txt"), split_size=1)
        .select("explode(split(value, ' ')) AS word")
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(out), mode="overwrite")
    )
    started = time.monotonic()
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        assert client.wait(job_id, timeout=120).value == "FINISHED"
    print(f"io metrics word count: {time.monotonic() - started:.2f} s")

    job = minicluster.jobmanager.jobs[job_id]
    assert job.graph is not None
    (source_id, source), (sink_id, sink) = graph_io_metrics(job.graph).items()
    assert source.complete and sink.complete

    assert source.metrics.records_in == 0
    assert source.metrics.bytes_in == input_bytes
    assert source.metrics.records_out == FILES * len(WORDS)
    assert source.metrics.bytes_out > 0

    assert sink.metrics.records_in == FILES * len(WORDS)
    assert sink.metrics.bytes_in == source.metrics.bytes_out  # every subpartition read once
    assert sink.metrics.records_out == len(WORDS)
    published = [p for p in out.iterdir() if not p.name.startswith(("_", "."))]
    assert sink.metrics.bytes_out == sum(p.stat().st_size for p in published)

    assert source.metrics.busy_ms > 0 and sink.metrics.busy_ms > 0
    # Per subtask: the vertex is the sum of its subtasks.
    subtasks = [subtask_io_metrics(v).metrics for v in job.graph.vertices[sink_id].task_vertices]
    assert sum(m.records_out for m in subtasks) == len(WORDS)
    assert all(e.current_execution.io_metrics is not None for e in job.graph.vertices[source_id].task_vertices)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_sink_counts_its_rows_from_its_footers_or_during_its_write(
    minicluster: MiniCluster, tmp_path: Path, fmt: str
) -> None:
    """A map-only job writes straight to its sink: a Parquet sink's rows are read from the
    files' footers, a CSV sink's (whose files say nothing of them) counted by Spark during
    the write; both the same."""
    write_input(tmp_path / "in")
    out = tmp_path / "out"
    pipeline = Pipeline(f"io metrics {fmt} sink", parallelism=2)
    words = pipeline.read_text(str(tmp_path / "in" / "*.txt")).select("explode(split(value, ' ')) AS word")
    getattr(words.filter("word != 'alpha'"), f"write_{fmt}")(str(out), mode="overwrite")
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(pipeline.job_graph())
        assert client.wait(job_id, timeout=120).value == "FINISHED"
    job = minicluster.jobmanager.jobs[job_id]
    assert job.graph is not None
    [(_, vertex)] = graph_io_metrics(job.graph).items()
    text = "".join(path.read_text() for path in sorted((tmp_path / "in").iterdir()))
    expected = sum(1 for word in text.split() if word != "alpha")
    assert vertex.complete and vertex.metrics.records_out == expected
