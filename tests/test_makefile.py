"""The Makefile's promises to a newcomer: `make demo` installs only what the demo needs,
`make test` everything the tests need. Read from `make -n` (what make would run), so the
check costs no install."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_ONLY_INSTALLERS = ("scripts/ensure-chromium.sh", "scripts/ensure-postgresql.sh")


def planned_commands(target: str) -> str:
    """The commands `make <target>` would run (recipes of phony prerequisites included)."""
    result = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout


@pytest.mark.parametrize("target", ["demo", "demo-pipeline"])
def test_the_demo_installs_what_it_runs_on_and_nothing_the_tests_alone_need(target: str) -> None:
    commands = planned_commands(target)
    assert "scripts/ensure-java.sh" in commands
    for installer in TEST_ONLY_INSTALLERS:
        assert installer not in commands, f"make {target} would run {installer}"


def test_the_tests_install_everything_they_start() -> None:
    commands = planned_commands("test")
    for installer in ("scripts/ensure-java.sh", *TEST_ONLY_INSTALLERS):
        assert installer in commands
