"""docs/configuration.md, generated from the option groups: one table per group.

    python -m flink_runtime.configuration.docs > docs/configuration.md   (make config-docs)

tests/unit/test_configuration_docs.py fails when the committed file differs from this output.
"""

from __future__ import annotations

import sys
from typing import Any

from flink_runtime.configuration.option import ConfigOption
from flink_runtime.configuration.registry import GROUPS, options_of

HEADER = """\
# Configuration reference

<!-- Generated from flink_runtime/configuration/*_options.py by `make config-docs`; do not edit. -->

Every key the runtime reads, with Flink's names. Values come, later ones winning, from
these defaults, `config.yaml` (`$FLINK_CONF_DIR/config.yaml` or `--config FILE`; nested
or flat keys), the `FLINK_PROPERTIES` environment variable (YAML) and `-D key=value`.

Durations are a number of milliseconds (`10000`) or a number and a unit (`10 s`, `500 ms`,
`2 min`, `1 h`, `1 d`). Memory sizes are a number of bytes or a number and a unit
(`64m`, `10 mb`, `1g`, `512KiB`; binary units). Enums are read case-insensitively.

"Job" says whether a job's own `config` (its JobGraph's, a Pipeline's `config=`, an
Airflow operator's `job_config`) may override the cluster's value for that job; a job
that sets a cluster setting is refused at submit (400) naming the key.

Keys starting with `spark.` are Spark's: they are handed to the SparkSessions of the
JobManager's planner and of the TaskManagers as they are (defaults: `local[slots]`, FAIR
scheduling, 8 shuffle partitions, no UI; `spark.remote=sc://host:port` uses Spark Connect).
"""


def _cell(text: str) -> str:
    # "<token>" would be read as an HTML tag and vanish from the rendered page.
    return text.replace("|", "\\|").replace("<", "\\<").replace("\n", " ")


def _default(option: ConfigOption[Any]) -> str:
    value = option.default
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return '`""`'
    return f"`{value}`"


def render() -> str:
    lines = [HEADER]
    for group in GROUPS:
        lines.append(f"## {group.TITLE}\n")  # type: ignore[attr-defined]
        lines.append(f"`{group.__module__}.{group.__name__}`\n")
        lines.append("| Key | Type | Default | Job | Description |")
        lines.append("|-----|------|---------|-----|-------------|")
        for option in options_of(group):
            job = "yes" if option.job_overridable else "no"
            lines.append(
                f"| `{option.key}` | {_cell(option.type_name)} | {_cell(_default(option))} | {job} "
                f"| {_cell(option.description)} |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
