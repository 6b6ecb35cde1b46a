"""How long a cancel takes when a job is in the middle of a Spark stage.

    .venv/bin/python benchmarks/bench_cancel.py [--size 300m] [--runs 3] [--into 4]
        [--work-dir /tmp/flink-runtime-bench]

A MiniCluster of 1 TaskManager x 2 slots (Spark local[2]) runs a word count over
`--size` of generated text (benchmarks/gen_text.py) in splits so large that each
subtask's Spark stage runs for tens of seconds. `--into` seconds after both source
subtasks are RUNNING the job is cancelled; the figure is the time from the cancel
request to CANCELED (what an Airflow user waits after marking a task failed). Each
run also counts ERROR log records (a py4j traceback from an interrupted job would be
one) and how long the uncancelled stage would have run (a run without a cancel, once).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gen_text  # noqa: E402  (benchmarks/ is not a package)

from flink_runtime.client import JobClient  # noqa: E402
from flink_runtime.configuration import Configuration  # noqa: E402
from flink_runtime.demo import word_count  # noqa: E402
from flink_runtime.minicluster import MiniCluster  # noqa: E402


class ErrorCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def wait_until_sources_run(client: JobClient, job_id: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        details = client.details(job_id)
        source = details["vertices"][0]
        if source["tasks"].get("RUNNING", 0) == source["parallelism"]:
            return
        time.sleep(0.05)
    raise TimeoutError(f"the sources of job {job_id} never ran")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="300m")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--into", type=float, default=4.0, help="seconds into the stage before cancelling")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/flink-runtime-bench"))
    args = parser.parse_args()

    data = args.work_dir / f"cancel-{args.size}"
    gen_text.generate(data, gen_text.parse_size(args.size), files=2)
    errors = ErrorCounter()
    logging.getLogger().addHandler(errors)
    config = Configuration({"spark.master": "local[2]", "io.tmp.dirs": str(args.work_dir / "cancel-data")})
    with (
        MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as cluster,
        JobClient(cluster.rest_url) as client,
    ):
        # One split per file: each source subtask reads one whole file in one Spark stage.
        pipeline = word_count(data / "text", args.work_dir / "cancel-out", split_size="1g", name="cancel bench")
        started = time.monotonic()
        job_id = client.submit(pipeline.job_graph())
        wait_until_sources_run(client, job_id)
        ran_from = time.monotonic()
        assert client.wait(job_id, timeout=1800).value == "FINISHED"
        finished = time.monotonic()
        print(f"uncancelled: submit -> FINISHED {finished - started:.1f} s (sources ran {finished - ran_from:.1f} s)")

        latencies = []
        for run in range(1, args.runs + 1):
            before = len(errors.records)
            job_id = client.submit(pipeline.job_graph())
            wait_until_sources_run(client, job_id)
            time.sleep(args.into)
            requested = time.monotonic()
            client.cancel(job_id)
            state = client.wait(job_id, timeout=600)
            latency = time.monotonic() - requested
            latencies.append(latency)
            new_errors = [record.getMessage()[:120] for record in errors.records[before:]]
            print(f"run {run}: cancel -> {state.value} in {latency:.2f} s; ERROR records: {len(new_errors)}")
            for message in new_errors:
                print(f"    {message}")
    print(
        f"cancel latency {args.into:g} s into the stage: median {statistics.median(latencies):.2f} s, "
        f"max {max(latencies):.2f} s over {len(latencies)} runs"
    )


if __name__ == "__main__":
    main()
