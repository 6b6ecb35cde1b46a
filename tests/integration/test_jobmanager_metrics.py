"""The JobManager's process metrics (Status.JVM.*) and the retention of ended jobs' metrics,
scraped from a real MiniCluster's /metrics and /jobmanager/metrics."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flink_runtime.client import JobClient
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.minicluster import MiniCluster
from tests.helpers.jobs import modulo_sum_job

pytestmark = pytest.mark.integration

RETENTION = 2.0


def scrape(rest: httpx.Client) -> dict[str, set[tuple[tuple[str, str], ...]]]:
    answer = rest.get("/metrics")
    assert answer.status_code == 200, answer.text
    samples: dict[str, set[tuple[tuple[str, str], ...]]] = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples.setdefault(sample.name, set()).add(tuple(sorted(sample.labels.items())))
    return samples


def test_process_metrics_and_ended_jobs_dropped_after_the_retention(minicluster: MiniCluster, tmp_path: Path) -> None:
    assert minicluster.jobmanager is not None
    config = minicluster.jobmanager.config
    config.set("metrics.job.ended-retention", f"{RETENTION} s")
    try:
        with httpx.Client(base_url=minicluster.rest_url, timeout=30) as rest, JobClient(minicluster.rest_url) as client:
            names = {item["id"] for item in rest.get("/jobmanager/metrics").json()}
            for name in (
                "Status.JVM.CPU.Load",
                "Status.JVM.CPU.Time",
                "Status.JVM.Memory.Heap.Used",
                "Status.JVM.Threads.Count",
                "Status.JVM.GarbageCollector.gen0.Count",
            ):
                assert name in names, names
            values = {
                m["id"]: float(m["value"])
                for m in rest.get(
                    "/jobmanager/metrics", params={"get": "Status.JVM.Memory.Heap.Used,Status.JVM.Threads.Count"}
                ).json()
            }
            assert values["Status.JVM.Memory.Heap.Used"] > 10e6 and values["Status.JVM.Threads.Count"] >= 2

            # Flink's ThreadDumpInfo and EnvironmentInfo shapes, for this Python process.
            dump = rest.get("/jobmanager/thread-dump").json()["threadInfos"]
            assert any(info["threadName"] == "MainThread" and "\tat " in info["stringifiedThreadInfo"] for info in dump)
            environment = rest.get("/jobmanager/environment").json()
            assert environment["jvm"]["version"].startswith("CPython") and environment["classpath"]

            job_id = client.submit(modulo_sum_job(tmp_path / "out", name="retention"))
            assert client.wait(job_id, timeout=60) is JobStatus.FINISHED
            ended = time.time()
            samples = scrape(rest)
            assert "flink_jobmanager_Status_JVM_CPU_Load" in samples
            assert "flink_jobmanager_Status_JVM_Threads_Count" in samples

            def job_task_series(found: dict[str, set[tuple[tuple[str, str], ...]]]) -> int:
                return sum(
                    1
                    for labels in found.get("flink_taskmanager_job_task_numRecordsOut", set())
                    if ("job_id", job_id) in labels
                )

            assert job_task_series(samples) > 0  # kept within the retention
            time.sleep(max(0.0, ended + RETENTION + 0.5 - time.time()))
            after = scrape(rest)
            assert job_task_series(after) == 0, "an ended job's task metrics outlived metrics.job.ended-retention"
            assert not any(("job_id", job_id) in labels for series in after.values() for labels in series)
            assert "flink_jobmanager_Status_JVM_CPU_Load" in after
    finally:
        config.set("metrics.job.ended-retention", "60 s")
