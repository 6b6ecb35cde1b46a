"""A Spark vertex's plan, resolved by a TaskManager for the JobManager's planner
(planner/remote_plan.py asks; taskmanager/plan_resolution.py answers).

The planner process would otherwise start a JVM of its own (~260 MB resident) only to
run Spark's analyzer on empty DataFrames; a TaskManager has a warm one for its tasks.
"""

from __future__ import annotations

from typing import Any

from flink_runtime.rpc.messages.base import Message


class ResolvePlan(Message):
    """planner -> TM: resolve a vertex's chain against its inputs' schemas
    (operators/spark/plan.py resolve_vertex), with the job's libraries importable."""

    job_id: str
    libraries: list[str] = []  # the job graph's: blob keys or paths, activated as a task would
    config: dict[str, Any] = {}  # the vertex config
    input_schemas: list[str | None] = []  # each input's schema as JSON
    files: list[str] = []  # a file source's files, listed and confined by the planner
    timeout: float = 60.0  # seconds the TaskManager gives the job's code before it answers timed_out


class PlanResolved(Message):
    resolved: dict[str, Any]  # what the tasks need (source or input schemas as JSON)
    output_schema: str  # JSON


class PlanRefused(Message):
    """The job's code failed resolving (user_code), or the TaskManager could not try
    (its libraries, its Spark: not user_code, the planner resolves itself then)."""

    error: str  # what was raised, described as the planner describes it (planner/tasks.py)
    cause_name: str = ""
    cause_trace: str = ""
    user_code: bool = True
    timed_out: bool = False
