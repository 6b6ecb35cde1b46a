"""The word count on one host against three hosts (network namespaces), partitions over the network.

    sudo .venv/bin/python benchmarks/bench_multihost_wordcount.py [--size 1g] [--files N]
        [--work-dir /tmp/flink-runtime-bench] [--parallelism 3] [--runs 1] [--job wordcount|shuffle]

Needs root (ip netns). The text (`gen_text.py`, `--size` of it, 1 MiB files by
default) is generated under the work dir once and reused. Then two standalone
clusters run the same word count (read text -> explode(split(value, ' ')) ->
word != '' -> group by word, count -> Parquet), at the same parallelism:

- 1 host:  a JobManager and 1 TaskManager with `--parallelism` slots (Spark
           local[parallelism]) on loopback, partitions read in place;
- 3 hosts: a JobManager and 3 TaskManagers of `parallelism / 3` slots each, every
           process in a network namespace of its own with a private address, each
           TaskManager with a data directory of its own (a working directory of its
           own and the relative io.tmp.dirs `data`: namespaces share the filesystem,
           and this way the path a producer reports names another, empty folder on
           every other TaskManager), so every partition that crosses TaskManagers is
           fetched over the network from its producer
           (taskmanager.network.partition-serving: network).

`--job shuffle` instead sends every line through a rebalance exchange (then counts
lines by length): the shuffle is as large as the input, which measures what the
partition service moves, where the word count's pre-aggregated shuffle is small.

Each cluster first runs a tiny warm-up job (one file) so every TaskManager's Spark
session is up; then each timed run goes from submit to FINISHED. The outputs of both
are compared row for row. The three "hosts" share this machine's cores, so this
measures what the network path costs, not what more machines would gain.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from gen_text import generate, parse_size  # noqa: E402

from flink_runtime.client import JobClient  # noqa: E402
from flink_runtime.client.local_cluster import StandaloneCluster  # noqa: E402
from flink_runtime.pipeline import Pipeline  # noqa: E402
from tests.helpers import netns  # noqa: E402

SPARK = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
SECURITY = {"security.rest.token": "bench-token", "security.cluster.secret": "bench-secret"}
_FETCHED = re.compile(r"Fetched partition \S+ \((\d+) files, (\d+) bytes\) from \S+ in ([0-9.]+) s")


def word_count(text: Path, out: Path, parallelism: int, split_size: str, job: str = "wordcount") -> Any:
    pipeline = Pipeline(f"bench multihost {job}", parallelism=parallelism)
    lines = pipeline.read_text(str(text), split_size=split_size)
    if job == "shuffle":
        # Every line crosses the exchange: what the partition service moves at volume.
        lines.rebalance().select("length(value) AS length").key_by("length").agg("count(*) AS count").write_parquet(
            str(out), mode="overwrite"
        )
        return pipeline.job_graph()
    (
        lines.select("explode(split(value, ' ')) AS word")
        .filter("word != ''")
        .key_by("word")
        .agg("count(*) AS count")
        .write_parquet(str(out), mode="overwrite")
    )
    return pipeline.job_graph()


def run_jobs(cluster: StandaloneCluster, data: Path, work: Path, args: argparse.Namespace, label: str) -> list[float]:
    tiny = work / f"tiny-{label}"
    tiny.mkdir(parents=True, exist_ok=True)
    first = sorted((data / "text").glob("*.txt"))[0]
    (tiny / first.name).write_bytes(first.read_bytes())
    times = []
    with JobClient(cluster.rest_url, timeout=120, token=SECURITY["security.rest.token"]) as client:
        submit_and_wait(client, word_count(tiny, work / f"warmup-{label}", args.parallelism, args.split_size, args.job))
        for run in range(1, args.runs + 1):
            graph = word_count(data / "text", work / f"out-{label}", args.parallelism, args.split_size, args.job)
            seconds = submit_and_wait(client, graph)
            print(f"{label}: run {run}: {seconds:.1f} s", flush=True)
            times.append(seconds)
    return times


def submit_and_wait(client: JobClient, graph: Any) -> float:
    started = time.perf_counter()
    job_id = client.submit(graph)
    status = client.wait(job_id, timeout=7200)
    if status.value != "FINISHED":
        raise RuntimeError(f"{graph.name} ended {status.value}: {client.exceptions(job_id).get('root-exception')}")
    return time.perf_counter() - started


def one_host(data: Path, work: Path, args: argparse.Namespace) -> list[float]:
    properties = {**SPARK, **SECURITY, "spark.master": f"local[{args.parallelism}]"}
    with StandaloneCluster(work / "one-host", properties=properties) as cluster:
        cluster.start_jobmanager()
        cluster.start_taskmanager("tm-0", **{"taskmanager.numberOfTaskSlots": args.parallelism})
        return run_jobs(cluster, data, work, args, "1 host")


def three_hosts(data: Path, work: Path, args: argparse.Namespace) -> tuple[list[float], int, int, float]:
    slots = max(1, args.parallelism // 3)
    with netns.network(("jm", "tm1", "tm2", "tm3")) as net:
        jm = net.addresses["jm"]
        properties = {
            **SPARK,
            **SECURITY,
            "spark.master": f"local[{slots}]",
            "jobmanager.rpc.address": jm,
            "rest.bind-address": jm,
            "rest.address": jm,
            "io.tmp.dirs": str(work / "three-hosts" / "jm-data"),
        }
        with StandaloneCluster(work / "three-hosts", properties=properties, rest_host=jm) as cluster:
            cluster.start_jobmanager(prefix=net.prefix("jm"))
            for name in ("tm1", "tm2", "tm3"):
                home = work / "three-hosts" / name
                home.mkdir(parents=True, exist_ok=True)
                cluster.start_taskmanager(
                    name,
                    wait=False,
                    cwd=home,
                    prefix=net.prefix(name),
                    **{
                        "taskmanager.host": net.addresses[name],
                        "taskmanager.numberOfTaskSlots": slots,
                        "io.tmp.dirs": "data",
                    },
                )
            cluster.wait_for_taskmanagers(lambda ids: {"tm1", "tm2", "tm3"} <= ids, timeout=120)
            times = run_jobs(cluster, data, work, args, "3 hosts")
            fetched = [_FETCHED.findall(tm.log()) for tm in cluster.taskmanagers]
    files = sum(int(f) for log in fetched for f, _, _ in log)
    size = sum(int(b) for log in fetched for _, b, _ in log)
    seconds = sum(float(s) for log in fetched for _, _, s in log)
    return times, files, size, seconds


def same_counts(work: Path, job: str) -> bool:
    import pyarrow.parquet as pq

    key = "word" if job == "wordcount" else "length"
    tables = [pq.read_table(work / f"out-{label}").to_pydict() for label in ("1 host", "3 hosts")]
    counts = [dict(zip(t[key], t["count"], strict=True)) for t in tables]
    return counts[0] == counts[1] and len(counts[0]) > 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="1g", help="text to count, e.g. 200m, 1g (default 1g)")
    parser.add_argument("--files", type=int, default=None, help="files (default: one per MiB)")
    parser.add_argument("--work-dir", default="/tmp/flink-runtime-bench")
    parser.add_argument("--parallelism", type=int, default=3, help="subtasks per vertex (default 3)")
    parser.add_argument("--split-size", default="128m")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--job", choices=("wordcount", "shuffle"), default="wordcount")
    args = parser.parse_args()
    try:
        netns.check_available()
    except netns.NamespacesUnavailable as exc:
        sys.exit(f"cannot run the 3-host side: {exc}")
    size = parse_size(args.size)
    files = args.files or max(1, size >> 20)
    data = Path(args.work_dir) / f"multihost-{args.size}"
    generated = generate(data, size, files=files)
    print(f"data: {generated['text_bytes'] / 2**20:,.0f} MiB of text in {files} files under {data}", flush=True)
    work = Path(args.work_dir) / f"multihost-run-{args.job}-{args.size}"
    one = one_host(data, work, args)
    three, fetched_files, fetched_bytes, fetch_seconds = three_hosts(data, work, args)
    equal = same_counts(work, args.job)
    result = {
        "size": args.size,
        "parallelism": args.parallelism,
        "one_host_s": one,
        "three_hosts_s": three,
        "fetched_files": fetched_files,
        "fetched_bytes": fetched_bytes,
        "fetch_seconds": fetch_seconds,
        "job": args.job,
        "same_counts": equal,
    }
    (work / "results.json").write_text(json.dumps(result, indent=1))
    print()
    print(f"| setup | {args.job} of {args.size} (s) |")
    print("|---|---|")
    print(f"| 1 host: 1 TaskManager x {args.parallelism} slots | {', '.join(f'{t:.1f}' for t in one)} |")
    slots = max(1, args.parallelism // 3)
    print(f"| 3 namespaced hosts: 3 TaskManagers x {slots} slot(s) | {', '.join(f'{t:.1f}' for t in three)} |")
    rate = fetched_bytes / 2**20 / max(fetch_seconds, 1e-9)
    print(
        f"\npartitions fetched over the network: {fetched_files} files, {fetched_bytes / 2**20:,.1f} MiB "
        f"in {fetch_seconds:.1f} s of fetching ({rate:,.1f} MiB/s per fetching task)"
    )
    print(f"outputs identical: {equal}")
    if not equal:
        sys.exit(1)


if __name__ == "__main__":
    main()
