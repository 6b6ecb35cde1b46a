"""The deterministic simulator's speed: schedules per second and CPU per schedule.

    .venv/bin/python benchmarks/bench_simulator.py                  # seeds 0..499, in this process
    .venv/bin/python benchmarks/bench_simulator.py --schedules 10000 --workers 2

In-process (--workers 1, the default) it also reports CPU time per schedule
(time.process_time), which a busy machine disturbs less than wall time. Target:
10,000 schedules within about a minute on 2 cores, i.e. >= ~170
schedules/s over 2 workers, <= ~11 ms CPU per schedule.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the simulator lives in tests/

from tests.simulation.runner import _run_range, run_many  # noqa: E402

TARGET_MS = 11.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=500)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.workers == 1:
        _run_range((args.start, args.start + 3, 1, False))  # imports, first-use caches
        cpu, wall = time.process_time(), time.perf_counter()
        summary = _run_range((args.start, args.start + args.schedules, 1, False))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        per = 1000 * cpu / args.schedules
        print(f"{args.schedules} schedules in one process: {wall:.1f} s wall, {args.schedules / wall:.0f} schedules/s")
        print(f"CPU per schedule: {per:.1f} ms (target <= {TARGET_MS:.0f} ms) {'PASS' if per <= TARGET_MS else 'FAIL'}")
    else:
        wall = time.perf_counter()
        summary = run_many(args.start, args.schedules, args.workers)
        wall = time.perf_counter() - wall
        rate = args.schedules / wall
        print(f"{args.schedules} schedules over {args.workers} workers: {wall:.1f} s, {rate:.0f} schedules/s")
    print(f"{summary.messages} messages delivered, {len(summary.failures)} failing seeds")
    return 1 if summary.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
