"""The web dashboard in a real browser (headless Chromium driven by selenium) against a
real MiniCluster: the overview, a TaskManager's resources, a running job in the jobs
list, its graph, a cancel pressed on its page, a failed job's exception, every attempt
of a restarted subtask in the timeline, and a token-protected cluster.

Each test saves a screenshot under its pytest tmp dir (look there when one fails).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException

from flink_runtime.client import JobClient
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.browser.conftest import script_errors, wait_until
from tests.conftest import fast_config
from tests.helpers.jobs import flaky_job

pytestmark = pytest.mark.integration

FAILURE_MESSAGE = "dashboard test: this line is too long"
TOKEN = "dashboard-test-token"


def by_css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def text_of(driver: Any, selector: str) -> str:
    found = by_css(driver, selector)
    return found[0].text if found else ""


def write_input(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "a.txt").write_text("to be or not to be\nthat is the question\n")
    return directory


def continuous_job(work: Path) -> Pipeline:
    """Runs until cancelled: its source keeps watching its folder for new files."""
    pipeline = Pipeline("dashboard running job", parallelism=2)
    (
        pipeline.read_text(str(write_input(work / "in") / "*.txt"), split_size=1, monitor_interval=0.5)
        .select("explode(split(value, ' ')) AS word")
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(work / "out"), mode="overwrite")
    )
    return pipeline


def failing_job(work: Path) -> Pipeline:
    """Fails on its first row (the plan check on an empty DataFrame passes): Spark's
    assert_true raises with our message."""
    pipeline = Pipeline("dashboard failing job", parallelism=1)
    (
        pipeline.read_text(str(write_input(work / "in") / "*.txt"))
        .filter(f"assert_true(length(value) < 0, '{FAILURE_MESSAGE}') IS NULL")
        .write_parquet(str(work / "out"), mode="overwrite")
    )
    return pipeline


@pytest.fixture(scope="module")
def client(minicluster: MiniCluster) -> Iterator[JobClient]:
    with JobClient(minicluster.rest_url) as job_client:
        yield job_client


@pytest.fixture(scope="module")
def running_job(client: JobClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    job_id = client.submit(continuous_job(tmp_path_factory.mktemp("running-job")).job_graph())
    yield job_id
    if client.status(job_id).value not in ("CANCELED", "FINISHED", "FAILED"):
        client.cancel(job_id)
        client.wait(job_id, timeout=30)


@pytest.fixture(autouse=True)
def no_script_errors(driver: Any) -> Iterator[None]:
    script_errors(driver)  # forget what earlier tests left
    yield
    assert script_errors(driver) == []


def test_the_overview_shows_the_taskmanagers_and_slots(driver: Any, minicluster: MiniCluster, tmp_path: Path) -> None:
    driver.get(f"{minicluster.rest_url}/")
    wait_until("2 TaskManagers", lambda: text_of(driver, "#card-taskmanagers .card-value") == "2")
    assert text_of(driver, "#card-slots .card-value").endswith("/ 4")
    rows = wait_until("the TaskManager rows", lambda: by_css(driver, "#overview-taskmanagers .tm-row"))
    assert sorted(row.text.split()[0] for row in rows) == sorted(minicluster.jobmanager.task_managers)
    driver.save_screenshot(str(tmp_path / "overview.png"))


def test_a_taskmanagers_page_shows_its_total_and_free_resources(
    driver: Any, minicluster: MiniCluster, tmp_path: Path
) -> None:
    tm_id = sorted(minicluster.jobmanager.task_managers)[0]
    total = minicluster.jobmanager.slot_pool.total_resource_of(tm_id)
    driver.get(f"{minicluster.rest_url}/#/taskmanagers/{tm_id}")

    def resources_row() -> str | None:
        return next((row.text for row in by_css(driver, "#taskmanager tr") if row.text.startswith("Resources")), None)

    text = wait_until("the Resources row", resources_row)
    assert f"{total.cpu_cores:g} cores" in text and "in total; free:" in text, text
    assert any(row.text.startswith("Slots in use") for row in by_css(driver, "#taskmanager tr"))
    driver.save_screenshot(str(tmp_path / "taskmanager.png"))


def test_a_running_job_appears_in_the_jobs_list(
    driver: Any, minicluster: MiniCluster, running_job: str, tmp_path: Path
) -> None:
    driver.get(f"{minicluster.rest_url}/#/jobs")
    row = f'tr.job-row[data-job-id="{running_job}"]'
    wait_until("the job's row, RUNNING", lambda: "RUNNING" in text_of(driver, row))
    assert "dashboard running job" in text_of(driver, row)
    driver.save_screenshot(str(tmp_path / "jobs.png"))


def test_the_job_page_draws_the_graph_with_its_vertices(
    driver: Any, minicluster: MiniCluster, client: JobClient, running_job: str, tmp_path: Path
) -> None:
    vertices = client.details(running_job)["vertices"]
    driver.get(f"{minicluster.rest_url}/#/jobs/{running_job}")

    def drawn_vertices() -> dict[str, str]:
        # Read in one go: a refresh may redraw the graph (its figures changed) at any time;
        # a node redrawn while it is read is read again on the next poll.
        try:
            nodes = by_css(driver, "svg.job-graph g.vertex")
            return {node.get_attribute("data-vertex-id"): node.text for node in nodes}
        except StaleElementReferenceException:
            return {}

    drawn = wait_until("a graph node per vertex", lambda: len(found := drawn_vertices()) == len(vertices) and found)
    assert set(drawn) == {vertex["id"] for vertex in vertices}
    for vertex in vertices:
        label = drawn[vertex["id"]]
        # A chain's operators are drawn one per line: "Read text -> Select" as two.
        assert all(operator in label for operator in vertex["name"].split(" -> ")), (vertex["name"], label)

    def parallelism_as_the_rest_api_says() -> bool:
        # The final aggregate's parallelism is decided once the sources finish (adaptive
        # parallelism): the page shows it as the REST API does, after its next refresh.
        now = {vertex["id"]: vertex["parallelism"] for vertex in client.details(running_job)["vertices"]}
        found = drawn_vertices()
        return bool(found) and all(f"Parallelism: {now[vertex_id]}" in found.get(vertex_id, "") for vertex_id in now)

    wait_until("each vertex's parallelism drawn", parallelism_as_the_rest_api_says)
    assert "HASH" in text_of(driver, "svg.job-graph")  # the keyed edge's ship strategy
    # The sources' subtasks are deployed first (the consumers once their input is ready).
    wait_until("the timeline's subtasks", lambda: by_css(driver, ".timeline-row"))
    driver.save_screenshot(str(tmp_path / "job.png"))


def test_cancel_on_the_job_page_cancels_the_job(
    driver: Any, minicluster: MiniCluster, client: JobClient, running_job: str, tmp_path: Path
) -> None:
    driver.get(f"{minicluster.rest_url}/#/jobs/{running_job}")
    cancel = wait_until(
        "an enabled cancel button", lambda: [b for b in by_css(driver, "#cancel-job") if b.is_enabled()]
    )
    cancel[0].click()
    by_css(driver, "#cancel-confirm-yes")[0].click()
    assert client.wait(running_job, timeout=30).value == "CANCELED"
    wait_until("the page to show CANCELED", lambda: text_of(driver, "#job-state") == "CANCELED")
    assert not by_css(driver, "#cancel-job")[0].is_enabled()
    driver.save_screenshot(str(tmp_path / "cancelled.png"))


def test_a_failed_jobs_page_shows_its_exception(
    driver: Any, minicluster: MiniCluster, client: JobClient, tmp_path: Path
) -> None:
    job_id = client.submit(failing_job(tmp_path).job_graph())
    assert client.wait(job_id, timeout=60).value == "FAILED"
    driver.get(f"{minicluster.rest_url}/#/jobs/{job_id}")
    wait_until("the stack trace on the page", lambda: FAILURE_MESSAGE in text_of(driver, "#exceptions pre.stacktrace"))
    assert text_of(driver, "#job-state") == "FAILED"
    driver.save_screenshot(str(tmp_path / "failed.png"))


def test_the_timeline_shows_every_attempt_of_a_restarted_subtask(
    driver: Any, minicluster: MiniCluster, client: JobClient, tmp_path: Path
) -> None:
    job_id = client.submit(flaky_job())
    assert client.wait(job_id, timeout=60).value == "FINISHED"
    driver.get(f"{minicluster.rest_url}/#/jobs/{job_id}")
    row = '#timeline .timeline-row[data-vertex-id="flaky"]'
    bars = wait_until("both attempts in the timeline", lambda: len(by_css(driver, f"{row} .timeline-attempt")) == 2)
    assert bars
    attempts = [
        (bar.get_attribute("data-attempt"), bar.get_attribute("data-status"))
        for bar in by_css(driver, f"{row} .timeline-attempt")
    ]
    assert attempts == [("0", "FAILED"), ("1", "FINISHED")]
    tip = by_css(driver, f'{row} .timeline-attempt[data-attempt="0"] title')[0].get_attribute("textContent")
    assert "attempt 0: FAILED" in tip and "flaky on purpose" in tip
    driver.save_screenshot(str(tmp_path / "attempts.png"))


def test_a_token_protected_cluster(driver: Any, tmp_path: Path) -> None:
    config = fast_config(**{"io.tmp.dirs": str(tmp_path / "data"), "security.rest.token": TOKEN})
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=1) as cluster:
        # The token in the URL fragment: data loads, and the token leaves the address bar.
        driver.get(f"{cluster.rest_url}/#token={TOKEN}")
        wait_until("the overview's data", lambda: text_of(driver, "#card-taskmanagers .card-value") == "1")
        assert TOKEN not in driver.current_url
        driver.save_screenshot(str(tmp_path / "with-token.png"))

        # Without it (a new tab's session), the page asks; a wrong token is refused.
        driver.execute_script("sessionStorage.clear()")
        driver.get(f"{cluster.rest_url}/#/overview")
        driver.refresh()
        wait_until("the login prompt", lambda: by_css(driver, "#login")[0].is_displayed())
        assert text_of(driver, "#card-taskmanagers .card-value") == ""  # no data without the token
        driver.save_screenshot(str(tmp_path / "login.png"))
        by_css(driver, "#login-token")[0].send_keys("wrong")
        by_css(driver, "#login-form button")[0].click()
        wait_until("the refusal", lambda: by_css(driver, "#login-error")[0].is_displayed())
        by_css(driver, "#login-token")[0].send_keys(TOKEN)
        by_css(driver, "#login-form button")[0].click()
        wait_until("the overview's data", lambda: text_of(driver, "#card-taskmanagers .card-value") == "1")
        assert not by_css(driver, "#login")[0].is_displayed()
