"""The configuration registry is the one source: docs/configuration.md is generated from
it, and nothing outside it reads configuration values untyped."""

from __future__ import annotations

import re
from pathlib import Path

from flink_runtime.configuration import GROUPS, OPTIONS, options_of
from flink_runtime.configuration.docs import render

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "flink_runtime"
REGISTRY = PACKAGE / "configuration"


def test_the_committed_configuration_reference_is_current() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == render(), "docs/configuration.md is stale: run make config-docs"


def test_the_reference_has_a_row_for_every_option_under_its_group() -> None:
    text = render()
    for group in GROUPS:
        section = text.split(f"## {group.TITLE}\n", 1)[1].split("\n## ", 1)[0]  # type: ignore[attr-defined]
        for option in options_of(group):
            assert f"| `{option.key}` |" in section, option.key
    assert len(re.findall(r"^\| `", text, re.MULTILINE)) == len(OPTIONS)


def test_no_raw_configuration_read_outside_the_registry() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if REGISTRY not in path.parents
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ".raw(" in line
    ]
    assert offenders == [], "read these through a ConfigOption (Configuration.get):\n" + "\n".join(offenders)
