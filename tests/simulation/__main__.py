"""Run simulated schedules from the command line.

python -m tests.simulation --seed 1234 --trace      # replay one seed, print its steps
python -m tests.simulation --schedules 2000          # seeds 0..1999, report failures
python -m tests.simulation --schedules 10000 --workers 2 --start 50000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from tests.simulation.runner import HASH_SEED, run_many
from tests.simulation.schedule import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, help="run this one seed")
    parser.add_argument("--trace", action="store_true", help="print the seed's steps")
    parser.add_argument("--schedules", type=int, default=1000, help="how many seeds to run (from --start)")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--workers", type=int, default=1, help="processes to spread the seeds over")
    parser.add_argument(
        "--transport-faults",
        action="store_true",
        help="chaos schedules also drop, duplicate and reorder messages on a live connection "
        "(beyond what TCP does; the runtime relies on per-connection order)",
    )
    args = parser.parse_args(argv)
    transport_faults = args.transport_faults
    if args.seed is not None:
        result = run(args.seed, record=True, transport_faults=transport_faults, verbose=args.trace)
        if args.trace or not result.ok:
            print(result.format_trace())
        print(
            f"seed {args.seed}: {'ok' if result.ok else 'FAILED'} ({result.delivered} messages, "
            f"{result.end_time:.1f} virtual s, jobs {result.job_states})"
        )
        for violation in result.violations:
            print(f"  violation: {violation}")
        return 0 if result.ok else 1
    started = time.perf_counter()
    summary = run_many(args.start, args.schedules, args.workers, transport_faults)
    elapsed = time.perf_counter() - started
    print(summary.describe())
    print(f"{args.schedules} schedules in {elapsed:.1f} s: {args.schedules / elapsed:.0f} schedules/s")
    return 0 if not summary.failures else 1


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        # A seed replays only with the hash seed its workers ran with (runner.HASH_SEED):
        # this process runs --seed itself, so it starts again with it.
        os.execve(
            sys.executable,
            [sys.executable, "-m", "tests.simulation", *sys.argv[1:]],
            {**os.environ, "PYTHONHASHSEED": HASH_SEED},
        )
    sys.exit(main())
