"""The runtime against its peers on one word count: plain PySpark and PyFlink SQL.

    .venv/bin/python benchmarks/bench_peers.py [--sizes 200m,1g] [--files 100] [--runs 2]
        [--sides plain,runtime,pyflink] [--work-dir /tmp/flink-runtime-peers]

For each size the same Zipf text (gen_text.py, `--files` files) is generated once under
the work dir and read once into the page cache. Then each side runs in a fresh process
of its own, one after the other (never two JVMs at once on the 2 cores), and does the
word count `--runs` times: run 1 is cold (the first job once the side said it is
ready), the later runs warm.

- plain:   PySpark with its defaults: `SparkSession.builder.master("local[2]")`, nothing
           else set (shuffle partitions 200, AQE, G1); ready = the session exists;
- runtime: a MiniCluster of 1 TaskManager x 2 slots with the runtime's defaults, the
           Pipeline API at parallelism 2 with its default split size (the scheduler
           lowers it where the data is small: one source subtask per split, and the
           final aggregate's from the bytes it reads), timed from submit to FINISHED;
           ready = the MiniCluster answers;
- pyflink: Flink SQL in batch mode (the `apache-flink` wheel of tests/flink_tools.py,
           in its virtualenv under ~/.cache/flink-runtime), parallelism 2, `raw` lines
           from the filesystem connector, CSV out; ready = the TableEnvironment exists.

    plain, runtime: read text -> explode(split(value, ' ')) -> word != '' -> group by word,
                    count -> Parquet
    pyflink:        SELECT word, COUNT(*) FROM lines CROSS JOIN UNNEST(SPLIT(line, ' '))
                    WHERE word <> '' GROUP BY word -> CSV

Reported per side: ready (start-up), each run, the process wall (launch to exit,
start-up and all runs included) and the CPU seconds of its process tree; the ratios
runtime / plain (cold, warm) and runtime / pyflink (process wall); for plain and the
runtime, the Spark jobs each run started. The last run's outputs of the three sides
are compared word for word and must be equal. The machine is shared: the `busy`
column is the CPU share other processes took while a side ran (bench_spark.CpuMonitor);
read the times with it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORES = 2
RESULT_PREFIX = "PEERS-RESULT "
SIDES = ("plain", "runtime", "pyflink")
WORKER_TIMEOUT = 3600


# -- the workers (each its own process) ------------------------------------------------------------


def spark_job_count() -> int:
    """Spark jobs this process's SparkContext has started so far (retained ones)."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    return len(context.statusTracker().getJobIdsForGroup()) if context is not None else 0


def tree_cpu_seconds() -> float:
    """CPU seconds this process and its descendants (the Spark JVM) used so far: steadier
    than wall time on a shared machine (a run's `cpu` phase)."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as file:
                    fields = file.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)], ticks[int(entry)] = int(fields[1]), int(fields[11]) + int(fields[12])
    tree = {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                changed = True
    return sum(ticks[pid] for pid in tree) / os.sysconf("SC_CLK_TCK")


def job_phases(rest_url: str, job_id: str, submitted: float, seen_done: float) -> dict[str, int]:
    """Where one run's wall went, in ms, from the REST timestamps: submit -> job start;
    per vertex (in plan order) the gap before its first subtask deployed, then
    DEPLOYING -> RUNNING (deployment) and RUNNING -> its last subtask FINISHED (the
    subtasks' work); the last vertex's end -> job FINISHED (the JobManager's terminal
    work: publishing the sink); job FINISHED -> the client saw it. The caller adds `cpu`."""
    import urllib.request

    def get(path: str) -> Any:
        with urllib.request.urlopen(rest_url.rstrip("/") + path, timeout=30) as response:
            return json.loads(response.read())

    details = get(f"/jobs/{job_id}")
    at = submitted * 1000
    phases = {"submit": details["start-time"] - at}
    at = details["start-time"]
    for index, vertex in enumerate(details["vertices"]):
        subtasks = get(f"/jobs/{job_id}/vertices/{vertex['id']}/subtasktimes")["subtasks"]
        deploying = min(s["timestamps"]["DEPLOYING"] for s in subtasks)
        running = max(s["timestamps"]["RUNNING"] for s in subtasks)
        finished = max(s["timestamps"]["FINISHED"] for s in subtasks)
        phases[f"v{index}-gap"] = deploying - at
        phases[f"v{index}-deploy"] = running - deploying
        phases[f"v{index}-run"] = finished - running
        at = finished
    phases["to-finished"] = details["end-time"] - at
    phases["client"] = seen_done * 1000 - details["end-time"]
    return {key: int(value) for key, value in phases.items()}


def plain_worker(text: Path, out: Path, runs: int) -> dict[str, Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.perf_counter()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812

    spark = SparkSession.builder.master(f"local[{CORES}]").appName("peers plain").getOrCreate()
    result: dict[str, Any] = {"ready_s": time.perf_counter() - started, "runs": [], "spark_jobs": []}
    for _run in range(1, runs + 1):
        jobs, started = spark_job_count(), time.perf_counter()
        lines = spark.read.text(str(text))
        words = lines.select(F.explode(F.split("value", " ")).alias("word")).filter("word != ''")
        words.groupBy("word").count().write.mode("overwrite").parquet(str(out))
        result["runs"].append(time.perf_counter() - started)
        result["spark_jobs"].append(spark_job_count() - jobs)
    spark.stop()
    return result


def runtime_worker(text: Path, out: Path, runs: int, scratch: Path) -> dict[str, Any]:
    started = time.perf_counter()
    from flink_runtime.client.job_client import JobClient
    from flink_runtime.configuration import Configuration
    from flink_runtime.minicluster import MiniCluster
    from flink_runtime.pipeline import Pipeline

    config = Configuration(
        {"io.tmp.dirs": str(scratch / "runtime-data"), "blob.storage.directory": str(scratch / "runtime-blobs")}
    )
    result: dict[str, Any] = {"runs": [], "spark_jobs": []}
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=CORES) as cluster:
        result["ready_s"] = time.perf_counter() - started
        with JobClient(cluster.rest_url, timeout=60) as client:
            for _run in range(1, runs + 1):
                p = Pipeline("peers word count", parallelism=CORES)
                words = p.read_text(str(text)).select("explode(split(value, ' ')) AS word").filter("word != ''")
                words.key_by("word").agg("count(*) AS count").write_parquet(str(out), mode="overwrite")
                jobs, started, submitted, cpu = spark_job_count(), time.perf_counter(), time.time(), tree_cpu_seconds()
                job_id = client.submit(p.job_graph())
                status = client.wait(job_id, timeout=WORKER_TIMEOUT)
                seen_done = time.time()
                result["runs"].append(time.perf_counter() - started)
                result["spark_jobs"].append(spark_job_count() - jobs)
                phases = job_phases(cluster.rest_url, job_id, submitted, seen_done)
                phases["cpu"] = int((tree_cpu_seconds() - cpu) * 1000)
                result.setdefault("phases", []).append(phases)
                print(f"run {_run} phases (ms): {result['phases'][-1]}", file=sys.stderr, flush=True)
                if status.value != "FINISHED":
                    raise RuntimeError(f"job ended {status.value}: {client.exceptions(job_id).get('root-exception')}")
    return result


def pyflink_worker(text: Path, out: Path, runs: int) -> dict[str, Any]:
    started = time.perf_counter()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    env.get_config().set("parallelism.default", str(CORES))
    env.execute_sql(
        f"CREATE TABLE lines (line STRING) WITH ('connector' = 'filesystem', 'path' = 'file://{text}', "
        "'format' = 'raw')"
    )
    env.execute_sql(
        f"CREATE TABLE counts (word STRING, n BIGINT) WITH ('connector' = 'filesystem', 'path' = 'file://{out}', "
        "'format' = 'csv')"
    )
    result: dict[str, Any] = {"ready_s": time.perf_counter() - started, "runs": []}
    query = (
        "INSERT OVERWRITE counts SELECT word, COUNT(*) FROM lines CROSS JOIN UNNEST(SPLIT(line, ' ')) AS w(word) "
        "WHERE word <> '' GROUP BY word"
    )
    for _run in range(1, runs + 1):
        started = time.perf_counter()
        env.execute_sql(query).wait()
        result["runs"].append(time.perf_counter() - started)
    return result


def worker_main(args: argparse.Namespace) -> None:
    text, out, scratch = Path(args.text), Path(args.out), Path(args.scratch)
    if args.worker == "plain":
        result = plain_worker(text, out, args.runs)
    elif args.worker == "runtime":
        result = runtime_worker(text, out, args.runs, scratch)
    else:
        result = pyflink_worker(text, out, args.runs)
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)  # skip finalizers: py4j's can hang at exit (bench_spark.worker_main)


# -- the driver ------------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pyflink_python() -> Path:
    sys.path.insert(0, str(HERE.parent / "tests"))
    import flink_tools  # tests/flink_tools.py: the cached apache-flink virtualenv (installed if missing)

    flink_tools.flink_home()
    return flink_tools.flink_python()


def run_side(side: str, text: Path, out: Path, scratch: Path, runs: int, log_file: Path) -> dict[str, Any]:
    from bench_spark import CpuMonitor

    python = str(pyflink_python()) if side == "pyflink" else sys.executable
    command = [python, __file__, "--worker", side, "--text", str(text), "--out", str(out), "--scratch", str(scratch)]
    command += ["--runs", str(runs)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log(f"{side}: starting (log {log_file})")
    started = time.perf_counter()
    with open(log_file, "w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        with CpuMonitor(process.pid) as monitor:
            stdout, _ = process.communicate(timeout=WORKER_TIMEOUT)
    wall = time.perf_counter() - started
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if process.returncode != 0 or not lines:
        raise RuntimeError(
            f"{side} failed (exit {process.returncode}); end of {log_file}:\n{log_file.read_text()[-3000:]}"
        )
    result = json.loads(lines[-1][len(RESULT_PREFIX) :])
    result["process_wall_s"] = wall
    cpu = monitor.summary()
    # Under load the wall times stretch; the process tree's own CPU seconds much less.
    result["busy"], result["cpu_s"] = cpu["others_share"], cpu["ours_cpu_s"]
    runs_text = " / ".join(f"{seconds:.1f}" for seconds in result["runs"])
    log(f"{side}: ready {result['ready_s']:.1f} s, runs {runs_text} s, process {wall:.1f} s")
    return result


def read_counts(side: str, directory: Path) -> dict[str, int]:
    if side == "pyflink":
        counts: dict[str, int] = {}
        for path in sorted(directory.rglob("*")):
            if path.is_file() and not path.name.startswith((".", "_")):
                with open(path, newline="") as file:
                    counts.update((word, int(n)) for word, n in csv.reader(file))
        return counts
    import pyarrow.parquet as pq

    table = pq.read_table(directory).to_pydict()
    return dict(zip(table["word"], table["count"], strict=True))


def bench_size(size: str, args: argparse.Namespace) -> dict[str, Any]:
    import gen_text
    from bench_spark import warm_page_cache

    work = Path(args.work_dir)
    data = work / f"data-{size}"
    generated = gen_text.generate(data, gen_text.parse_size(size), files=args.files, seed=args.seed)
    log(f"{size}: text {generated['text_bytes'] / 2**20:,.0f} MiB in {args.files} files under {data}")
    warm_page_cache(data / "text")
    (work / "logs").mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"size": size, "text_bytes": generated["text_bytes"], "files": args.files}
    for side in args.sides:
        out = work / "out" / size / side
        scratch = work / "scratch" / side
        scratch.mkdir(parents=True, exist_ok=True)
        results[side] = run_side(side, data / "text", out, scratch, args.runs, work / "logs" / f"{size}-{side}.log")
    reference = None
    for side in args.sides:
        counts = read_counts(side, work / "out" / size / side)
        results[side]["words"] = sum(counts.values())
        if reference is None:
            reference, results["equal"] = (side, counts), True
        elif counts != reference[1]:
            results["equal"] = False
            log(f"{size}: OUTPUTS DIFFER: {side} ({len(counts):,} words) vs {reference[0]} ({len(reference[1]):,})")
    (work / f"peers-{size}.json").write_text(json.dumps(results, indent=1))
    return results


def report(all_results: list[dict[str, Any]], sides: list[str]) -> None:
    for results in all_results:
        phases = results.get("runtime", {}).get("phases", [])[1:]
        if phases:
            medians = {key: sorted(p[key] for p in phases)[len(phases) // 2] for key in phases[0]}
            print(f"{results['size']:>6} runtime warm phases, median ms: {medians}")
    print()
    columns = f"{'ready s':>8} {'cold s':>7} {'warm s':>7} {'process s':>10} {'CPU s':>7} {'jobs':>9} {'busy':>5}"
    print(f"{'size':>6} {'side':<8} {columns}")
    for results in all_results:
        for side in sides:
            r = results[side]
            warm = f"{min(r['runs'][1:]):7.1f}" if len(r["runs"]) > 1 else f"{'-':>7}"
            jobs = "/".join(str(n) for n in r.get("spark_jobs", [])) or "-"
            print(
                f"{results['size']:>6} {side:<8} {r['ready_s']:8.1f} {r['runs'][0]:7.1f} {warm} "
                f"{r['process_wall_s']:10.1f} {r.get('cpu_s', 0):7.1f} {jobs:>9} {r['busy']:5.0%}"
            )
        ratios = []
        if "plain" in results and "runtime" in results:
            plain, runtime = results["plain"]["runs"], results["runtime"]["runs"]
            ratios.append(f"runtime/plain cold {runtime[0] / plain[0]:.2f}x")
            if len(plain) > 1:
                ratios.append(f"warm {min(runtime[1:]) / min(plain[1:]):.2f}x")
        if "pyflink" in results and "runtime" in results:
            ratio = results["runtime"]["process_wall_s"] / results["pyflink"]["process_wall_s"]
            ratios.append(f"runtime/pyflink process {ratio:.2f}x")
        equal = "outputs equal" if results["equal"] else "OUTPUTS DIFFER"
        print(f"{results['size']:>6} {', '.join(ratios)}; {equal} ({results[sides[0]]['words']:,} words)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200m,1g", help="text sizes, comma-separated (default 200m,1g)")
    parser.add_argument("--files", type=int, default=100, help="files per data set (default 100)")
    parser.add_argument("--runs", type=int, default=2, help="jobs per side: 1 cold, then warm (default 2)")
    parser.add_argument("--sides", default=",".join(SIDES), help="comma-separated, of plain,runtime,pyflink")
    parser.add_argument("--work-dir", default="/tmp/flink-runtime-peers")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--text", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args)
        return
    sys.path.insert(0, str(HERE))  # gen_text, bench_spark (benchmarks/ is not a package)
    args.sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    if unknown := set(args.sides) - set(SIDES):
        parser.error(f"unknown sides {sorted(unknown)}; choose from {', '.join(SIDES)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    all_results = [bench_size(size.strip(), args) for size in args.sizes.split(",") if size.strip()]
    report(all_results, args.sides)
    sys.exit(0 if all(results["equal"] for results in all_results) else 1)


if __name__ == "__main__":
    main()
