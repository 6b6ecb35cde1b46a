"""test_schedules's seeds run in the background of a whole pytest session.

The rest of the suite mostly waits (on processes, JVMs, sockets): when the session also
runs other tests, the schedules start as soon as collection ends, in a child process at
lower CPU priority (runner.BackgroundRun), and test_schedules only collects and checks
their result. A session that ends without test_schedules collecting it (-x, Ctrl-C, a
crash) kills the run before tests/conftest.py looks for processes left behind. A session
of tests/simulation alone runs them in test_schedules itself, as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.xdist_scheduling import runs_simulation_background
from tests.simulation import runner

_HERE = Path(__file__).resolve().parent


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or runner.background is not None:
        return
    if not runs_simulation_background(session.config):  # under xdist: only gw0 (tests/helpers/xdist_scheduling.py)
        return
    items = session.items
    schedules = next((item for item in items if _is_test_schedules(item)), None)
    if schedules is None or all(Path(item.path).resolve().is_relative_to(_HERE) for item in items):
        return
    module = schedules.module  # type: ignore[attr-defined]
    runner.background = runner.BackgroundRun(module.FIRST_SEED, module.SCHEDULES, module.WORKERS)
    # A plugin, not this conftest: pytest calls a conftest's per-test hooks only for the
    # tests under its directory, and the session may end in any test's teardown.
    session.config.pluginmanager.register(_KillWhenSessionEnds(), "simulation-background")


def _is_test_schedules(item: pytest.Item) -> bool:
    return item.name == "test_schedules" and Path(item.path).resolve() == _HERE / "test_simulation.py"


class _KillWhenSessionEnds:
    """Kills a background run nothing collected before pytest tears down the session
    fixtures, among them tests/conftest.py's check that no process of the run outlived it:
    in the teardown of the last test run (nextitem None: the end, or -x / --maxfail
    stopping), or in sessionfinish when no test teardown ran (Ctrl-C, an internal error)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        if nextitem is None:
            runner.kill_background()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        runner.kill_background()
