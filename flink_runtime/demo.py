"""`make demo-pipeline`: a real PySpark pipeline on the embedded default cluster (`make
demo` runs a word count through Airflow instead: airflow/demo.py).

Generates a small corpus of text files (deterministic), starts a MiniCluster (a
JobManager, its REST API and two TaskManagers sharing one SparkSession), and runs a
word count written with the Pipeline API:

    read_text (input splits pulled one at a time)
      -> explode/split/lower/filter, partial count        (chained, 2 subtasks)
      --hash(word)-->
    final count -> write_parquet (two-phase commit)       (2 subtasks)

It prints the JobStatusChanged events, the vertices, the top words and where the
output is, and checks the counts against plain Python.
"""

from __future__ import annotations

import collections
import random
import sys
import tempfile
import time
from pathlib import Path

from flink_runtime.client import JobClient
from flink_runtime.configuration import Configuration
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline

VOCABULARY = (
    "the of and to in is was he for it with as his on be at by had are but from or have an they which one you "
    "were her all she there would their we him been has when who will more no if out so said what up its about "
    "into than them can only other new some could time these two may then do first any my now such like our over"
).split()


def generate_corpus(directory: Path, files: int = 40, lines_per_file: int = 2_000, seed: int = 42) -> None:
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]  # Zipf-like, as real text
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        lines = (
            " ".join(w.capitalize() if rng.random() < 0.1 else w for w in rng.choices(VOCABULARY, weights, k=12))
            for _ in range(lines_per_file)
        )
        (directory / f"part-{index:03d}.txt").write_text("\n".join(lines) + "\n")


def word_count(input_dir: Path, output_dir: Path, split_size: str = "256k", name: str = "demo word count") -> Pipeline:
    pipeline = Pipeline(name, parallelism=2)
    (
        pipeline.read_text(str(input_dir / "*.txt"), split_size=split_size)
        .select("explode(split(lower(value), '\\\\s+')) AS word")
        .filter("word != ''")
        .key_by("word")
        .agg("count(*) AS count")
        .write_parquet(str(output_dir), mode="overwrite")
    )
    return pipeline


def expected_counts(input_dir: Path) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for path in sorted(input_dir.glob("*.txt")):
        counts.update(path.read_text().lower().split())
    return counts


def check_counts(counts: dict[str, int], input_dir: Path, output: Path) -> int:
    """Print the top words and compare every count with a plain Python count; the exit code."""
    print("Top words:")
    for word, count in sorted(counts.items(), key=lambda item: -item[1])[:8]:
        print(f"  {word:<10} {count:>8,}")
    print(f"Output ({len(counts)} words, Parquet): {output}")
    if counts != dict(expected_counts(input_dir)):
        print("error: the counts differ from a plain Python count", file=sys.stderr)
        return 1
    print("Counts match a plain Python count.")
    return 0


def main() -> int:
    work_dir = Path(tempfile.gettempdir()) / "flink-runtime-demo"
    input_dir, output_dir = work_dir / "input", work_dir / "output"
    generate_corpus(input_dir)
    size_mb = sum(p.stat().st_size for p in input_dir.glob("*.txt")) / 2**20
    print(f"Input: {len(list(input_dir.glob('*.txt')))} files, {size_mb:.1f} MiB in {input_dir}")

    config = Configuration({"io.tmp.dirs": str(work_dir / "partitions")})
    started = time.monotonic()
    with (
        MiniCluster(config, num_taskmanagers=2, slots_per_taskmanager=1) as cluster,
        JobClient(cluster.rest_url) as client,
    ):
        print(f"MiniCluster up in {time.monotonic() - started:.1f} s; REST API at {cluster.rest_url}")
        submitted = time.monotonic()
        job_id = client.submit(word_count(input_dir, output_dir).job_graph())
        print(f"Submitted job {job_id} (the first job also starts Spark)")
        final = client.wait(
            job_id,
            timeout=600,
            on_event=lambda e: print(f"  JobStatusChanged {e.old_state.value} -> {e.new_state.value}"),
        )
        elapsed = time.monotonic() - submitted
        for vertex in client.details(job_id)["vertices"]:
            print(f"  {vertex['name']}  x{vertex['parallelism']}  {vertex['status']}")
        if final.value != "FINISHED":
            print(client.exceptions(job_id)["root-exception"], file=sys.stderr)
            return 1
        spark = cluster.taskmanagers[0].spark()
        result = {row["word"]: row["count"] for row in spark.read.parquet(str(output_dir)).collect()}

    print(f"Job FINISHED in {elapsed:.1f} s.")
    return check_counts(result, input_dir, output_dir)


if __name__ == "__main__":
    sys.exit(main())
