"""Metrics of the cluster, its jobs and their tasks, in Flink's names and scopes.

Read from what the JobManager already keeps (no sampling thread, nothing re-read):
registered TaskManagers and slots, job status and restarts, checkpoint statistics, and
the I/O each task attempt reported with its final state (flink_runtime/io/metrics.py).
REST serves them as Flink's metric endpoints and as Prometheus text (rest/metric_routes.py).

Scopes, as Flink's:
  jobmanager        numRegisteredTaskManagers, taskSlotsTotal, taskSlotsAvailable, numRunningJobs,
                    uptime
  job               uptime, downtime, numRestarts, lastCheckpointDuration, lastCheckpointSize,
                    numberOfCompletedCheckpoints, numberOfFailedCheckpoints, ...
  task (subtask)    numRecordsIn, numRecordsOut, numBytesIn, numBytesOut, accumulateBusyTimeMs,
                    accumulateIdleTimeMs, accumulateBackPressuredTimeMs, numSplitsProcessed
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Mapping, Sized
from typing import TYPE_CHECKING, Protocol

from flink_runtime.executiongraph import ExecutionVertex, JobStatus, subtask_io_metrics

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmaster import JobMaster
    from flink_runtime.scheduler.slotpool import SlotPool

Metrics = dict[str, float]


class ClusterState(Protocol):
    """What the JobManager scope's metrics read (the JobManager has it)."""

    @property
    def jobs(self) -> Mapping[str, JobMaster]: ...
    @property
    def task_managers(self) -> Sized: ...
    @property
    def slot_pool(self) -> SlotPool: ...
    @property
    def started_at(self) -> float: ...


# What a TaskManager may report: Flink-style dotted names (they become Prometheus names,
# dots as underscores), a bounded number of them, finite values.
_REPORTED_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")
MAX_REPORTED_METRICS = 256


def reported_taskmanager_metrics(reported: Metrics) -> Metrics:
    """The figures of a TaskManager's heartbeat that can be served: anything else (a
    name Prometheus would refuse, NaN, more than MAX_REPORTED_METRICS) is left out."""
    kept: Metrics = {}
    for name, value in reported.items():
        if len(kept) == MAX_REPORTED_METRICS:
            break
        if len(name) <= 200 and _REPORTED_NAME.fullmatch(name) and math.isfinite(value):
            kept[name] = float(value)
    return kept


def jobmanager_metrics(jobmanager: ClusterState) -> Metrics:
    running = sum(1 for job in jobmanager.jobs.values() if not job.status.is_globally_terminal)
    return {
        "numRegisteredTaskManagers": len(jobmanager.task_managers),
        "taskSlotsTotal": jobmanager.slot_pool.total_slots,
        "taskSlotsAvailable": jobmanager.slot_pool.free_slots,
        "numRunningJobs": running,
        # Not one of Flink's JobManager metrics (its dashboard reads the JVM's); ours, in ms.
        "uptime": (time.time() - jobmanager.started_at) * 1000,
    }


def job_metrics(job: JobMaster, now: float | None = None) -> Metrics:
    """Uptime is the time since the job last switched to RUNNING (0 unless RUNNING);
    downtime the time it has been failing or restarting since."""
    now = time.time() if now is None else now
    running_since = job.status_timestamps.get(JobStatus.RUNNING)
    uptime = (now - running_since) * 1000 if job.status is JobStatus.RUNNING and running_since else 0.0
    troubled = job.status in (JobStatus.FAILING, JobStatus.RESTARTING)
    since = job.status_timestamps.get(job.status)
    # The tracker's counts and latest checkpoint, not statistics(): a scrape must not
    # render every job's checkpoint history.
    tracker = job.coordinator.stats
    counts = tracker.counts
    completed = tracker.latest["completed"]
    latest = completed.to_json() if completed is not None else {}
    return {
        "uptime": uptime,
        "downtime": (now - since) * 1000 if troubled and since else 0.0,
        "numRestarts": job.num_restarts,
        "totalNumberOfCheckpoints": counts["total"],
        "numberOfInProgressCheckpoints": counts["in_progress"],
        "numberOfCompletedCheckpoints": counts["completed"],
        "numberOfFailedCheckpoints": counts["failed"],
        "lastCheckpointDuration": latest.get("end_to_end_duration", -1),
        "lastCheckpointSize": latest.get("checkpointed_size", -1),
    }


def split_counts(job: JobMaster, vertex_id: str) -> Counter[int]:
    """Input splits completed by each subtask of a source vertex (empty for others)."""
    progress = job.split_progress.get(vertex_id)
    return Counter(progress.completed.values()) if progress else Counter()


def subtask_metrics(job: JobMaster, vertex: ExecutionVertex, splits_done: Counter[int] | None = None) -> Metrics:
    """One subtask's counts so far: earlier rounds plus its current attempt once it
    reported (attempts report with their final state). `splits_done`: split_counts of
    its vertex, computed once by a caller that walks every subtask."""
    io, _ = subtask_io_metrics(vertex)
    if splits_done is None:
        splits_done = split_counts(job, vertex.job_vertex.id)
    return {
        "numRecordsIn": io.records_in,
        "numRecordsOut": io.records_out,
        "numBytesIn": io.bytes_in,
        "numBytesOut": io.bytes_out,
        "accumulateBusyTimeMs": io.busy_ms,
        "accumulateIdleTimeMs": io.idle_ms,
        "accumulateBackPressuredTimeMs": 0,
        "numSplitsProcessed": splits_done[vertex.subtask_index],
    }
