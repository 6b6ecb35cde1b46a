"""The JobMaster is a shell composed of parts: no mixins, no method typed
`self: JobMaster`, no part that imports the JobMaster back, no import cycle through the
modules of its parts, and its decisions in a module that imports none of them."""

from __future__ import annotations

import ast
from pathlib import Path

from flink_runtime.jobmanager import jobmaster as jobmaster_module
from flink_runtime.jobmanager.jobmaster import JobMaster
from flink_runtime.scheduler import job_scheduling

PACKAGE = Path(jobmaster_module.__file__).parent
PARTS = ["execution_deployment", "task_reports", "job_checkpoints", "rounds", "job_planning", "gateway", "submission"]


def imports_of(path: Path, prefix: str) -> set[str]:
    """The modules under `prefix` that the file imports, anywhere in it (TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(prefix):
            found.add(node.module.removeprefix(prefix))
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix(prefix) for a in node.names if a.name.startswith(prefix))
    return found


def test_the_jobmaster_is_no_class_of_mixins() -> None:
    assert JobMaster.__bases__ == (object,)


def test_no_part_imports_the_jobmaster_or_sits_on_a_cycle() -> None:
    prefix = "flink_runtime.jobmanager."
    for part in PARTS:
        seen: set[str] = set()
        todo = sorted(imports_of(PACKAGE / f"{part}.py", prefix))
        while todo:
            module = todo.pop()
            assert module not in ("jobmaster", part), f"jobmanager/{part}.py reaches back to {module}"
            if module not in seen and (PACKAGE / f"{module}.py").exists():
                seen.add(module)
                todo += sorted(imports_of(PACKAGE / f"{module}.py", prefix))


def test_no_method_of_a_part_is_typed_self_colon_its_host() -> None:
    for part in [*PARTS, "jobmaster"]:
        for node in ast.walk(ast.parse((PACKAGE / f"{part}.py").read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.args.args:
                first = node.args.args[0]
                assert not (first.arg == "self" and first.annotation is not None), f"{part}.py: {node.name}"


def test_the_decisions_import_no_jobmanager_module() -> None:
    assert imports_of(Path(job_scheduling.__file__), "flink_runtime.jobmanager") == set()
