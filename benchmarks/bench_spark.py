"""The runtime against plain PySpark: a word count and a group-by, same data, same 2 cores.

    .venv/bin/python benchmarks/bench_spark.py [--sizes 200m,1g] [--work-dir /tmp/flink-runtime-bench]
        [--split-size 128m] [--runs 2] [--files N] [--spark spark.key=value ...] [--wait-idle 60]

For each size, the data (`gen_text.py`: text for the word count, CSV for the group-by,
each of that size, in 1 MiB files by default) is generated under the work dir once
and reused. Then, each side in a fresh process of its own so the two JVMs never
compete for the 2 cores:

- plain: one SparkSession (local[2]) running the jobs directly;
- runtime: a MiniCluster of 1 TaskManager x 2 slots (Spark local[2]), the same jobs
  through the Pipeline API at parallelism 2, submitted with JobClient and timed from
  submit to FINISHED.

Both sides use the identical Spark settings: the runtime's defaults
(spark/session.py: FAIR scheduler, spark.sql.shuffle.partitions=8, AQE, serial GC)
plus spark.master=local[2]; `--spark key=value` adds to
both. Start-up (SparkSession; MiniCluster) and a tiny warm-up job (one file of each
data set, on both sides) are reported apart. Then word count and group-by run
alternately, `--runs` times each: run 1 is the first big job of a fresh process,
run 2 a warm repeat.

    word count: read text -> explode(split(value, ' ')) -> word != '' -> group by word,
                count -> Parquet (overwrite)
    group-by:   read CSV with schema -> group by (category, region): count, sum(amount),
                avg(amount) -> Parquet (overwrite)

The outputs of both sides are compared (word counts exactly, aggregates within 1e-9
relative), and the target is checked at 1 GB: runtime / plain <= 1.15 on
the warm run of each job.

The machine has 2 cores, so anything else running skews the times. A monitor samples
the CPU time of every other process during each run; the table's `busy` column shows
it, and a run where others used more than 5% of the CPU does not count for the target
(INCONCLUSIVE if no run is clean). `--wait-idle 60` waits before each side until the
machine has been idle for 60 s.

The runtime side also records each job's phase times (from /jobs/:id and
/jobs/:id/vertices/:vid: plan preparation, each subtask's span, sink publish) in the
JSON results (`<work dir>/results-<size>.json`); worker logs go to `<work dir>/logs/`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_text  # noqa: E402  (benchmarks/ is not a package)

DEFAULT_WORK_DIR = "/tmp/flink-runtime-bench"
CORES = 2
JOBS = ("wordcount", "groupby")
CSV_SCHEMA = "category STRING, region STRING, amount DOUBLE"
GROUP_KEYS = ["category", "region"]
TARGET_RATIO = 1.15
TARGET_SIZE = "1g"
RELATIVE_TOLERANCE = 1e-9
RESULT_PREFIX = "BENCH-RESULT "
WORKER_TIMEOUT = 3 * 3600  # seconds for one side of one size
# Other processes' share of the CPU above which a run does not count for the target.
BUSY_LIMIT = 0.05


# -- the jobs, as plain PySpark and as Pipelines ------------------------------------------------


def plain_job(spark: Any, job: str, data: Path, out: Path) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    if job == "wordcount":
        lines = spark.read.text(str(data / "text"))
        words = lines.select(F.explode(F.split("value", " ")).alias("word")).filter("word != ''")
        words.groupBy("word").count().write.mode("overwrite").parquet(str(out))
    else:
        rows = spark.read.schema(CSV_SCHEMA).option("header", "true").csv(str(data / "csv"))
        aggregates = [F.count("*").alias("n"), F.sum("amount").alias("total"), F.avg("amount").alias("mean")]
        rows.groupBy(*GROUP_KEYS).agg(*aggregates).write.mode("overwrite").parquet(str(out))


def pipeline_job(job: str, data: Path, out: Path, split_size: str, parallelism: int = CORES) -> Any:
    from flink_runtime.pipeline import Pipeline

    p = Pipeline(f"bench {job}", parallelism=parallelism)
    if job == "wordcount":
        words = (
            p.read_text(str(data / "text"), split_size=split_size)
            .select("explode(split(value, ' ')) AS word")
            .filter("word != ''")
        )
        words.key_by("word").agg("count(*) AS count").write_parquet(str(out), mode="overwrite")
    else:
        rows = p.read_csv(str(data / "csv"), schema=CSV_SCHEMA, header=True, split_size=split_size)
        rows.key_by(*GROUP_KEYS).agg("count(*) AS n", "sum(amount) AS total", "avg(amount) AS mean").write_parquet(
            str(out), mode="overwrite"
        )
    return p.job_graph()


def spark_settings(extra: dict[str, str]) -> dict[str, str]:
    """What both sides give Spark: local[2] and the extra settings, over the runtime's defaults."""
    from flink_runtime.spark.session import spark_properties

    return spark_properties({"spark.master": f"local[{CORES}]", **extra})


def warmup_data(data: Path, scratch: Path) -> Path:
    """One file of each data set, as a tiny data set of the same layout."""
    tiny = scratch / "warmup-data"
    for kind, suffix in (("text", ".txt"), ("csv", ".csv")):
        (tiny / kind).mkdir(parents=True, exist_ok=True)
        first = sorted((data / kind).glob(f"*{suffix}"))[0]
        target = tiny / kind / first.name
        if not target.exists():
            shutil.copyfile(first, target)
    return tiny


# -- the worker processes -----------------------------------------------------------------------


def run_plain(args: argparse.Namespace, extra: dict[str, str]) -> dict[str, Any]:
    from flink_runtime.spark.session import acquire_session, release_session

    data, out, scratch = Path(args.data), Path(args.out), Path(args.scratch)
    result: dict[str, Any] = {"side": "plain", "runs": []}
    started = time.perf_counter()
    # The runtime's own session factory: the same builder, environment and settings.
    spark = acquire_session(spark_settings(extra), default_cores=CORES)
    result["session_start_s"] = time.perf_counter() - started
    result["spark_conf"] = {key: value for key, value in spark.sparkContext.getConf().getAll() if "spark." in key}
    try:
        tiny = warmup_data(data, scratch)
        started = time.perf_counter()
        for job in JOBS:
            plain_job(spark, job, tiny, scratch / f"warmup-{job}")
        result["warmup_s"] = time.perf_counter() - started
        for run in range(1, args.runs + 1):
            for job in JOBS:
                began, started = time.time(), time.perf_counter()
                plain_job(spark, job, data, out / job)
                seconds = time.perf_counter() - started
                result["runs"].append({"job": job, "run": run, "seconds": seconds, "window": [began, time.time()]})
                log(f"plain {job} run {run}: {seconds:.2f} s")
    finally:
        release_session()
    return result


def run_runtime(args: argparse.Namespace, extra: dict[str, str]) -> dict[str, Any]:
    from flink_runtime.client.job_client import JobClient
    from flink_runtime.configuration import Configuration
    from flink_runtime.minicluster import MiniCluster
    from flink_runtime.spark.session import acquire_session, release_session

    data, out, scratch = Path(args.data), Path(args.out), Path(args.scratch)
    result: dict[str, Any] = {"side": "runtime", "runs": []}
    config = Configuration(
        {
            **spark_settings(extra),
            "io.tmp.dirs": str(scratch / "runtime-data"),
            "blob.storage.directory": str(scratch / "runtime-blobs"),
        }
    )
    started = time.perf_counter()
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=CORES) as cluster:
        result["cluster_start_s"] = time.perf_counter() - started
        # The JobManager and the TaskManager would start the process's session on first
        # use; starting it here, with the cluster's configuration, times it apart.
        started = time.perf_counter()
        spark = acquire_session(cluster.config.to_dict(), default_cores=CORES)
        result["session_start_s"] = time.perf_counter() - started
        result["spark_conf"] = {key: value for key, value in spark.sparkContext.getConf().getAll() if "spark." in key}
        try:
            with JobClient(cluster.rest_url, timeout=60) as client:
                tiny = warmup_data(data, scratch)
                started = time.perf_counter()
                for job in JOBS:
                    submit_and_wait(client, pipeline_job(job, tiny, scratch / f"warmup-{job}", args.split_size))
                result["warmup_s"] = time.perf_counter() - started
                for run in range(1, args.runs + 1):
                    for job in JOBS:
                        graph = pipeline_job(job, data, out / job, args.split_size)
                        began = time.time()
                        seconds, job_id = submit_and_wait(client, graph)
                        window = [began, time.time()]
                        profile = job_profile(client, job_id)
                        result["runs"].append(
                            {"job": job, "run": run, "seconds": seconds, "window": window, "profile": profile}
                        )
                        log(f"runtime {job} run {run}: {seconds:.2f} s ({describe_profile(profile)})")
        finally:
            release_session()
    return result


def submit_and_wait(client: Any, graph: Any) -> tuple[float, str]:
    started = time.perf_counter()
    job_id = client.submit(graph)
    status = client.wait(job_id, timeout=3600)
    seconds = time.perf_counter() - started
    if status.value != "FINISHED":
        raise RuntimeError(f"job {graph.name} ended {status.value}: {client.exceptions(job_id).get('root-exception')}")
    return seconds, job_id


def job_profile(client: Any, job_id: str) -> dict[str, Any]:
    """Where a job's time went, in seconds from its submission (INITIALIZING)."""
    import httpx

    details = client.details(job_id)
    stamps = {state: ms / 1000 for state, ms in details["timestamps"].items() if ms > 0}
    origin = stamps["INITIALIZING"]
    vertices = []
    for vertex in details["vertices"]:
        subtasks = httpx.get(f"{client.rest_url}/jobs/{job_id}/vertices/{vertex['id']}", timeout=30).json()["subtasks"]
        vertices.append(
            {
                "id": vertex["id"],
                "name": vertex["name"],
                "start": vertex["start-time"] / 1000 - origin,
                "end": vertex["end-time"] / 1000 - origin,
                "subtasks": [
                    {"start": s["start-time"] / 1000 - origin, "end": s["end-time"] / 1000 - origin} for s in subtasks
                ],
            }
        )
    last_task_end = max(vertex["end"] for vertex in vertices)
    return {
        # Listing splits and resolving the plan on the JobManager.
        "prepare_s": stamps["RUNNING"] - origin,
        "vertices": vertices,
        # From the last subtask's end to FINISHED: the sinks' publish (rename into place).
        "finalize_s": stamps["FINISHED"] - origin - last_task_end,
        "total_s": stamps["FINISHED"] - origin,
    }


def describe_profile(profile: dict[str, Any]) -> str:
    parts = [f"prepare {profile['prepare_s']:.2f}"]
    for vertex in profile["vertices"]:
        spans = ", ".join(f"{s['start']:.2f}-{s['end']:.2f}" for s in vertex["subtasks"])
        parts.append(f"{vertex['id']} [{spans}]")
    parts.append(f"finalize {profile['finalize_s']:.2f}")
    return "; ".join(parts)


def worker_main(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # py4j logs from ClientServerConnection.__del__ at INFO; at interpreter exit that can
    # run while a dead daemon thread holds the logging lock, and the process never ends.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    extra = dict(item.split("=", 1) for item in args.spark)
    result = run_plain(args, extra) if args.worker == "plain" else run_runtime(args, extra)
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    sys.stderr.flush()
    # Everything is stopped and reported: skip the finalizers (the same hang, other paths).
    os._exit(0)


# -- the driver -----------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def start_worker(side: str, data: Path, out: Path, scratch: Path, args: argparse.Namespace, log_file: Path) -> dict:
    command = [
        sys.executable,
        __file__,
        "--worker",
        side,
        "--data",
        str(data),
        "--out",
        str(out),
        "--scratch",
        str(scratch),
        "--runs",
        str(args.runs),
        "--split-size",
        args.split_size,
    ]
    for item in args.spark:
        command += ["--spark", item]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log(f"{side}: starting a worker process (log {log_file})")
    with open(log_file, "w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        with CpuMonitor(process.pid) as monitor:
            try:
                stdout, _ = process.communicate(timeout=WORKER_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, _ = process.communicate()
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if process.returncode != 0 or not lines:
        tail = log_file.read_text()[-3000:]
        raise RuntimeError(f"{side} worker failed (exit {process.returncode}); end of {log_file}:\n{tail}")
    result = json.loads(lines[-1][len(RESULT_PREFIX) :])
    result["cpu"] = monitor.summary()
    for run in result["runs"]:
        run["others_share"] = monitor.others_share(*run["window"])
    if result["cpu"]["others_share"] > BUSY_LIMIT:
        log(
            f"{side}: WARNING other processes used {result['cpu']['others_cpu_s']:.0f} CPU-s "
            f"({result['cpu']['others_share']:.0%} of the machine) during this run: the times are not clean"
        )
    return result


class CpuMonitor:
    """CPU seconds of the worker's process tree and of every other process, sampled each second.

    The machine has 2 cores and the benchmark wants both: anything else running
    (tests, another benchmark) skews the times, so the results say how much there was.
    """

    def __init__(self, root_pid: int, interval: float = 1.0) -> None:
        import threading

        self.root_pid = root_pid
        self.interval = interval
        self.ours = 0.0
        self.others = 0.0
        # (epoch time, CPU-s of other processes since the previous sample)
        self.samples: list[tuple[float, float]] = []
        self.started = time.monotonic()
        self.ended = self.started
        self._seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-monitor", daemon=True)

    def __enter__(self) -> CpuMonitor:
        self._sample(count=False)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.ended = time.monotonic()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample(count=True)

    def _sample(self, count: bool) -> None:
        import psutil

        me = os.getpid()
        others_before = self.others
        try:
            tree = {self.root_pid, *(child.pid for child in psutil.Process(self.root_pid).children(recursive=True))}
        except psutil.NoSuchProcess:
            tree = {self.root_pid}
        for process in psutil.process_iter(["pid", "cpu_times"]):
            times = process.info["cpu_times"]
            if times is None:
                continue
            total = times.user + times.system
            delta = total - self._seen.get(process.info["pid"], total if not count else 0.0)
            self._seen[process.info["pid"]] = total
            if not count or process.info["pid"] == me:
                continue
            if process.info["pid"] in tree:
                self.ours += delta
            else:
                self.others += delta
        if count:
            self.samples.append((time.time(), self.others - others_before))

    def others_share(self, start: float, end: float) -> float:
        """Share of the machine's CPU that other processes used between two epoch times."""
        used = sum(cpu for stamp, cpu in self.samples if start < stamp <= end + self.interval)
        return used / max((end - start + self.interval) * (os.cpu_count() or 1), 1e-9)

    def summary(self) -> dict[str, float]:
        wall = max(self.ended - self.started, 1e-9)
        capacity = wall * (os.cpu_count() or 1)
        return {
            "wall_s": wall,
            "ours_cpu_s": self.ours,
            "others_cpu_s": self.others,
            "others_share": self.others / capacity,
        }


def compare_outputs(job: str, plain_dir: Path, runtime_dir: Path) -> tuple[bool, str]:
    import numpy as np
    import pyarrow.parquet as pq

    plain = pq.read_table(plain_dir).to_pandas()
    runtime = pq.read_table(runtime_dir).to_pandas()
    keys = ["word"] if job == "wordcount" else GROUP_KEYS
    if len(plain) == 0:
        return False, "plain output is empty"
    if len(plain) != len(runtime):
        return False, f"{len(plain)} rows (plain) vs {len(runtime)} (runtime)"
    if sorted(plain.columns) != sorted(runtime.columns):
        return False, f"columns {sorted(plain.columns)} vs {sorted(runtime.columns)}"
    merged = plain.merge(runtime, on=keys, how="outer", suffixes=("_plain", "_runtime"), indicator=True)
    unmatched = int((merged["_merge"] != "both").sum())
    if unmatched:
        return False, f"{unmatched} keys only on one side"
    exact = ["count"] if job == "wordcount" else ["n"]
    for column in exact:
        differ = int((merged[f"{column}_plain"] != merged[f"{column}_runtime"]).sum())
        if differ:
            return False, f"{differ} rows differ in {column}"
    if job == "groupby":
        for column in ("total", "mean"):
            close = np.isclose(merged[f"{column}_plain"], merged[f"{column}_runtime"], rtol=RELATIVE_TOLERANCE, atol=0)
            if not close.all():
                return False, f"{int((~close).sum())} rows differ in {column} beyond {RELATIVE_TOLERANCE:g}"
    what = f"{int(plain['count'].sum()):,} words" if job == "wordcount" else f"{int(plain['n'].sum()):,} rows"
    return True, f"{len(plain):,} keys, {what}"


def warm_page_cache(directory: Path) -> None:
    """Read every input file once, so neither side pays for the disk."""
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            with open(path, "rb") as file:
                while file.read(1 << 24):
                    pass


def bench_size(size: str, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work_dir)
    total = gen_text.parse_size(size)
    files = max(1, round(total / 2**20)) if args.files is None else args.files
    data = work / f"data-{size}"
    started = time.perf_counter()
    generated = gen_text.generate(data, total, files=files, seed=args.seed)
    how = "generated" if generated["generated"] else "reused"
    seconds = time.perf_counter() - started
    log(
        f"{size}: data {how} in {seconds:.1f} s: text {generated['text_bytes'] / 2**20:,.0f} MiB, "
        f"CSV {generated['csv_bytes'] / 2**20:,.0f} MiB, {files} files each, under {data}"
    )
    warm_page_cache(data)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    sizes = {key: generated[key] for key in ("text_bytes", "csv_bytes")}
    results: dict[str, Any] = {"size": size, "files": files, "data": sizes}
    for side in ("plain", "runtime"):
        scratch = work / "scratch" / side
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        wait_until_idle(args.wait_idle)
        results[side] = start_worker(
            side, data, work / "out" / size / side, scratch, args, work / "logs" / f"{size}-{side}.log"
        )
    results["checks"] = {}
    for job in JOBS:
        ok, detail = compare_outputs(job, work / "out" / size / "plain" / job, work / "out" / size / "runtime" / job)
        results["checks"][job] = {"ok": ok, "detail": detail}
    results["settings"] = {"split_size": args.split_size, "runs": args.runs, "spark": args.spark}
    (work / f"results-{size}.json").write_text(json.dumps(results, indent=1))
    return results


def report(all_results: list[dict[str, Any]]) -> bool:
    """Print the table and the verdicts; True when everything passed on a quiet machine."""
    print()
    print(f"{'size':>6} {'job':<10} {'run':>4} {'plain s':>9} {'runtime s':>10} {'ratio':>7} {'busy':>6}")
    verdicts: list[tuple[str, str]] = []
    for results in all_results:
        size = results["size"]
        plain = {(r["job"], r["run"]): r for r in results["plain"]["runs"]}
        runtime = {(r["job"], r["run"]): r for r in results["runtime"]["runs"]}
        last_run = max(run for _, run in plain)
        for job in JOBS:
            clean_ratios = {}
            for run in range(1, last_run + 1):
                p, r = plain[(job, run)], runtime[(job, run)]
                ratio = r["seconds"] / p["seconds"]
                busy = max(p["others_share"], r["others_share"])
                label = "1st" if run == 1 else ("warm" if run == last_run else str(run))
                flag = " !" if busy > BUSY_LIMIT else ""
                print(
                    f"{size:>6} {job:<10} {label:>4} {p['seconds']:9.2f} {r['seconds']:10.2f} {ratio:7.2f} "
                    f"{busy:6.0%}{flag}"
                )
                if busy <= BUSY_LIMIT:
                    clean_ratios[run] = ratio
            if size == TARGET_SIZE:
                verdicts.append(_verdict(job, size, clean_ratios, last_run))
    print(f"{'':>6} busy: CPU share other processes used during the run (! above {BUSY_LIMIT:.0%}: not a clean run)")
    print()
    for results in all_results:
        plain, runtime = results["plain"], results["runtime"]
        print(
            f"{results['size']:>6} start-up: plain SparkSession {plain['session_start_s']:.1f} s "
            f"(+ warm-up jobs {plain['warmup_s']:.1f} s); runtime MiniCluster {runtime['cluster_start_s']:.1f} s "
            f"+ SparkSession {runtime['session_start_s']:.1f} s (+ warm-up jobs {runtime['warmup_s']:.1f} s)"
        )
    print()
    passed = True
    for results in all_results:
        for job, check in results["checks"].items():
            passed &= check["ok"]
            print(f"correctness {results['size']} {job}: {'PASS' if check['ok'] else 'FAIL'} ({check['detail']})")
    for text, outcome in verdicts:
        passed &= outcome == "PASS"
        print(f"target runtime / plain <= {TARGET_RATIO} {text}: {outcome}")
    if not verdicts:
        print(f"target: not checked (no {TARGET_SIZE} size in --sizes)")
    return passed


def _verdict(job: str, size: str, clean_ratios: dict[int, float], last_run: int) -> tuple[str, str]:
    """Judged on the warm (last) run; on the latest clean run if that one was disturbed."""
    if not clean_ratios:
        return f"{job} at {size}: no run without other load", "INCONCLUSIVE"
    run = max(clean_ratios)
    which = "warm run" if run == last_run else f"run {run}, the last clean one"
    ratio = clean_ratios[run]
    return f"{job} at {size} ({which}): {ratio:.2f}", "PASS" if ratio <= TARGET_RATIO else "FAIL"


def wait_until_idle(seconds: float, limit: float = 3600.0) -> None:
    """Wait (at most `limit` s) until the machine has been idle for `seconds`: a benchmark
    sharing 2 cores with anything else measures the other thing."""
    import psutil

    if seconds <= 0:
        return
    started = time.monotonic()
    quiet_since: float | None = None
    while time.monotonic() - started < limit:
        busy = psutil.cpu_percent(interval=2) / 100
        now = time.monotonic()
        if busy < BUSY_LIMIT:
            quiet_since = quiet_since or now - 2
            if now - quiet_since >= seconds:
                if now - started > seconds + 5:
                    log(f"machine idle after waiting {now - started:.0f} s")
                return
        else:
            quiet_since = None
    log(f"machine still busy after {limit:.0f} s; measuring anyway")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200m,1g", help="data sizes, comma-separated (default 200m,1g)")
    parser.add_argument(
        "--work-dir", default=DEFAULT_WORK_DIR, help=f"data, outputs and logs (default {DEFAULT_WORK_DIR})"
    )
    parser.add_argument("--split-size", default="128m", help="the runtime sources' split size (default 128m)")
    parser.add_argument("--runs", type=int, default=2, help="runs of each job per side (default 2)")
    parser.add_argument("--files", type=int, default=None, help="files per data set (default: one per MiB)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each side, wait until the machine has been idle this long (default 0: do not wait)",
    )
    parser.add_argument(
        "--spark", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for both sides (repeatable)"
    )
    # Internal: one side's worker process.
    parser.add_argument("--worker", choices=("plain", "runtime"), help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for item in args.spark:
        if "=" not in item or not item.startswith("spark."):
            parser.error(f"--spark takes spark.key=value, got {item!r}")
    if args.worker:
        worker_main(args)
        return
    all_results = [bench_size(size.strip(), args) for size in args.sizes.split(",") if size.strip()]
    passed = report(all_results)
    print(f"\nresults: {Path(args.work_dir)}/results-<size>.json; logs: {Path(args.work_dir)}/logs/")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
