"""How long building an ExecutionGraph takes, and how much memory it needs.

Two jobs, each a source and a sink of parallelism 10,000:

- ALL_TO_ALL: the target is <= 600 ms and <= 64 MiB of extra
  memory; Flink 1.14 builds this graph in 627 ms.
- POINTWISE: reported against the same targets for comparison.

Build time is measured in this process (min and median of several runs, the
previous graph freed first). Memory is measured in a fresh child process per job,
because freed memory stays in the allocator's arenas and would hide the RSS growth
of later runs: the child reports the RSS delta of one build, then the tracemalloc
peak of a second build (tracemalloc slows building, so it never runs while timing).

Usage: .venv/bin/python benchmarks/bench_executiongraph.py [--runs N] [--parallelism P]
Always exits 0; read PASS/FAIL in the output.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
import tracemalloc

import psutil

from flink_runtime.executiongraph import ExecutionGraph
from flink_runtime.jobgraph.jobgraph import DistributionPattern, JobGraph, JobVertex, new_job_id

TARGET_MS = 600.0
TARGET_MIB = 64.0
MIB = 1024 * 1024


def two_vertex_job(parallelism: int, pattern: DistributionPattern) -> JobGraph:
    graph = JobGraph(
        name=f"bench-{pattern.value.lower()}",
        job_id=new_job_id(),
        vertices=[
            JobVertex(id="source", name="Source", invokable="noop", parallelism=parallelism),
            JobVertex(id="sink", name="Sink", invokable="noop", parallelism=parallelism),
        ],
    )
    graph.connect("source", "sink", distribution_pattern=pattern)
    return graph


def time_builds(job: JobGraph, runs: int) -> list[float]:
    timings = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        graph = ExecutionGraph(job)
        timings.append((time.perf_counter() - start) * 1000)
        del graph
    return timings


def measure_memory(job: JobGraph) -> dict[str, float]:
    """Run in a fresh process: RSS delta of one build, then tracemalloc peak of another."""
    process = psutil.Process()
    gc.collect()
    rss_before = process.memory_info().rss
    first = ExecutionGraph(job)
    rss_delta = (process.memory_info().rss - rss_before) / MIB

    gc.collect()
    tracemalloc.start()
    second = ExecutionGraph(job)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del first, second
    return {"rss_delta_mib": rss_delta, "tracemalloc_peak_mib": peak / MIB}


def memory_in_child(parallelism: int, pattern: DistributionPattern) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--child", pattern.value, "--parallelism", str(parallelism)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parallelism", type=int, default=10_000)
    parser.add_argument("--child", choices=[p.value for p in DistributionPattern], help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        job = two_vertex_job(args.parallelism, DistributionPattern(args.child))
        print(json.dumps(measure_memory(job)))
        return 0

    p = args.parallelism
    python = sys.version.split()[0]
    print(f"ExecutionGraph build: 2 vertices x parallelism {p:,}, {args.runs} runs, Python {python}")
    print(f"targets: <= {TARGET_MS:.0f} ms, <= {TARGET_MIB:.0f} MiB extra memory (Flink 1.14: 627 ms)\n")
    for pattern in (DistributionPattern.ALL_TO_ALL, DistributionPattern.POINTWISE):
        job = two_vertex_job(p, pattern)
        timings = time_builds(job, args.runs)
        memory = memory_in_child(p, pattern)
        fastest, median = min(timings), statistics.median(timings)
        worst_mib = max(memory.values())
        print(f"{pattern.value} {p:,} x {p:,}")
        print(f"  build time   min {fastest:7.1f} ms   median {median:7.1f} ms   {verdict(median <= TARGET_MS)}")
        print(
            f"  memory       tracemalloc peak {memory['tracemalloc_peak_mib']:6.1f} MiB   "
            f"RSS delta {memory['rss_delta_mib']:6.1f} MiB   {verdict(worst_mib <= TARGET_MIB)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
