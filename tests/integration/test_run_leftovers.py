"""The suite fails a run that leaves a process behind (tests/helpers/leftovers.py).

A real pytest run of a test that starts a detached process and forgets it: the run fails
naming that process, and the process is gone afterwards. Processes of other runs (this
one's, around it) are not its business."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.conftest import PROJECT_ROOT
from tests.helpers.leftovers import GRACE_ENV, python_driver

pytestmark = pytest.mark.integration  # a whole pytest run in a process of its own

LEAKY = """
import subprocess, sys

def test_forgets_a_process():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # LEAKED"], start_new_session=True)

def test_stops_its_process():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    process.kill()
    process.wait()
"""


def run_pytest(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_inner.py").write_text(source)
    # Without hypothesis's plugin (~0.8 s of its start-up): the inner tests use none of it.
    plugins = ["-p", "tests.conftest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugins, str(tmp_path)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        # Its leaked process is a plain sleeper, not a JVM: 1 s of grace is plenty.
        env={**os.environ, "PYTHONPATH": PROJECT_ROOT, GRACE_ENV: "1"},
    )


def test_a_run_that_leaves_a_process_behind_fails_naming_it_and_the_process_is_killed(tmp_path: Path) -> None:
    # A process of this (outer) run, alive all along: not the inner run's to report.
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        result = run_pytest(tmp_path, LEAKY)
        assert ours.poll() is None
    finally:
        ours.kill()
        ours.wait()
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "2 passed" in output and "1 error" in output, output  # the tidy test is not blamed
    match = re.search(r"pid (\d+) \(parent \d+(, orphaned)?\): \S+ -c import time; time.sleep\(600\)  # LEAKED", output)
    assert match, output
    assert "1 process(es) started by this test run outlived it" in output, output
    leaked = int(match.group(1))
    assert not psutil.pid_exists(leaked) or psutil.Process(leaked).status() == psutil.STATUS_ZOMBIE


SERVES_POSTGRES = """
import sys, time
from tests.helpers.postgres import postgres_server
with postgres_server() as server:
    print(server.port, flush=True)
    time.sleep(600)
"""


def test_a_test_process_killed_with_sigkill_takes_its_postgresql_server_with_it() -> None:
    # No fixture teardown runs then: the server must end on its own (tests/helpers/postgres.py).
    process = python_driver(SERVES_POSTGRES, PROJECT_ROOT)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip().isdigit(), "the server did not start"
        server = psutil.Process(process.pid).children(recursive=True)
        assert any(child.name() == "postgres" for child in server), server
    finally:
        process.kill()
        process.wait()
    gone, alive = psutil.wait_procs(server, timeout=20)
    assert not alive, f"outlived the test process that started them: {alive}"
