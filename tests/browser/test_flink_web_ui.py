"""Apache Flink 2.3's own web dashboard against our cluster, in headless Chromium.

The dashboard's files come from the `apache-flink` wheel (tests/helpers/flink_web_ui.py
unpacks them from its flink-dist jar and serves them in front of the session
MiniCluster's REST API). The test walks what a Flink user opens: the overview, running
and completed jobs, a running job's graph and each tab of a vertex, its exceptions,
checkpoints (with the per-operator details of the latest one), configuration and
timeline, the TaskManagers and one TaskManager's metrics and thread dump, and the
JobManager's configuration, metrics, environment and thread dump. On every page: no
error notification of the dashboard, no script error, and no answer >= 400 (nor a
failed request) in Chromium's network log.

The JobManager's own pages read `/jobmanager/environment` and `/jobmanager/thread-dump`,
which the `dashboard` branch of issue 27 adds; with both merged, every page is here.
The log pages are not walked: the session MiniCluster writes no log files (env.log.dir
unset), and Flink itself answers 404 for a log file that does not exist.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.client import JobClient
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.browser.conftest import chromium, network_responses, wait_until
from tests.flink_tools import FLINK_VERSION, FlinkToolError
from tests.helpers.flink_web_ui import FlinkWebUI, flink_web_dir

pytestmark = pytest.mark.integration

RUNNING_NAME = "flink ui running job"
FINISHED_NAME = "flink ui finished job"


def body_text(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def error_notices(driver: Any) -> list[str]:
    """The dashboard's error pop-ups (ng-zorro notifications: "Server Response Message")."""
    from selenium.webdriver.common.by import By

    return [notice.text for notice in driver.find_elements(By.CSS_SELECTOR, ".ant-notification-notice")]


@pytest.fixture(scope="module")
def web_dir() -> Path:
    try:
        return flink_web_dir()
    except (FlinkToolError, OSError) as exc:
        pytest.fail(f"Flink {FLINK_VERSION}'s web dashboard is not available: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def jobs(minicluster: MiniCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(running job, finished job): a continuous word count checkpointing every 2 s,
    with its first checkpoint completed, and a job that finished."""
    work = tmp_path_factory.mktemp("flink-web-ui")
    (work / "in").mkdir()
    (work / "in" / "a.txt").write_text("to be or not to be\nthat is the question\n")
    pipeline = Pipeline(RUNNING_NAME, parallelism=2)
    (
        pipeline.read_text(str(work / "in" / "*.txt"), split_size=1, monitor_interval=0.5)
        .select("explode(split(value, ' ')) AS word")
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(work / "out"), mode="overwrite")
    )
    graph = pipeline.job_graph()
    graph.config.update({"execution.checkpointing.interval": "2 s", "state.checkpoints.dir": str(work / "chk")})
    with JobClient(minicluster.rest_url) as client:
        finished = client.submit(
            JobGraph(name=FINISHED_NAME, vertices=[JobVertex(id="noop", name="Noop", invokable="noop")])
        )
        running = client.submit(graph)
        assert client.wait(finished, timeout=60).value == "FINISHED"
        wait_until(
            "a completed checkpoint of the running job",
            lambda: client.checkpoints(running)["counts"]["completed"] > 0,
            timeout=60,
        )
        yield running, finished
        client.cancel(running)
        client.wait(running, timeout=30)


def test_flink_web_ui_walks_every_page_without_an_error(
    web_dir: Path, minicluster: MiniCluster, jobs: tuple[str, str], tmp_path: Path
) -> None:
    running, finished = jobs
    with JobClient(minicluster.rest_url) as client:
        details = client.details(running)
    vertices = {vertex["id"]: vertex["name"] for vertex in details["vertices"]}
    tm_id = sorted(minicluster.jobmanager.task_managers)[0]
    driver = chromium(performance_log=True)
    problems: list[str] = []
    with FlinkWebUI(minicluster.rest_url, web_dir=web_dir) as ui:
        try:

            def visit(page: str, *expected: str) -> str:
                """Open `#/page`, wait until the page shows every `expected` text, and
                record what went wrong on the way; the page's text."""
                driver.get(f"{ui.url}/#/{page}")
                text = wait_until(
                    f"{', '.join(map(repr, expected)) or 'the page'} on #/{page}",
                    lambda: (t := body_text(driver)) and all(e in t for e in expected) and t,
                    timeout=30,
                )
                time.sleep(0.3)  # the page's remaining requests (metrics, refreshes)
                for url, status in network_responses(driver):
                    if status >= 400 or status == 0:
                        problems.append(f"#/{page}: {url} answered {status or 'nothing (failed)'}")
                for notice in error_notices(driver):
                    problems.append(f"#/{page}: error notice {notice!r}")
                for entry in driver.get_log("browser"):
                    if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]:
                        problems.append(f"#/{page}: script error {entry['message'][:300]}")
                driver.save_screenshot(str(tmp_path / (page.replace("/", "_") + ".png")))
                return text

            # Flink 2.3's overview lists applications (none here: jobs are submitted as JobGraphs).
            visit("overview", "Available Task Slots", "Running Application List")
            visit("job/running", RUNNING_NAME)
            visit("job/completed", FINISHED_NAME)
            job = f"job/running/{running}"
            graph = visit(f"{job}/overview", RUNNING_NAME, *vertices.values())
            assert "RUNNING" in graph
            first = next(iter(vertices))
            for tab in ("detail", "subtasks", "taskmanagers", "watermarks", "accumulators", "backpressure"):
                visit(f"{job}/overview/{first}/{tab}", vertices[first])
            visit(f"{job}/exceptions", "Root Exception")
            # The latest checkpoint's operators, each with all its subtasks acknowledged ("2/2
            # (100%)"; "1/1" for the final aggregate once its parallelism is decided).
            checkpoints = visit(f"{job}/checkpoints", "Latest Completed Checkpoint", *vertices.values())
            assert len(re.findall(r"\b(\d+)/\1 \(100%\)", checkpoints)) == len(vertices), checkpoints
            # An operator's row expanded: its subtasks (checkpoints/details/:cid/subtasks/:vid).
            from selenium.webdriver.common.by import By

            rows = len(driver.find_elements(By.CSS_SELECTOR, "tr"))
            driver.find_elements(By.CSS_SELECTOR, "button.ant-table-row-expand-icon")[0].click()
            wait_until(
                "the subtasks of the first operator",
                lambda: len(driver.find_elements(By.CSS_SELECTOR, "tr")) >= rows + 2,
            )
            visit(f"{job}/checkpoints", "Latest Completed Checkpoint")  # collects what the expansion asked
            visit(f"{job}/configuration", "Execution Configuration")
            visit(f"job/completed/{finished}/overview", FINISHED_NAME, "Noop")
            visit("task-manager", tm_id)
            visit(f"task-manager/{tm_id}/metrics", tm_id)
            visit(f"task-manager/{tm_id}/thread-dump", "Id=")
            visit("job-manager/config", "heartbeat.interval")
            visit("job-manager/metrics")
            visit("job-manager/environment")
            visit("job-manager/thread-dump", "Id=")
        finally:
            driver.quit()
    assert problems == [], "\n".join(problems)
