"""Screenshots of the web dashboard for the README and docs/reference.md, from a real run.

Starts a MiniCluster (2 TaskManagers x 2 slots), runs the demo's word count over a
generated corpus, and saves what headless Chromium shows to docs/images/:

    dashboard-overview.png       the overview while the job runs
    dashboard-taskmanagers.png   the TaskManagers page while the job runs
    dashboard-job.png            the job's page (graph, vertices, subtasks, timeline) once it finished
    dashboard-jobmanager.png     the JobManager page (process metrics, configuration, environment, logs)
    flink-web-ui-overview.png    Apache Flink 2.3.0's own web UI (from the apache-flink wheel,
                                 tests/helpers/flink_web_ui.py) against the same cluster: overview
    flink-web-ui-job.png         ... and the finished job's page (graph, vertices)

PNGs over 200 KB are re-encoded with fewer colours (Pillow, if installed).

Needs chromium and chromedriver (scripts/ensure-chromium.sh) and selenium (the dev extras):

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs/images]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from flink_runtime.client import JobClient
from flink_runtime.configuration import Configuration
from flink_runtime.demo import generate_corpus, word_count
from flink_runtime.minicluster import MiniCluster

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.helpers: Flink's web UI in front of the cluster
from tests.helpers.flink_web_ui import FlinkWebUI  # noqa: E402

WIDTH = 1360


def chrome() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        f"--window-size={WIDTH},900",
        "--hide-scrollbars",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def wait_for(what: str, condition: Callable[[], object], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.2)


def text(driver: webdriver.Chrome, selector: str) -> str:
    found = driver.find_elements(By.CSS_SELECTOR, selector)
    try:
        return found[0].text if found else ""
    except StaleElementReferenceException:  # the page redrew it meanwhile: read it next time
        return ""


def shoot(driver: webdriver.Chrome, path: Path) -> None:
    """The whole page: the window grows to the page's height first."""
    time.sleep(0.5)  # let the last refresh paint
    # The window's size includes the browser's own frame: add it to the page's height.
    height, frame = driver.execute_script(
        "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]"
    )
    driver.set_window_size(WIDTH, min(max(height, 600), 2400) + frame)
    time.sleep(0.3)
    driver.save_screenshot(str(path))
    driver.set_window_size(WIDTH, 900)
    shrink(path)
    print(f"{path} ({path.stat().st_size // 1024} KB)")


def shrink(path: Path, limit: int = 200_000) -> None:
    """Keep a picture under `limit` bytes for the docs: fewer colours, then smaller."""
    if path.stat().st_size <= limit:
        return
    try:
        from PIL import Image
    except ImportError:
        print(f"{path} is over {limit // 1000} KB and Pillow is not installed to shrink it")
        return
    image = Image.open(path).convert("RGB")
    while True:
        image.quantize(colors=64).save(path, optimize=True)
        if path.stat().st_size <= limit or image.width < 800:
            return
        image = image.resize((image.width * 4 // 5, image.height * 4 // 5))


def flink_body(driver: webdriver.Chrome) -> str:
    return text(driver, "body")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dashboard-") as scratch:
        work = Path(scratch)
        generate_corpus(work / "in", files=24, lines_per_file=3_000)
        config = Configuration({"io.tmp.dirs": str(work / "data"), "state.savepoints.dir": str(work / "savepoints")})
        with (
            MiniCluster(config, num_taskmanagers=2, slots_per_taskmanager=2) as cluster,
            JobClient(cluster.rest_url) as client,
        ):
            driver = chrome()
            try:
                job_id = client.submit(
                    word_count(work / "in", work / "out", split_size="32k", name="word count").job_graph()
                )
                driver.get(f"{cluster.rest_url}/#/overview")
                wait_for(
                    "the job's tasks in their slots", lambda: text(driver, "#card-slots .card-value")[:1] not in "0"
                )
                wait_for("the job RUNNING", lambda: "RUNNING" in text(driver, "#running-jobs .job-row"))
                shoot(driver, args.out / "dashboard-overview.png")
                driver.get(f"{cluster.rest_url}/#/taskmanagers")
                wait_for("the TaskManagers' metrics", lambda: "%" in text(driver, ".tm-row"))
                shoot(driver, args.out / "dashboard-taskmanagers.png")
                client.wait(job_id, timeout=300)
                driver.get(f"{cluster.rest_url}/#/jobs/{job_id}")
                wait_for("the job graph", lambda: driver.find_elements(By.CSS_SELECTOR, "svg.job-graph .vertex"))
                wait_for("the timeline", lambda: driver.find_elements(By.CSS_SELECTOR, ".timeline-row"))
                shoot(driver, args.out / "dashboard-job.png")
                driver.get(f"{cluster.rest_url}/#/jobmanager")
                wait_for(
                    "the JobManager's metrics", lambda: "Status.JVM.CPU.Load" in text(driver, "#jobmanager-metrics")
                )
                wait_for("its environment", lambda: "CPython" in text(driver, "#jobmanager-environment"))
                shoot(driver, args.out / "dashboard-jobmanager.png")
                with FlinkWebUI(cluster.rest_url) as ui:
                    driver.get(f"{ui.url}/#/overview")
                    wait_for("Flink's overview", lambda: "Available Task Slots" in flink_body(driver))
                    time.sleep(2)  # its job lists and charts
                    shoot(driver, args.out / "flink-web-ui-overview.png")
                    driver.get(f"{ui.url}/#/job/completed/{job_id}/overview")
                    wait_for("Flink's job page", lambda: "FINISHED" in flink_body(driver))
                    shoot(driver, args.out / "flink-web-ui-job.png")
            finally:
                driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
