"""The published JSON Schema of a JobGraph document.

The schema is generated from the structs, so it cannot drift from what the decoder
accepts, and checked in (as package data) so that clients in any language can read it
without running Python. Regenerate it after changing a struct:

    python -m flink_runtime.jobgraph.schema          # write the file
    python -m flink_runtime.jobgraph.schema --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from flink_runtime.jobgraph.jobgraph import json_schema

SCHEMA_FILE_NAME = "jobgraph.schema.json"


def schema_path() -> Traversable:
    """The installed schema file (a plain Path when the package is on disk)."""
    return files("flink_runtime") / "schema" / SCHEMA_FILE_NAME


def render_schema() -> str:
    """The schema file's exact contents: stable key order, so regenerating gives small diffs."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or check) the JobGraph JSON Schema file.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    args = parser.parse_args(argv)
    # The source tree next to this module, not wherever importlib finds the package:
    # regenerating must change the checked-in file.
    target = Path(__file__).resolve().parent.parent / "schema" / SCHEMA_FILE_NAME
    expected = render_schema()
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != expected:
            print(f"{target} is out of date; run python -m flink_runtime.jobgraph.schema", file=sys.stderr)
            return 1
        return 0
    target.write_text(expected, encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
