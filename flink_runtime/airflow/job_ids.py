"""Job ids in Airflow: the one a task instance's try submits, and the one an operator is given.

SubmitJobOperator derives its job ids from the task instance (``deterministic_job_id``),
so a retry finds the job an earlier try submitted. Its XCom is a dict; operators and
sensors that take a ``job_id`` read it with ``job_id_from``, whether they get a job id,
that dict, or that dict rendered into a string template.
"""

from __future__ import annotations

import ast
import json
import uuid
from collections.abc import Mapping
from typing import Any

from flink_runtime.airflow.exceptions import FlinkRuntimeInvalidInput

__all__ = ["deterministic_job_id", "job_id_from"]

# The namespace of the job ids derived from task instances (any fixed UUID would do;
# changing it would make retries of running tasks miss their jobs).
_JOB_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "flink-runtime:airflow:job-id")
# What the error messages suggest instead.
_FORMS = "pass e.g. job_id=submit.output['job_id'] or \"{{ ti.xcom_pull('submit')['job_id'] }}\""


def deterministic_job_id(dag_id: str, task_id: str, run_id: str, map_index: int | None, try_number: int) -> str:
    """The job id a task instance's try submits: 32 hex digits, the same on every call."""
    key = f"{dag_id}\n{task_id}\n{run_id}\n{-1 if map_index is None else map_index}\n{try_number}"
    return uuid.uuid5(_JOB_ID_NAMESPACE, key).hex


def job_id_from(value: Any) -> str:
    """The job id in ``value``: a job id, SubmitJobOperator's XCom (a dict with ``job_id``),
    or that dict rendered into a string template (its repr, or JSON).

    ``{{ ti.xcom_pull('submit')['job_id'] }}`` and ``submit.output['job_id']`` (XCom key
    ``job_id``) are the documented forms; a whole dict is accepted as well. Raises
    FlinkRuntimeInvalidInput saying what was given.
    """
    if isinstance(value, str) and value.strip().startswith("{"):
        value = _parse_mapping(value.strip())
    if isinstance(value, Mapping):
        if not isinstance(value.get("job_id"), str) or not value["job_id"].strip():
            raise FlinkRuntimeInvalidInput(
                f"job_id: a dict without a 'job_id' string ({sorted(map(str, value))}); {_FORMS}"
            )
        value = value["job_id"]
    if not isinstance(value, str) or not value.strip():
        raise FlinkRuntimeInvalidInput(
            f"job_id must be a job id (32 hex digits) or SubmitJobOperator's XCom, got {type(value).__name__} "
            f"{value!r}; {_FORMS}"
        )
    return value.strip()


def _parse_mapping(text: str) -> Any:
    """A dict rendered into a template: its repr (single quotes, None) or JSON."""
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    raise FlinkRuntimeInvalidInput(
        f"job_id {text[:120]!r} looks like a dict but is neither JSON nor a Python literal; {_FORMS}"
    )
