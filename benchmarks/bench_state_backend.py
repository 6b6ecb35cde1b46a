"""Keyed state backends (`state.backend.type`): hashmap against rocksdb, as an aggregation uses them.

    .venv/bin/python benchmarks/bench_state_backend.py [--sizes 10000,100000,1000000]
                                                       [--work-dir DIR] [--checkpoint-dir DIR]

State shaped like a group-by's partial aggregates: key (str, int), value [count, sum].
For each size and backend, in a fresh child process (so neither the allocator's
arenas nor a previous run's memory distort RSS):

- fill: one merge per new key, as the first record of each group arrives;
- update: merges into existing keys in random order (min(size, 200,000) of them), as
  later records of the same groups arrive;
- snapshot: time to write the checkpoint, and its size on disk (handle["bytes"]);
- restore: time until a restored backend answers (its content is then checked: len and
  a sample of keys);
- scan: items() over the restored state, as when a bounded job emits its results;
- RSS: growth of the child's resident memory over fill and update.

The rocksdb snapshot hard-links SST files when the checkpoint dir is on the same file
system as the working dir (the default here, both under --work-dir); pass
--checkpoint-dir on another file system to time the copying case. Always exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

from flink_runtime.checkpoint.state import create_state_backend, restore_state_backend

KINDS = ("hashmap", "rocksdb")
UPDATE_SAMPLE = 200_000
MIB = 1024 * 1024


def add(old: list, new: list) -> list:
    return [old[0] + new[0], old[1] + new[1]]


def key_of(i: int) -> tuple[str, int]:
    return (f"customer-{i % 50_000:05d}", i)


def run_one(kind: str, size: int, work_dir: str, checkpoint_dir: str) -> dict:
    process = psutil.Process()
    rss_before = process.memory_info().rss
    state = create_state_backend(kind, os.path.join(work_dir, "local"))

    start = time.perf_counter()
    for i in range(size):
        state.merge(key_of(i), [1, i * 0.25], add)
    fill = time.perf_counter() - start

    updates = min(size, UPDATE_SAMPLE)
    order = random.Random(42).sample(range(size), updates)
    start = time.perf_counter()
    for i in order:
        state.merge(key_of(i), [1, 1.0], add)
    update = time.perf_counter() - start
    rss_growth = process.memory_info().rss - rss_before

    start = time.perf_counter()
    handle = state.snapshot(os.path.join(checkpoint_dir, f"{kind}-{size}"))
    snapshot = time.perf_counter() - start
    state.close()

    start = time.perf_counter()
    restored = restore_state_backend(handle, os.path.join(work_dir, "restored"))
    restore = time.perf_counter() - start

    updated = set(order)
    for i in random.Random(7).sample(range(size), min(size, 1000)):
        expected = [2, i * 0.25 + 1.0] if i in updated else [1, i * 0.25]
        assert restored.get(key_of(i)) == expected, (i, restored.get(key_of(i)), expected)
    assert len(restored) == size == handle["entries"]

    start = time.perf_counter()
    scanned = sum(1 for _ in restored.items())
    scan = time.perf_counter() - start
    assert scanned == size
    restored.close()

    return {
        "backend": kind,
        "entries": size,
        "fill_s": fill,
        "update_s": update,
        "updates": updates,
        "snapshot_s": snapshot,
        "snapshot_bytes": handle["bytes"],
        "restore_s": restore,
        "scan_s": scan,
        "rss_growth": rss_growth,
    }


def run_in_child(kind: str, size: int, work_dir: str, checkpoint_dir: str) -> dict:
    child_work = tempfile.mkdtemp(prefix=f"{kind}-{size}-", dir=work_dir)
    try:
        output = subprocess.run(
            [sys.executable, __file__, "--child", kind, str(size), child_work, checkpoint_dir],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return json.loads(output.splitlines()[-1])
    finally:
        shutil.rmtree(child_work, ignore_errors=True)


def print_table(results: list[dict]) -> None:
    header = (
        "| backend | entries | fill | update (merge) | snapshot | snapshot size | restore | scan | RSS growth |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    print(header)
    for r in results:
        print(
            f"| {r['backend']} | {r['entries']:,} "
            f"| {r['fill_s']:.2f} s ({r['entries'] / r['fill_s'] / 1000:,.0f} k/s) "
            f"| {r['updates'] / r['update_s'] / 1000:,.0f} k/s "
            f"| {r['snapshot_s'] * 1000:,.0f} ms "
            f"| {r['snapshot_bytes'] / MIB:,.1f} MiB ({r['snapshot_bytes'] / r['entries']:.0f} B/entry) "
            f"| {r['restore_s'] * 1000:,.0f} ms "
            f"| {r['scan_s'] * 1000:,.0f} ms "
            f"| {r['rss_growth'] / MIB:,.0f} MiB |"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, size, work_dir, checkpoint_dir = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
        print(json.dumps(run_one(kind, size, work_dir, checkpoint_dir)))
        return

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated entry counts")
    parser.add_argument("--work-dir", default=None, help="working dirs and (by default) checkpoints; a temp dir")
    parser.add_argument("--checkpoint-dir", default=None, help="where snapshots go (default: under --work-dir)")
    args = parser.parse_args()
    sizes = [int(size.replace("_", "")) for size in args.sizes.split(",")]

    work_dir = tempfile.mkdtemp(prefix="bench-state-", dir=args.work_dir)
    checkpoint_dir = tempfile.mkdtemp(prefix="checkpoints-", dir=args.checkpoint_dir or work_dir)
    results = []
    try:
        for size in sizes:
            for kind in KINDS:
                result = run_in_child(kind, size, work_dir, checkpoint_dir)
                print(f"{kind} {size:,}: done", file=sys.stderr, flush=True)
                results.append(result)
    finally:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
        shutil.rmtree(work_dir, ignore_errors=True)
    print_table(results)


if __name__ == "__main__":
    main()
