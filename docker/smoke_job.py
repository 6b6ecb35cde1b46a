"""The demo word count, run through a compose stack (scripts/docker-smoke.sh pipes this in):

    docker exec -i <jobmanager container> python - < docker/smoke_job.py

Inside the JobManager's container it writes the demo's corpus to the shared /data
volume, submits `flink_runtime.demo`'s word count to the JobManager's REST API with the
cluster's token (the TaskManagers in their own containers run it, with their own Spark),
waits for it, reads the Parquet output with pyarrow and compares every count with a
plain Python count. Exit 0 only for FINISHED with exactly the right counts.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from flink_runtime import configuration as cfg
from flink_runtime.client import JobClient
from flink_runtime.configuration import Configuration
from flink_runtime.demo import expected_counts, generate_corpus, word_count
from flink_runtime.security import rest_token

WORK = Path("/data/smoke")


def main() -> int:
    config = Configuration.load()  # FLINK_PROPERTIES, as the JobManager read it
    input_dir, output_dir = WORK / "input", WORK / "output"
    shutil.rmtree(WORK, ignore_errors=True)
    # A quarter of `make demo`'s corpus (10 files, 1.1 MiB, 5 input splits): the same
    # pipeline, with fewer Spark jobs on a machine that also runs the rest of the stack.
    generate_corpus(input_dir, files=10)
    rest_url = f"http://127.0.0.1:{config.get(cfg.REST_PORT)}"
    with JobClient(rest_url, token=rest_token(config)) as client:
        print(f"TaskManagers registered: {sorted(tm['id'] for tm in client.taskmanagers())}")
        started = time.monotonic()
        job_id = client.submit(word_count(input_dir, output_dir, name="docker smoke word count").job_graph())
        final = client.wait(job_id, timeout=600)
        elapsed = time.monotonic() - started
        if final.value != "FINISHED":
            print(f"error: job {job_id} ended {final.value}: {client.exceptions(job_id)['root-exception']}")
            return 1
    table = pq.read_table(output_dir, columns=["word", "count"]).to_pydict()
    counts = dict(zip(table["word"], table["count"], strict=True))
    expected = dict(expected_counts(input_dir))
    if counts != expected:
        wrong = sorted(set(counts.items()) ^ set(expected.items()))[:5]
        print(f"error: {len(counts)} words counted, {len(expected)} expected; first differences: {wrong}")
        return 1
    print(f"job {job_id} FINISHED in {elapsed:.1f} s: {len(counts)} words, {sum(counts.values())} in all, exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
