"""A TaskManager's self-sampling (taskmanager/system_metrics.py) and how the JobManager
shows what it reported as Flink's TaskManagerMetricsInfo."""

from __future__ import annotations

import threading
import time

import psutil

from flink_runtime.jobmanager.metrics import MAX_REPORTED_METRICS, reported_taskmanager_metrics
from flink_runtime.rest.taskmanager_views import taskmanager_jvm_metrics
from flink_runtime.taskmanager.system_metrics import SystemMetricsSampler, jvm_metrics, jvm_process


def test_a_sample_without_a_spark_session_has_the_process_and_the_machine() -> None:
    values = SystemMetricsSampler(1.0, lambda: None).sample()
    assert values["Status.Python.Memory.RSS"] > (10 << 20)
    assert 0 <= values["Status.Python.CPU.Load"] <= 1
    assert values["System.Memory.Total"] == psutil.virtual_memory().total
    assert not any(name.startswith("Status.JVM.") for name in values)


def test_cpu_load_measures_the_time_between_samples() -> None:
    sampler = SystemMetricsSampler(1.0, lambda: None)
    sampler.sample()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # burn 0.3 s of CPU on this thread
        pass
    assert sampler.sample()["Status.Python.CPU.Load"] > 0


def test_the_sampler_thread_keeps_the_latest_sample_and_stops() -> None:
    sampler = SystemMetricsSampler(0.05, lambda: None)
    sampler.start()
    deadline = time.monotonic() + 5
    while not sampler.latest:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sampler.stop()
    sampler._thread.join(timeout=2)
    assert not sampler._thread.is_alive()


def test_a_broken_jvm_costs_only_the_jvm_figures() -> None:
    class DeadSession:
        @property
        def _jvm(self) -> object:
            raise ConnectionError("py4j gateway closed")

    values = SystemMetricsSampler(1.0, DeadSession).sample()
    assert "Status.Python.Memory.RSS" in values and not any(name.startswith("Status.JVM.") for name in values)


def test_a_spark_connect_session_has_no_jvm_here() -> None:
    class ConnectSession:  # pyspark.sql.connect's session: neither _jvm nor sparkContext
        pass

    assert jvm_metrics(ConnectSession()) == {} and jvm_process(ConnectSession()) is None


def test_taskmanager_metrics_info_from_the_reported_names() -> None:
    reported = {
        "Status.JVM.Memory.Heap.Used": 100.0,
        "Status.JVM.Memory.Heap.Max": 1000.0,
        "Status.JVM.Memory.NonHeap.Committed": 50.0,
        "Status.JVM.GarbageCollector.G1_Young_Generation.Count": 4.0,
        "Status.JVM.GarbageCollector.G1_Young_Generation.Time": 12.0,
        "Status.Python.Memory.RSS": 7.0,
    }
    info = taskmanager_jvm_metrics(reported)
    assert (info["heapUsed"], info["heapMax"], info["nonHeapCommitted"], info["heapCommitted"]) == (100, 1000, 50, 0)
    assert info["garbageCollectors"] == [{"name": "G1_Young_Generation", "count": 4, "time": 12}]
    assert info["nettyShuffleMemoryTotal"] == 0  # Flink's field, no Spark counterpart
    assert taskmanager_jvm_metrics({})["garbageCollectors"] == []


def test_sampling_never_runs_on_the_callers_thread() -> None:
    seen: list[str] = []

    def spark() -> None:
        seen.append(threading.current_thread().name)

    sampler = SystemMetricsSampler(10.0, spark)
    sampler.start()
    deadline = time.monotonic() + 5
    while not seen:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sampler.stop()
    assert seen[0] == "system-metrics"


def test_the_jobmanager_keeps_only_servable_reported_metrics() -> None:
    reported = {
        "Status.JVM.Memory.Heap.Used": 1.0,
        'x"} 1\nflink_fake{a="': 2.0,  # would break the Prometheus text
        "1bad": 3.0,
        "Status.NaN": float("nan"),
        **{f"Custom.m{i}": float(i) for i in range(MAX_REPORTED_METRICS + 10)},
    }
    kept = reported_taskmanager_metrics(reported)
    assert "Status.JVM.Memory.Heap.Used" in kept and len(kept) == MAX_REPORTED_METRICS
    assert not {'x"} 1\nflink_fake{a="', "1bad", "Status.NaN"} & set(kept)
