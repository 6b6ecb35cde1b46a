"""Headless Chromium for the dashboard's browser tests: one driver per test module.

Chromium, chromedriver and selenium come with `make setup` (scripts/ensure-chromium.sh
and the dev extras). When one is missing the tests fail and say how to install it: a
skipped browser test would hide a dashboard nobody tested.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
CHROMIUM = "chromium"
CHROMEDRIVER = "chromedriver"


def chromium(performance_log: bool = False, arguments: Sequence[str] = ()) -> Any:
    """A headless Chromium under selenium (the caller quits it). `performance_log`: also
    record Chromium's DevTools events (every network response and its status);
    `arguments`: more command-line switches."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        pytest.fail(f"selenium is not installed ({exc}): make setup, or .venv/bin/uv pip install selenium")
    missing = [name for name in (CHROMIUM, CHROMEDRIVER) if shutil.which(name) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: run scripts/ensure-chromium.sh (make setup installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which(CHROMIUM) or CHROMIUM
    # --no-sandbox: Chromium's sandbox refuses to start as root (CI containers).
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000", *arguments):
        options.add_argument(argument)
    options.set_capability(
        "goog:loggingPrefs", {"browser": "ALL", **({"performance": "ALL"} if performance_log else {})}
    )
    chrome = webdriver.Chrome(service=Service(shutil.which(CHROMEDRIVER)), options=options)
    chrome.implicitly_wait(0)
    return chrome


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    chrome = chromium()
    try:
        yield chrome
    finally:
        chrome.quit()


def wait_until(what: str, condition: Callable[[], T], timeout: float = 20.0) -> T:
    """The first truthy value of `condition` (exceptions count as not yet), or fail naming `what`."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # a stale element while the page redraws, ...
            last_error = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last error: {last_error!r})")
        time.sleep(0.1)


def script_errors(driver: Any) -> list[str]:
    """JavaScript errors the page logged since the last call; a failed fetch (a 404 of an
    optional endpoint, a 401 before the token) is the page's business, not an error."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
    ]


def network_responses(driver: Any) -> list[tuple[str, int]]:
    """(url, status) of every response since the last call, and status 0 for every request
    that failed without one (refused, blocked, name not resolved), from the performance log
    of a driver made with chromium(performance_log=True)."""
    urls: dict[str, str] = {}
    answers: list[tuple[str, int]] = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif message["method"] == "Network.responseReceived":
            answers.append((params["response"]["url"], int(params["response"]["status"])))
        elif message["method"] == "Network.loadingFailed" and not params.get("canceled"):
            answers.append((urls.get(params["requestId"], "?"), 0))
    return answers
