"""The slot pool's bookkeeping speed: requests served per second under churn.

    .venv/bin/python benchmarks/bench_slotpool.py

Two runs of 10,000 requests: without resource profiles on 4 TaskManagers of 4 slots
(every request takes a default slot, released in random order), and with a mix of
resource profiles on 100 TaskManagers of 2 cores (dynamic slots carved and returned).
Target: well above the 2,000 slots/s a busy cluster asks for.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flink_runtime.scheduler.resource_profile import ResourceProfile  # noqa: E402
from flink_runtime.scheduler.slotpool import SlotPool  # noqa: E402


def churn(task_managers: int, slots: int, total: ResourceProfile, profiles: list[ResourceProfile], n: int) -> float:
    rng = random.Random(42)
    pool = SlotPool()
    for i in range(task_managers):
        pool.add_task_manager(f"tm{i}", f"host-{i % 4}", slots, total_resource=total)
    held: list[str] = []
    start = time.perf_counter()
    for i in range(n):
        if pool.request_slot(f"r{i}", now=float(i), profile=rng.choice(profiles)) is not None:
            held.append(f"r{i}")
    while held:
        for request_id, _slot in pool.release_slot(held.pop(rng.randrange(len(held)))):
            held.append(request_id)
    return time.perf_counter() - start


def main() -> None:
    n = 10_000
    plain = churn(4, 4, ResourceProfile.ANY, [ResourceProfile.UNKNOWN], n)
    print(f"{n} requests without profiles, 16 slots: {plain:.3f} s, {n / plain:,.0f} requests/s")
    mixed_profiles = [
        ResourceProfile.UNKNOWN,
        ResourceProfile(cpu_cores=0.5, task_heap_memory_mb=128),
        ResourceProfile(cpu_cores=1.0, task_heap_memory_mb=256),
    ]
    total = ResourceProfile(cpu_cores=2.0, task_heap_memory_mb=1024)
    mixed = churn(100, 2, total, mixed_profiles, n)
    print(f"{n} requests with mixed profiles, 100 TaskManagers: {mixed:.3f} s, {n / mixed:,.0f} requests/s")


if __name__ == "__main__":
    main()
