"""The dashboard's views in headless Chromium against the session MiniCluster: an ended
job's timeline ends at its end, a finished number source's splits count as done, times
carry a date, tables sort by a clicked header, and the JobManager page shows its
metrics, configuration and environment."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from tests.browser.conftest import script_errors, wait_until
from tests.browser.test_dashboard import by_css, text_of
from tests.helpers.jobs import modulo_sum_job

pytestmark = pytest.mark.integration

DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")


@pytest.fixture(scope="module")
def ended_job(minicluster: MiniCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A number-source job (5 splits) that finished."""
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(modulo_sum_job(tmp_path_factory.mktemp("ended-out"), name="dashboard ended job"))
        assert client.wait(job_id, timeout=60).value == "FINISHED"
        yield job_id


@pytest.fixture(autouse=True)
def no_script_errors(driver: Any) -> Iterator[None]:
    script_errors(driver)
    yield
    assert script_errors(driver) == []


def test_an_ended_jobs_timeline_ends_at_its_end(driver: Any, minicluster: MiniCluster, ended_job: str) -> None:
    with JobClient(minicluster.rest_url) as client:
        details = client.details(ended_job)
    time.sleep(1.5)  # "now" moves on past the job's end
    driver.get(f"{minicluster.rest_url}/#/jobs/{ended_job}")
    svg = wait_until("the timeline", lambda: by_css(driver, "#timeline svg.timeline-svg"))[0]
    assert int(svg.get_attribute("data-end")) <= details["end-time"]
    assert int(svg.get_attribute("data-end")) >= details["end-time"] - 5000


def test_dates_and_sortable_jobs_table(driver: Any, minicluster: MiniCluster, ended_job: str) -> None:
    driver.get(f"{minicluster.rest_url}/#/jobs")
    wait_until("the ended job's row", lambda: text_of(driver, f'tr.job-row[data-job-id="{ended_job}"]'))
    started = by_css(driver, f'tr.job-row[data-job-id="{ended_job}"] td')[2].text
    assert DATE_TIME.match(started), started
    # Its number source's splits all count as done once it finished (not "0/5").
    splits = by_css(driver, f'tr.job-row[data-job-id="{ended_job}"] td')[5].text
    assert splits.endswith("5/5"), splits

    def names() -> list[str]:
        """The jobs' names, lower-cased: the column sorted by (jobs may share a name)."""
        return [row.find_elements("css selector", "td")[0].text.lower() for row in by_css(driver, "tr.job-row")]

    header = by_css(driver, "table th")[0]
    header.click()
    assert header.get_attribute("data-sorted") == "asc"
    ascending = names()
    assert ascending == sorted(ascending)
    by_css(driver, "table th")[0].click()
    assert names() == sorted(ascending, reverse=True)


def test_the_jobmanager_page(driver: Any, minicluster: MiniCluster, tmp_path: Path) -> None:
    driver.get(f"{minicluster.rest_url}/#/jobmanager")
    wait_until("the process metrics", lambda: "Status.JVM.CPU.Load" in text_of(driver, "#jobmanager-metrics"))
    assert "Status.JVM.Memory.Heap.Used" in text_of(driver, "#jobmanager-metrics")
    wait_until("the configuration", lambda: "heartbeat.interval" in text_of(driver, "#jobmanager-config"))
    wait_until("the environment", lambda: "CPython" in text_of(driver, "#jobmanager-environment"))
    assert by_css(driver, "#jobmanager-logs")
    driver.save_screenshot(str(tmp_path / "jobmanager.png"))


def test_a_continuous_job_waiting_for_its_next_round(
    driver: Any, minicluster: MiniCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Between rounds a continuous job is shown as Flink shows a streaming job: its
    vertices RUNNING (not FINISHED), its rounds counted, its checkpoints acknowledged by
    every subtask (out of the real number of subtasks, not 0/0), and its slots held (used
    in /overview and on its TaskManagers, as Flink's REST counts a streaming job's): the
    next round is deployed into them without a slot request."""
    from tests.integration.test_continuous_sources import continuous_count
    from tests.integration.test_savepoints import write_corpus

    write_corpus(tmp_path / "in", files=2, seed=5)
    # The JobManager's log (in this process: the session MiniCluster's).
    caplog.set_level(logging.INFO, "flink_runtime.jobmanager.rounds")
    with JobClient(minicluster.rest_url) as client:
        job_id = client.submit(continuous_count(tmp_path / "in", tmp_path / "out").job_graph())
        try:
            details = wait_until(
                "the first round done",
                lambda: (d := client.details(job_id)).get("rounds", {}).get("waiting") and d,
                timeout=180,  # the session cluster's Spark may still be warming up
            )
            assert details["state"] == "RUNNING"
            assert details["rounds"]["count"] == 1 and details["rounds"]["last-round-end"] > 0
            assert {vertex["status"] for vertex in details["vertices"]} == {"RUNNING"}
            assert all(vertex["end-time"] == -1 for vertex in details["vertices"])
            subtasks = sum(vertex["parallelism"] for vertex in details["vertices"])
            # Its slots stay with it while it waits (slot.idle.timeout, 50 s): one per
            # subtask index (the vertices share slots), used as Flink shows them.
            held = max(vertex["parallelism"] for vertex in details["vertices"])
            assert details["rounds"]["slots"] == held
            assert held_slots(minicluster, job_id) == held
            overview = client.overview()
            assert overview["slots-available"] <= overview["slots-total"] - held
            # A savepoint while it waits: every subtask counted (not 0/0).
            client.savepoint(job_id, target_directory=str(tmp_path / "savepoints"), timeout=60)
            savepoint = client.checkpoints(job_id)["latest"]["savepoint"]
            assert savepoint["num_subtasks"] == savepoint["num_acknowledged_subtasks"] == subtasks

            driver.get(f"{minicluster.rest_url}/#/jobs/{job_id}")
            rounds = wait_until("the rounds", lambda: text_of(driver, "#job-rounds"))
            assert rounds.startswith("1, last ended ") and f"waiting for new input ({held} slots held)" in rounds, (
                rounds
            )
            states = wait_until(
                "the vertices",
                lambda: [row.find_elements("css selector", "td")[1].text for row in by_css(driver, "tr.vertex-row")],
            )
            assert states == ["RUNNING"] * len(details["vertices"]), states

            write_corpus(tmp_path / "in", files=1, seed=6, first=2)  # the second round
            waited = time.time() - details["rounds"]["last-round-end"] / 1000
            wait_until("round 2", lambda: client.details(job_id)["rounds"]["count"] == 2, timeout=60)
            wait_until("round 2 on the page", lambda: text_of(driver, "#job-rounds").startswith("2"), timeout=30)
            # Round 2 ran in the slots the job kept: no slot request (the JobManager's log).
            wait_until("round 2 done", lambda: client.details(job_id)["rounds"]["waiting"], timeout=90)
            said = [m for m in caplog.messages if m.startswith(f"Job {job_id}: round 1 published")]
            assert len(said) == 1, said
            if waited < 35:  # else (a very loaded machine) slot.idle.timeout (50 s) may have given them back
                assert said[0].startswith(f"Job {job_id}: round 1 published: 0 new slot request(s), "), said
            assert said[0].endswith(f"; waiting for new input with {held} slot(s) held."), said
            assert held_slots(minicluster, job_id) == held
        finally:
            client.cancel(job_id)
            client.wait(job_id, timeout=30)
        # Ended: its slots go back at once.
        wait_until("its slots back", lambda: held_slots(minicluster, job_id) == 0, timeout=10)


def held_slots(cluster: MiniCluster, job_id: str) -> int:
    """The slots every TaskManager shows allocated to the job (GET /taskmanagers/:id allocatedSlots)."""
    held = 0
    for tm in httpx.get(f"{cluster.rest_url}/taskmanagers", timeout=10).json()["taskmanagers"]:
        details = httpx.get(f"{cluster.rest_url}/taskmanagers/{tm['id']}", timeout=10).json()
        held += sum(1 for slot in details["allocatedSlots"] if slot["jobId"] == job_id)
    return held
