"""The code samples of README.md and docs/*.md, as tests/test_docs.py and
tests/test_docs_samples.py check them.

A sample is a fenced block. Its info string names the language and, for Python, how the
tests treat it:

    ```python           runs in tests/test_docs.py (quick, no Spark, no Airflow)
    ```python spark     runs in tests/test_docs_samples.py (starts a SparkSession)
    ```python dag       a DAG file: imported by Airflow in tests/test_docs_samples.py
    ```pycon            a doctest: every `>>>` line runs and its output is compared
    ```sh               commands: make targets, CLI options and repository paths exist
    ```json / ```yaml   parse; a JobGraph validates, configuration keys exist
    ```text             diagrams, log lines: not code

The samples of one page that run share one namespace, in page order, as a reader
typing them one after the other would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES: tuple[Path, ...] = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

LANGUAGES = {"python", "pycon", "sh", "json", "yaml", "text"}
PYTHON_TAGS = {"spark", "dag"}

# An opening or closing fence, possibly indented (a sample inside a list item).
_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Sample:
    page: Path
    line: int  # the first line of the code, 1-based
    language: str
    tags: frozenset[str]
    code: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def page_samples(page: Path) -> list[Sample]:
    """Every fenced block of the page, its indentation removed."""
    lines = page.read_text().splitlines()
    found: list[Sample] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent = len(opening["indent"])
        info = opening["info"].split()
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"{page.relative_to(ROOT)}:{index + 1}: a code fence is never closed")
        code = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
        language = info[0] if info else ""
        found.append(Sample(page, index + 2, language, frozenset(info[1:]), code))
        index = end + 1
    return found


def all_samples() -> list[Sample]:
    return [sample for page in PAGES for sample in page_samples(page)]


def text_outside_code(page: Path) -> str:
    """The page's prose: fenced blocks and inline code spans blanked out (kept as
    empty lines, so positions stay roughly right)."""
    lines = page.read_text().splitlines()
    prose: list[str] = []
    inside = False
    for line in lines:
        if _FENCE.match(line):
            inside = not inside
            prose.append("")
            continue
        prose.append("" if inside else re.sub(r"`[^`]*`", "``", line))
    return "\n".join(prose)


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped,
    spaces as hyphens, a repeated heading numbered."""
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    inside = False
    for line in page.read_text().splitlines():
        if _FENCE.match(line):
            inside = not inside
        heading = None if inside else re.match(r"^#{1,6} +(.*?) *#*$", line)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
        number = counts.get(slug, 0)
        counts[slug] = number + 1
        anchors.add(slug if number == 0 else f"{slug}-{number}")
    return anchors
