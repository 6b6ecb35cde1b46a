"""What a TaskManager reports about itself: its CPU and memory, and its Spark JVM's.

Sampled every metrics.system-resource-probing-interval on a daemon thread, never on
the TaskManager's event loop (a JMX call waits while the JVM collects garbage; a
heartbeat answer must not). Heartbeat answers carry the latest sample
(HeartbeatResponse.metrics), so one scrape of the JobManager sees the whole cluster.

Names are Flink's TaskManager metrics where Flink has one:

  Status.JVM.CPU.Load, Status.JVM.CPU.Time       the Spark JVM's process (psutil)
  Status.JVM.Memory.Heap.Used/Committed/Max      its heap (JMX through py4j); NonHeap likewise
  Status.JVM.Threads.Count, Status.JVM.ClassLoader.ClassesLoaded
  Status.JVM.GarbageCollector.<name>.Count/Time
  System.CPU.Usage, System.Memory.Available/Total (Flink's system resource metrics)

and ours for the Python process that runs the tasks, which Flink does not have:

  Status.Python.CPU.Load (share of the machine, as Status.JVM.CPU.Load),
  Status.Python.Memory.RSS, Status.Python.Threads.Count

The JVM's figures exist only once a task started the process's SparkSession, and only
for a classic session: a Spark Connect client has no JVM here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psutil

log = logging.getLogger(__name__)

Metrics = dict[str, float]


def python_process_metrics(process: psutil.Process) -> Metrics:
    """This process's figures. cpu_percent compares with the previous call on the same
    Process object (the first call says 0)."""
    with process.oneshot():
        return {
            "Status.Python.CPU.Load": process.cpu_percent(None) / 100.0 / (psutil.cpu_count() or 1),
            "Status.Python.Memory.RSS": float(process.memory_info().rss),
            "Status.Python.Threads.Count": float(process.num_threads()),
        }


def system_metrics() -> Metrics:
    memory = psutil.virtual_memory()
    return {
        "System.CPU.Usage": psutil.cpu_percent(None),
        "System.Memory.Available": float(memory.available),
        "System.Memory.Total": float(memory.total),
    }


def jvm_process(spark: Any) -> psutil.Process | None:
    """The Spark JVM's process, when this process launched it (a classic session)."""
    gateway = getattr(getattr(spark, "sparkContext", None), "_gateway", None)
    process = getattr(gateway, "proc", None)
    return psutil.Process(process.pid) if process is not None else None


def jvm_cpu_metrics(process: psutil.Process) -> Metrics:
    """The JVM's CPU from outside (psutil): its com.sun.management bean, which has these,
    cannot be called through py4j's reflection (jdk.management does not open it)."""
    times = process.cpu_times()
    return {
        "Status.JVM.CPU.Load": process.cpu_percent(None) / 100.0 / (psutil.cpu_count() or 1),
        "Status.JVM.CPU.Time": (times.user + times.system) * 1e9,  # Flink's unit: ns
    }


def jvm_metrics(spark: Any) -> Metrics:
    """The Spark JVM's memory, threads and collectors through JMX (py4j), under Flink's
    Status.JVM names; empty without a classic session."""
    jvm = getattr(spark, "_jvm", None) if spark is not None else None
    if jvm is None:
        return {}
    management = jvm.java.lang.management.ManagementFactory
    heap = management.getMemoryMXBean().getHeapMemoryUsage()
    non_heap = management.getMemoryMXBean().getNonHeapMemoryUsage()
    values: Metrics = {
        "Status.JVM.Memory.Heap.Used": float(heap.getUsed()),
        "Status.JVM.Memory.Heap.Committed": float(heap.getCommitted()),
        "Status.JVM.Memory.Heap.Max": float(heap.getMax()),
        "Status.JVM.Memory.NonHeap.Used": float(non_heap.getUsed()),
        "Status.JVM.Memory.NonHeap.Committed": float(non_heap.getCommitted()),
        "Status.JVM.Memory.NonHeap.Max": float(non_heap.getMax()),
        "Status.JVM.Threads.Count": float(management.getThreadMXBean().getThreadCount()),
        "Status.JVM.ClassLoader.ClassesLoaded": float(management.getClassLoadingMXBean().getTotalLoadedClassCount()),
    }
    for collector in management.getGarbageCollectorMXBeans():
        name = str(collector.getName()).replace(" ", "_")
        values[f"Status.JVM.GarbageCollector.{name}.Count"] = float(collector.getCollectionCount())
        values[f"Status.JVM.GarbageCollector.{name}.Time"] = float(collector.getCollectionTime())
    return values


class SystemMetricsSampler:
    """Samples every `interval` seconds on its own thread; `latest` is the newest sample."""

    def __init__(self, interval: float, spark: Callable[[], Any]) -> None:
        self.interval = interval
        self._spark = spark  # the SparkSession if one was started, else None (never starts one)
        # Made at the first sample, not here: psutil.Process() reads /proc, and a TaskExecutor
        # is built many times over where nothing samples (the simulator).
        self._process: psutil.Process | None = None
        self._jvm_process: psutil.Process | None = None  # kept: cpu_percent compares samples
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="system-metrics", daemon=True)
        self.latest: Metrics = {}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def sample(self) -> Metrics:
        if self._process is None:
            self._process = psutil.Process()
        values = python_process_metrics(self._process) | system_metrics()
        spark = self._spark()
        try:
            values |= jvm_metrics(spark)
            if self._jvm_process is None:
                self._jvm_process = jvm_process(spark)
            if self._jvm_process is not None:
                values |= jvm_cpu_metrics(self._jvm_process)
        except Exception as exc:  # a JVM going down, a py4j hiccup: report the rest
            log.debug("JVM metrics not sampled: %s", exc)
        return values

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.latest = self.sample()  # one assignment: readers see a whole sample
            except Exception:  # never let the sampler die; the next round tries again
                log.warning("sampling the TaskManager's metrics failed", exc_info=True)
            self._stopped.wait(self.interval)
