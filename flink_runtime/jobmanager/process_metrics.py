"""The JobManager's own process metrics, and its planner's, under Flink's `Status.JVM.*` names.

Flink's JobManager reports its JVM (CPU, heap, threads, garbage collectors); ours is a
Python process, so the same names carry the Python figures (psutil, the gc module):

  Status.JVM.CPU.Load                 share of the machine this process used since the last read
  Status.JVM.CPU.Time                 CPU time used so far, in ns (Flink's unit)
  Status.JVM.Memory.Heap.Used         resident memory (RSS): a Python process has no separate heap
  Status.JVM.Memory.NonHeap.Used      memory mapped but not resident (VMS - RSS)
  Status.JVM.Threads.Count            threads of the process
  Status.JVM.GarbageCollector.gen<N>.Count / .Time   collections of gc generation N, and ms spent

and, for the planner process that runs jobs' code (planner/pool.py: a spawned child of the
JobManager) with everything it started (its Spark JVM):

  Status.Planner.CPU.Load, Status.Planner.CPU.Time, Status.Planner.Memory.RSS,
  Status.Planner.Threads.Count, Status.Planner.Processes

Read on each call (a scrape or a REST request), never on a thread of its own.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import psutil

Metrics = dict[str, float]


class GcTimer:
    """Milliseconds spent in each gc generation, measured with gc.callbacks (installed once)."""

    def __init__(self) -> None:
        self.millis: dict[int, float] = {}
        self._started: dict[int, float] = {}
        self._lock = threading.Lock()

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        generation = int(info.get("generation", 0))
        if phase == "start":
            self._started[generation] = time.perf_counter()
        elif generation in self._started:
            spent = (time.perf_counter() - self._started.pop(generation)) * 1000
            with self._lock:
                self.millis[generation] = self.millis.get(generation, 0.0) + spent


_GC_TIMER = GcTimer()
gc.callbacks.append(_GC_TIMER)


class ProcessMetrics:
    """Keeps the psutil.Process objects between reads: cpu_percent compares with the last call."""

    def __init__(self) -> None:
        self._process: psutil.Process | None = None
        self._children: dict[int, psutil.Process] = {}

    def read(self) -> Metrics:
        if self._process is None:
            self._process = psutil.Process()
        return self._own(self._process) | self._planner(self._process)

    @staticmethod
    def _own(process: psutil.Process) -> Metrics:
        cpus = psutil.cpu_count() or 1
        with process.oneshot():
            times = process.cpu_times()
            memory = process.memory_info()
            values: Metrics = {
                "Status.JVM.CPU.Load": process.cpu_percent(None) / 100.0 / cpus,
                "Status.JVM.CPU.Time": (times.user + times.system) * 1e9,
                "Status.JVM.Memory.Heap.Used": float(memory.rss),
                "Status.JVM.Memory.NonHeap.Used": float(max(0, memory.vms - memory.rss)),
                "Status.JVM.Threads.Count": float(process.num_threads()),
            }
        for generation, stats in enumerate(gc.get_stats()):
            values[f"Status.JVM.GarbageCollector.gen{generation}.Count"] = float(stats["collections"])
            values[f"Status.JVM.GarbageCollector.gen{generation}.Time"] = _GC_TIMER.millis.get(generation, 0.0)
        return values

    def _planner(self, process: psutil.Process) -> Metrics:
        """The planner: the JobManager's spawned multiprocessing children, with their descendants."""
        planners = []
        for child in process.children():
            try:
                if "multiprocessing" in " ".join(child.cmdline()):
                    planners.append(child)
            except psutil.Error:
                continue
        if not planners:
            return {}
        members: list[psutil.Process] = []
        for planner in planners:
            try:
                members += [planner, *planner.children(recursive=True)]
            except psutil.Error:
                continue
        # The same Process objects as last time: cpu_percent measures since then.
        known = {member.pid: self._children.get(member.pid, member) for member in members}
        self._children = known
        cpus = psutil.cpu_count() or 1
        load = cpu_time = rss = threads = 0.0
        for member in known.values():
            try:
                with member.oneshot():
                    load += member.cpu_percent(None) / 100.0 / cpus
                    times = member.cpu_times()
                    cpu_time += (times.user + times.system) * 1e9
                    rss += member.memory_info().rss
                    threads += member.num_threads()
            except psutil.Error:  # ended between listing and reading
                continue
        return {
            "Status.Planner.CPU.Load": load,
            "Status.Planner.CPU.Time": cpu_time,
            "Status.Planner.Memory.RSS": rss,
            "Status.Planner.Threads.Count": threads,
            "Status.Planner.Processes": float(len(known)),
        }
