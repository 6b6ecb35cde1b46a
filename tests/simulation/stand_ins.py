"""What stands in for the world outside the control plane: the planner process and the
job store (SQL, fenced by the HA lease's token), in memory and instant.

SimPlanner prepares sources with `splits` input splits and "publishes" a finished job's
output (World.publish: the chunks its subtasks committed). A continuous source's splits
are files, one each: those that have arrived (JobSpec.files_at) and were not read before,
as SparkTask lists them; its sink is the world's (World.publish_files), with SparkTask's
rules for a path that holds data (published_before). SimJobStore makes the calls
the JobManager makes of JobStore, kept in memory across JobManager crashes, as the
database keeps them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.invokable import Prepared
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobmanager.jobstore import FencingTokenMismatch
from flink_runtime.jobmanager.jobstore_schema import TERMINAL_STATUSES, CheckpointRecord, JobRecord
from flink_runtime.planner import tasks as planner_tasks

if TYPE_CHECKING:
    from tests.simulation.world import World


class SimPlanner:
    """The planner process's two calls, in-process and instant."""

    def __init__(self, world: World) -> None:
        self.world = world

    def warm_up(self) -> None:
        pass

    def close(self) -> None:
        pass

    def run(self, function: Callable[..., Any], *args: Any, timeout: float) -> Any:
        if function is planner_tasks.prepare_job:
            graph = JobGraph.from_json(args[0])
            restored: dict[str, Any] = args[2]
            prepared = {}
            for vertex in graph.vertices:
                if "continuous" in vertex.config:
                    saved = restored.get(vertex.id)
                    self.world.check_sink_target(graph)
                    if saved is not None:  # as io.restore_sink_chunks: they join this run's output
                        self.world.restore_sink_chunks(graph, args[3], saved.sink_chunks)
                    done = set(saved.completed_files) if saved is not None else set()
                    prepared[vertex.id] = self._continuous(graph, vertex.id, done)
                elif "splits" in vertex.config:
                    prepared[vertex.id] = Prepared(splits=[InputSplit(n) for n in range(vertex.config["splits"])])
                else:
                    prepared[vertex.id] = Prepared()
            return prepared
        if function is planner_tasks.prepare_sources:
            graph = JobGraph.from_json(args[0])
            completed_files: dict[str, list[str]] = args[2]
            return {
                vertex_id: self._continuous(graph, vertex_id, set(done)) for vertex_id, done in completed_files.items()
            }
        if function is planner_tasks.run_terminal_hooks:
            job_graph_json, _config, _prepared, data_namespace, status, continuation, more_rounds = args[:7]
            graph = JobGraph.from_json(job_graph_json)
            if status is JobStatus.FINISHED:
                self.world.publish(graph, data_namespace)
            if graph.vertices[0].config.get("continuous"):
                self.world.publish_files(graph, data_namespace, status, continuation, more_rounds)
            return None
        if function is planner_tasks.forget_job:
            self.world.sink_markers.discard(JobGraph.from_json(args[0]).job_id or "")
            return None
        raise AssertionError(f"the simulated planner does not run {function.__name__}")

    def _continuous(self, graph: JobGraph, vertex_id: str, done: set[str]) -> Prepared:
        """The files there are now and not read yet, one split each (numbered in this
        preparation, as io.file_splits numbers them)."""
        vertex = next(v for v in graph.vertices if v.id == vertex_id)
        spec = self.world.specs[graph.job_id or ""]
        files = [f for f in spec.files_at(self.world.loop.time()) if f not in done]
        return Prepared(
            splits=[InputSplit(n, payload={"files": [f]}) for n, f in enumerate(files)],
            monitor_interval=vertex.config["continuous"]["monitor_interval"],
            output_staging_dir=self.world.sink_staging_dir(graph.job_id or ""),
        )


class SimJobStore:
    """The JobStore calls the JobManager makes, kept in memory (survives JobManager crashes)."""

    def __init__(self) -> None:
        # The HA lease's fencing token (the lease row of the same database).
        self.lease_token = 0
        self.jobs: dict[str, JobRecord] = {}
        self._checkpoints: dict[str, list[CheckpointRecord]] = {}
        self._recovery_attempts: dict[str, int] = {}
        self._savepoint_requests: dict[str, dict[str, dict[str, Any]]] = {}
        self._next_checkpoint_ids: dict[str, int] = {}

    def close(self) -> None:
        pass

    def fenced(self, cluster_id: str, token: int | None) -> FencedSimStore:
        return FencedSimStore(self, token)

    def add_job(self, job_id: str, name: str, job_graph_json: bytes | str, submitted_at: float) -> None:
        if isinstance(job_graph_json, bytes):
            job_graph_json = job_graph_json.decode()
        assert job_id not in self.jobs, f"job {job_id} stored twice"
        self.jobs[job_id] = JobRecord(job_id, name, job_graph_json, "INITIALIZING", submitted_at, submitted_at, None)

    def update_status(self, job_id: str, status: str, timestamp: float) -> None:
        record = self.jobs.get(job_id)
        if record is not None:
            ended = timestamp if str(status) in TERMINAL_STATUSES else None
            self.jobs[job_id] = dataclasses.replace(record, status=str(status), updated_at=timestamp, ended_at=ended)

    def archive(self, job_id: str, details: dict[str, Any], exceptions: dict[str, Any]) -> None:
        record = self.jobs.get(job_id)
        if record is not None:
            self.jobs[job_id] = dataclasses.replace(record, details=details, exceptions=exceptions)

    def _latest(self, record: JobRecord) -> JobRecord:
        checkpoints = self._checkpoints.get(record.job_id)
        return dataclasses.replace(record, latest_checkpoint=checkpoints[-1] if checkpoints else None)

    def recoverable_jobs(self) -> list[JobRecord]:
        records = [r for r in self.jobs.values() if r.status not in TERMINAL_STATUSES]
        return [self._latest(r) for r in sorted(records, key=lambda r: r.submitted_at)]

    def archived_jobs(self, limit: int = 1000) -> list[JobRecord]:
        records = [r for r in self.jobs.values() if r.status in TERMINAL_STATUSES]
        records.sort(key=lambda r: (r.ended_at or 0.0, r.submitted_at), reverse=True)
        return [self._latest(r) for r in records[:limit]]

    def prune(self, max_capacity: int, finished_before: float) -> int:
        return 0  # the simulation never runs long enough to expire a job

    def begin_recovery(self, job_id: str) -> int:
        self._recovery_attempts[job_id] = self._recovery_attempts.get(job_id, 0) + 1
        return self._recovery_attempts[job_id]

    def end_recovery(self, job_id: str) -> None:
        self._recovery_attempts.pop(job_id, None)

    def reserve_checkpoint_ids(self, job_id: str, at_least: int, count: int) -> int:
        assert job_id in self.jobs, f"checkpoint ids reserved for {job_id}, which is not stored"
        first = max(at_least, self._next_checkpoint_ids.get(job_id, 1))
        self._next_checkpoint_ids[job_id] = first + count
        return first

    def put_savepoint_request(self, job_id: str, request_id: str, status: dict[str, Any]) -> None:
        self._savepoint_requests.setdefault(job_id, {})[request_id] = copy.deepcopy(status)

    def savepoint_requests(self, job_id: str) -> dict[str, dict[str, Any]]:
        return copy.deepcopy(self._savepoint_requests.get(job_id, {}))

    def add_checkpoint(
        self,
        job_id: str,
        checkpoint_id: int,
        location: str,
        is_savepoint: bool,
        completed_at: float,
        size_bytes: int,
        metadata: dict[str, Any] | None = None,
        subsumed: list[str] | None = None,
    ) -> None:
        checkpoints = self._checkpoints.setdefault(job_id, [])
        assert all(c.checkpoint_id != checkpoint_id for c in checkpoints), f"checkpoint {checkpoint_id} stored twice"
        checkpoints.append(
            CheckpointRecord(job_id, checkpoint_id, location, is_savepoint, completed_at, size_bytes, metadata or {})
        )
        checkpoints.sort(key=lambda c: c.checkpoint_id)
        if subsumed:
            checkpoints[:] = [c for c in checkpoints if c.is_savepoint or c.location not in subsumed]

    def checkpoints(self, job_id: str) -> list[CheckpointRecord]:
        return list(self._checkpoints.get(job_id, []))


_WRITES = (
    "add_job",
    "update_status",
    "archive",
    "prune",
    "begin_recovery",
    "end_recovery",
    "put_savepoint_request",
    "add_checkpoint",
    "reserve_checkpoint_ids",
)


class FencedSimStore:
    """SimJobStore as one JobManager of an HA cluster writes to it: a write is made only
    while `token` is the lease's (JobStore.fenced: the write transaction checks the lease
    row); reads go through."""

    def __init__(self, store: SimJobStore, token: int | None) -> None:
        self._store = store
        self._token = token

    def fenced(self, cluster_id: str, token: int | None) -> FencedSimStore:
        return FencedSimStore(self._store, token)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if name not in _WRITES:
            return attribute

        def write(*args: Any, **kwargs: Any) -> Any:
            if self._token is None or self._token != self._store.lease_token:
                raise FencingTokenMismatch(
                    f"{name} with fencing token {self._token}, but the lease has {self._store.lease_token}"
                )
            return attribute(*args, **kwargs)

        return write
