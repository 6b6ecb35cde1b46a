"""The driver JVM's GC options on a word count: wall time and GC time per option set.

Each option set runs in a fresh process of its own (one SparkSession, local[N]): session
start, then the word count `--runs` times (run 1 cold, the rest warm) over generated
text (gen_text.py), each reporting its wall time and the GC time the JVM's collectors
accumulated during it (GarbageCollectorMXBean.getCollectionTime, summed).

    .venv/bin/python benchmarks/bench_gc.py [--size 200m] [--cores 2] [--memory 1g] [--runs 2]
        [--options=-XX:+UseSerialGC --options=-XX:+UseG1GC ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_text  # noqa: E402  (benchmarks/ is not a package)

DEFAULT_OPTIONS = ["-XX:+UseSerialGC -XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:+UseG1GC"]


def child(text: str, out: str, cores: int, memory: str, options: str, runs: int) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    started = time.perf_counter()
    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.memory", memory)
        .config("spark.driver.extraJavaOptions", options)
        .getOrCreate()
    )
    result = {"options": options, "session_s": time.perf_counter() - started, "runs": []}
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()  # noqa: SLF001

    def gc_ms() -> int:
        return sum(bean.getCollectionTime() for bean in beans)

    for _ in range(runs):
        gc_before, began = gc_ms(), time.perf_counter()
        words = spark.read.text(text).selectExpr("explode(split(value, ' ')) AS word").filter("word != ''")
        words.groupBy("word").count().write.mode("overwrite").parquet(out)
        result["runs"].append({"seconds": time.perf_counter() - began, "gc_s": (gc_ms() - gc_before) / 1000})
    spark.stop()
    print("RESULT " + json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="200m")
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--memory", default="1g")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--options", action="append", default=None)
    parser.add_argument("--work-dir", default="/tmp/flink-runtime-bench-gc")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # JSON: the child's arguments
    args = parser.parse_args()
    if args.child:
        child(*json.loads(args.child))
        return
    work = Path(args.work_dir)
    data = work / f"data-{args.size}"
    gen_text.generate(data, args.size, files=args.files)
    for options in args.options or DEFAULT_OPTIONS:
        arguments = [str(data / "text"), str(work / "out"), args.cores, args.memory, options, args.runs]
        command = [sys.executable, __file__, f"--child={json.dumps(arguments)}"]
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        result = json.loads(output.split("RESULT ", 1)[1])
        runs = "  ".join(
            f"run {index}: {run['seconds']:6.2f} s (GC {run['gc_s']:5.2f} s)"
            for index, run in enumerate(result["runs"], 1)
        )
        print(f"{options:<45} session {result['session_s']:5.1f} s  {runs}", flush=True)


if __name__ == "__main__":
    main()
