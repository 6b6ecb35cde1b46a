"""The RestfulGateway (jobmanager/restful_gateway.py), built alone: real JobMasters
(jobmaster_fakes), a real SQLite job store for the jobs archived in an earlier run,
and a host whose mailbox runs each call at once. Also: a job store written before the
JobManager archived records (it held Flink's REST answers) reads back, and answers the
REST API exactly as it did."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import msgspec
import pytest

from flink_runtime.executiongraph import ExecutionState, JobStatus
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.jobmanager import job_snapshots
from flink_runtime.jobmanager.archived_jobs import from_archive
from flink_runtime.jobmanager.errors import (
    DuplicateJob,
    InvalidRequest,
    JobAlreadyEnded,
    JobNotFound,
    NotAccepted,
    TaskManagerNotFound,
    VertexNotFound,
)
from flink_runtime.jobmanager.jobmaster import JobMaster
from flink_runtime.jobmanager.jobstore import JobRecord, JobStore
from flink_runtime.jobmanager.restful_gateway import RestfulGateway
from flink_runtime.rest import job_views
from flink_runtime.rpc.messages import JobSubmissionFailure, SubmitJob

from .jobmaster_fakes import current, finish_deployed, job_graph, run_to, start_job

T = TypeVar("T")
BEFORE_RECORDS = json.loads((Path(__file__).parent / "archived_job_before_records.json").read_text())
OLD_JOB = BEFORE_RECORDS["details"]["jid"]


class Host:
    """The JobManager as the gateway reads it: jobs, an archive, a mailbox run at once."""

    def __init__(self, archived: dict[str, JobRecord] | None = None) -> None:
        self.jobs: dict[str, JobMaster] = {}
        self.archived = archived or {}
        self.task_managers: dict[str, Any] = {
            "tm-1": SimpleNamespace(task_manager_id="tm-1", address="tcp://tm-1", host="host-1")
        }
        self.asked: list[Any] = []
        self.answer: Any = None
        self.ask_timeout = 1.0

    async def call_in_mailbox(self, function: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        return function(*args)

    async def ask_self(self, message: Any, timeout: float | None = None) -> Any:
        self.asked.append(message)
        if self.answer == "accept":
            self.jobs[message.job_graph.job_id] = SimpleNamespace()  # type: ignore[assignment]
            return None
        return self.answer

    def decode(self, body: bytes) -> Any:
        return SimpleNamespace(job_id=json.loads(body)["jid"])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    with JobStore(f"sqlite:///{tmp_path / 'jobstore.db'}") as job_store:
        yield job_store


def archive_old_row(store: JobStore) -> JobRecord:
    """The job store row a JobManager before the records wrote for a failed job."""
    store.add_job(OLD_JOB, "archived before the records", job_graph(("source", 2)).to_json(), 1.0)
    store.update_status(OLD_JOB, "FAILED", 2.0)
    store.archive(OLD_JOB, BEFORE_RECORDS["details"], BEFORE_RECORDS["exceptions"])
    [record] = store.archived_jobs()
    return record


def ended_job() -> JobMaster:
    """A real JobMaster whose sources finished (with I/O) and whose sink failed."""
    graph = job_graph(("source", 2), ("sink", 1), edges=(("source", "sink"),))
    job, gateway = start_job(graph, {"restart-strategy.type": "none"})
    for index in range(2):
        io = IOMetrics(records_in=10, records_out=7, bytes_in=100, bytes_out=333, busy_ms=1234 + index, idle_ms=17)
        run_to(job, current(job, "source", index), ExecutionState.FINISHED, io_metrics=io)
    gateway.settle()
    run_to(job, current(job, "sink"), ExecutionState.FAILED, "ValueError: bad record 7")
    gateway.settle()
    assert job.status is JobStatus.FAILED
    return job


# -- the job store: old rows and new ones ----------------------------------------------------------


def test_a_job_archived_before_the_records_answers_the_rest_api_as_it_did(store: JobStore) -> None:
    record = archive_old_row(store)
    assert record.details is not None
    snapshot, history = from_archive(record.details, record.exceptions)
    # Byte for byte, key order included: Flink's CLI and the web UI read these answers.
    assert json.dumps(job_views.job_details(snapshot)) == json.dumps(BEFORE_RECORDS["details"])
    assert json.dumps(job_views.job_exceptions(history)) == json.dumps(BEFORE_RECORDS["exceptions"])
    assert snapshot.state == "FAILED" and history.root is not None and history.root.exception_name == "ValueError"
    overview = job_views.job_overview(snapshot.summary())
    assert overview["tasks"]["finished"] == 2 and overview["tasks"]["failed"] == 1 and overview["tasks"]["total"] == 3
    assert overview["last-modification"] == BEFORE_RECORDS["details"]["end-time"]


def archive_documents(job: JobMaster, *task_manager: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the job store is given for an ended job, as the JSON documents it reads back."""
    snapshot, exceptions = job_snapshots.archive_records(job, *task_manager)
    return msgspec.to_builtins(snapshot), exceptions


def test_an_ended_job_is_archived_as_its_records_and_read_back_whole(store: JobStore) -> None:
    job = ended_job()
    details, exceptions = archive_documents(job)
    assert "jid" not in details and details["job_id"] == job.job_id  # records, not REST answers
    assert not any("-" in key for key in details)
    store.add_job(job.job_id, job.name, job.job_graph.to_json(), 1.0)
    store.update_status(job.job_id, "FAILED", 2.0)
    store.archive(job.job_id, details, exceptions)
    [record] = store.archived_jobs()
    assert record.details is not None
    snapshot, history = from_archive(record.details, record.exceptions)
    assert msgspec.to_builtins(snapshot) == details
    assert history.entries == job.exceptions
    live = job_snapshots.job_snapshot(job)
    assert job_views.job_details(snapshot) == job_views.job_details(
        msgspec.structs.replace(live, taken_at=snapshot.taken_at)
    )
    assert job_views.job_details(snapshot)["vertices"][0]["metrics"]["accumulated-busy-time"] == 2469.0
    # What the JobManager archives (the snapshot as records, encoded in the store's thread)
    # reads back as the documents do.
    store.archive(job.job_id, *job_snapshots.archive_records(job))
    [again] = store.archived_jobs()
    assert again.details is not None and again.exceptions == record.exceptions
    assert {**again.details, "taken_at": 0} == {**record.details, "taken_at": 0}


# -- one door: live and archived jobs merged once ---------------------------------------------------


def test_live_and_archived_jobs_are_merged_once(store: JobStore) -> None:
    host = Host({OLD_JOB: archive_old_row(store)})
    job = ended_job()
    host.jobs[job.job_id] = job
    gateway = RestfulGateway(host, None)  # type: ignore[arg-type]
    assert [(summary.job_id, summary.state) for summary in gateway.list_jobs()] == [
        (job.job_id, "FAILED"),
        (OLD_JOB, "FAILED"),
    ]
    assert gateway.job_state(OLD_JOB) == "FAILED" and gateway.job_details(OLD_JOB).name == "archived before the records"
    snapshot, root = gateway.job_result(OLD_JOB)
    assert root is not None and root.stacktrace.startswith("ValueError: bad record 7")
    assert gateway.job_vertices(OLD_JOB) == ("FAILED", {"source": 2, "sink": 1})
    # A job both live and archived (recovered, then ended again) is listed once: its live self.
    host.archived[job.job_id] = host.archived[OLD_JOB]
    assert [summary.job_id for summary in gateway.list_jobs()] == [job.job_id, OLD_JOB]
    with pytest.raises(JobNotFound, match="unknown, or expired from the job store"):
        gateway.job_details("0" * 32)


def test_views_only_a_running_jobmanager_has_refuse_other_jobs(store: JobStore) -> None:
    host = Host({OLD_JOB: archive_old_row(store)})
    gateway = RestfulGateway(host, None)  # type: ignore[arg-type]
    with pytest.raises(JobNotFound, match="metrics are kept for jobs of this JobManager run"):
        gateway.job_metrics(OLD_JOB)
    with pytest.raises(JobNotFound, match="unknown, or expired from the job store"):
        gateway.vertex_subtasks(OLD_JOB, "source")
    job = ended_job()
    host.jobs[job.job_id] = job
    with pytest.raises(VertexNotFound, match=f"Job {job.job_id} has no vertex 'nope'"):
        gateway.vertex_subtasks(job.job_id, "nope")
    with pytest.raises(TaskManagerNotFound, match="TaskManager tm-9 not found"):
        gateway.task_manager("tm-9")
    assert gateway.task_manager("tm-1").address == "tcp://tm-1"
    sink = gateway.vertex_subtasks(job.job_id, "sink")
    assert [(s.status, s.endpoint, s.host) for s in sink.subtasks] == [("FAILED", "tcp://tm-1", "host-1")]
    assert [(v.name, v.io.records_out) for v in gateway.job_accumulators(job.job_id)] == [("Source", 14), ("Sink", 0)]
    assert gateway.job_configuration(job.job_id).parallelism == 2


# -- what changes a job: cancel and submit -------------------------------------------------------------


def test_cancel_semantics_are_the_jobmanagers(store: JobStore) -> None:
    host = Host({OLD_JOB: archive_old_row(store)})
    gateway = RestfulGateway(host, None)  # type: ignore[arg-type]

    def cancel(job_id: str) -> None:  # the fake JobMasters run their own work off an event loop
        asyncio.run(gateway.cancel_job(job_id))

    running, _ = start_job(job_graph(("source", 1)))
    host.jobs[running.job_id] = running
    cancel(running.job_id)
    assert running.status is JobStatus.CANCELED
    cancel(running.job_id)  # cancelling a CANCELED job again is acknowledged
    finished, fake = start_job(job_graph(("source", 1)))
    finish_deployed(finished)
    fake.settle()
    host.jobs[finished.job_id] = finished
    with pytest.raises(JobAlreadyEnded, match=f"job {finished.job_id} is already FINISHED"):
        cancel(finished.job_id)
    with pytest.raises(JobAlreadyEnded, match=f"Job {OLD_JOB} already ended FAILED; it cannot be cancelled"):
        cancel(OLD_JOB)
    with pytest.raises(JobNotFound):
        cancel("0" * 32)


@pytest.mark.parametrize(
    ("answer", "refusal", "message"),
    [
        (JobSubmissionFailure(job_id="j", reason="no sources", kind="invalid"), InvalidRequest, "no sources"),
        (JobSubmissionFailure(job_id="j", reason="dup", kind="duplicate"), DuplicateJob, "j was already submitted"),
        (JobSubmissionFailure(job_id="j", reason="a standby"), NotAccepted, "did not accept the job in time"),
    ],
)
async def test_a_refused_submission_is_a_typed_error(answer: Any, refusal: type[Exception], message: str) -> None:
    host = Host()
    host.answer = answer
    with pytest.raises(refusal, match=message):
        await RestfulGateway(host, None).submit_job(b'{"jid": "j"}', 1.0)  # type: ignore[arg-type]
    assert [type(message) for message in host.asked] == [SubmitJob]


async def test_an_accepted_submission_answers_the_job_id() -> None:
    host = Host()
    host.answer = "accept"
    assert await RestfulGateway(host, None).submit_job(b'{"jid": "j1"}', 1.0) == "j1"  # type: ignore[arg-type]


# -- prior attempts (Flink's priorExecutions) -------------------------------------------------------


def restarted_job() -> JobMaster:
    """A real JobMaster whose sink failed once, was restarted, and finished."""
    graph = job_graph(("source", 1), ("sink", 1), edges=(("source", "sink"),))
    config = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "1 s"}
    job, gateway = start_job(graph, config)
    run_to(job, current(job, "source"), ExecutionState.FINISHED)
    gateway.settle()
    sink = current(job, "sink")
    sink.task_manager_id = "tm-1"
    run_to(job, sink, ExecutionState.FAILED, "ValueError: bad record 7")
    gateway.settle()
    gateway.advance(1.0)
    io = IOMetrics(records_in=5, records_out=0, bytes_in=50, bytes_out=0, busy_ms=10, idle_ms=1)
    run_to(job, current(job, "sink"), ExecutionState.FINISHED, io_metrics=io)
    gateway.settle()
    assert job.status is JobStatus.FINISHED and current(job, "sink").attempt_number == 1
    return job


def test_a_subtasks_prior_attempts_answer_as_flinks_attempts(store: JobStore) -> None:
    host = Host()
    job = restarted_job()
    host.jobs[job.job_id] = job
    gateway = RestfulGateway(host, None)  # type: ignore[arg-type]

    failed = job_views.subtask_attempt(gateway.subtask_attempt(job.job_id, "sink", 0, 0))
    assert failed["subtask"] == 0 and failed["attempt"] == 0 and failed["status"] == "FAILED"
    assert failed["failure-cause"] == "ValueError: bad record 7"
    assert (failed["taskmanager-id"], failed["endpoint"], failed["host"]) == ("tm-1", "tcp://tm-1", "host-1")
    assert 0 < failed["start-time"] <= failed["end-time"] and failed["duration"] >= 0
    assert set(failed) >= {"start_time", "metrics", "status-duration"}
    assert "FAILED" in failed["status-duration"] and "prior-attempts" not in failed
    now = job_views.subtask_attempt(gateway.subtask_attempt(job.job_id, "sink", 0, 1))
    assert (now["attempt"], now["status"], now["metrics"]["read-records"]) == (1, "FINISHED", 5)

    details = job_views.subtask_details(gateway.subtask(job.job_id, "sink", 0))
    assert details["attempt"] == 1 and [p["attempt"] for p in details["prior-attempts"]] == [0]
    assert details["prior-attempts"][0] == {
        **failed,
        "status-duration": details["prior-attempts"][0]["status-duration"],
    }
    vertex = job_views.vertex_subtasks(gateway.vertex_subtasks(job.job_id, "sink"))
    assert [p["status"] for p in vertex["subtasks"][0]["prior-attempts"]] == ["FAILED"]
    assert (
        job_views.vertex_subtasks(gateway.vertex_subtasks(job.job_id, "source"))["subtasks"][0]["prior-attempts"] == []
    )

    with pytest.raises(VertexNotFound, match=r"Attempt 2 not found in subtask 0 .* the attempts kept are \[0, 1\]"):
        gateway.subtask_attempt(job.job_id, "sink", 0, 2)
    with pytest.raises(VertexNotFound, match="has no subtask 1: its subtasks are 0 to 0"):
        gateway.subtask(job.job_id, "sink", 1)
    with pytest.raises(VertexNotFound, match="has no vertex 'nope'"):
        gateway.subtask(job.job_id, "nope", 0)


def test_an_archived_job_keeps_its_prior_attempts(store: JobStore, tmp_path: Path) -> None:
    job = restarted_job()
    live = RestfulGateway(Host(), None)  # type: ignore[arg-type]
    live._host.jobs[job.job_id] = job  # type: ignore[attr-defined]
    expected = job_views.subtask_attempt(live.subtask_attempt(job.job_id, "sink", 0, 0))
    details, exceptions = archive_documents(job, Host().task_managers.get)
    store.add_job(job.job_id, job.name, job.job_graph.to_json(), 1.0)
    store.update_status(job.job_id, "FINISHED", 2.0)
    store.archive(job.job_id, details, exceptions)
    [record] = store.archived_jobs()

    gateway = RestfulGateway(Host({job.job_id: record}), None)  # type: ignore[arg-type]
    archived = job_views.subtask_attempt(gateway.subtask_attempt(job.job_id, "sink", 0, 0))
    durations = archived.pop("status-duration")
    assert archived == {k: v for k, v in expected.items() if k != "status-duration"}
    assert set(durations) == set(expected["status-duration"])
    assert gateway.subtask_attempt(job.job_id, "sink", 0, 1).status == "FINISHED"
    assert [s.attempt for s in gateway.vertex_subtasks(job.job_id, "sink").subtasks] == [1]
    with pytest.raises(VertexNotFound, match="Attempt 5 not found"):
        gateway.subtask_attempt(job.job_id, "sink", 0, 5)
    # A row archived before attempts were kept still reads, and says it has no subtasks.
    with JobStore(f"sqlite:///{tmp_path / 'old.db'}") as old_store:
        old = RestfulGateway(Host({OLD_JOB: archive_old_row(old_store)}), None)  # type: ignore[arg-type]
        assert old.job_details(OLD_JOB).subtasks == {}
        with pytest.raises(JobNotFound, match="unknown, or expired from the job store"):
            old.subtask_attempt(OLD_JOB, "sink", 0, 0)


def test_the_attempt_routes_leave_the_subtasks_metrics_route_alone() -> None:
    """/subtasks/:n only matches a number: /subtasks/metrics stays the metric route's."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from flink_runtime.rest.errors import install_error_handlers
    from flink_runtime.rest.job_routes import job_routes
    from flink_runtime.rest.metric_routes import metric_routes

    host = Host()
    job = restarted_job()
    host.jobs[job.job_id] = job
    gateway = RestfulGateway(host, None)  # type: ignore[arg-type]
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(job_routes(gateway, 1.0, "http://rest"))
    app.include_router(metric_routes(gateway))
    http = TestClient(app, raise_server_exceptions=False)
    subtask = f"/jobs/{job.job_id}/vertices/sink/subtasks"
    assert http.get(f"{subtask}/0/attempts/0").json()["status"] == "FAILED"
    assert http.get(f"{subtask}/0").json()["prior-attempts"][0]["attempt"] == 0
    metrics = http.get(f"{subtask}/metrics")
    assert metrics.status_code == 200 and isinstance(metrics.json(), list)
    for wrong in (f"{subtask}/0/attempts/x", f"{subtask}/0/attempts/-1", f"{subtask}/0/attempts/7", f"{subtask}/3"):
        answer = http.get(wrong)
        assert answer.status_code == 404 and answer.json()["errors"], wrong


def test_the_overview_counts_jobs_archived_in_an_earlier_run(store: JobStore) -> None:
    """After a JobManager restart the job list shows the archived jobs: /overview counts them too."""
    host = Host({OLD_JOB: archive_old_row(store)})
    host.slot_pool = SimpleNamespace(total_slots=2, free_slots=2)  # type: ignore[attr-defined]
    overview = RestfulGateway(host, None).cluster_overview()  # type: ignore[arg-type]
    assert (overview.jobs_failed, overview.jobs_finished, overview.jobs_running) == (1, 0, 0)
