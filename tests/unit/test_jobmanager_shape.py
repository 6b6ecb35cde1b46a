"""The JobManager is an actor shell composed of components: no mixins, no
method typed `self: JobManager`, and no module of jobmanager/ that reaches back to
jobmanager.py or sits on an import cycle with its own imports (TYPE_CHECKING imports
count: a back-reference there is still two concepts that each need the other)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from flink_runtime.jobmanager import jobmanager as jobmanager_module
from flink_runtime.jobmanager.jobmanager import JobManager
from flink_runtime.rpc.endpoint import RpcEndpoint

PACKAGE = Path(jobmanager_module.__file__).parent
# The JobManager's modules (the JobMaster's are composed likewise by their own change).
COMPONENTS = [
    "jobmanager",
    "leadership",
    "job_persistence",
    "operations",
    "checkpoint_retention",
    "resource_manager",
    "job_snapshots",
    "archived_jobs",
    "restful_gateway",
    "metrics",
    "task_fencing",
    "spark_session",
    "submission",
    "events",
    "jobstore",
    "jobstore_engine",
    "jobstore_schema",
]


@functools.cache
def parsed(module: str) -> ast.Module:
    return ast.parse((PACKAGE / f"{module}.py").read_text())


@functools.cache
def imports_within_package(module: str) -> frozenset[str]:
    """The jobmanager/ modules `module` imports, anywhere in it."""
    tree = parsed(module)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "flink_runtime.jobmanager":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("flink_runtime.jobmanager."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("flink_runtime.jobmanager."):
                    found.add(alias.name.split(".")[2])
    return frozenset(name for name in found if (PACKAGE / f"{name}.py").exists())


def test_the_jobmanager_is_no_class_of_mixins() -> None:
    assert JobManager.__bases__ == (RpcEndpoint,)


def test_no_module_reaches_back_to_the_jobmanager() -> None:
    back = [path.stem for path in PACKAGE.glob("*.py") if "jobmanager" in imports_within_package(path.stem)]
    assert back == [], f"modules of jobmanager/ importing jobmanager.py (type against a Protocol instead): {back}"


def test_no_component_module_is_on_an_import_cycle() -> None:
    for start in COMPONENTS:
        seen: set[str] = set()
        todo = sorted(imports_within_package(start))
        while todo:
            module = todo.pop()
            assert module != start, f"jobmanager/{start}.py is on an import cycle"
            if module not in seen:
                seen.add(module)
                todo += imports_within_package(module)


def test_no_method_of_a_component_is_typed_self_colon_its_host() -> None:
    for module in COMPONENTS:
        for node in ast.walk(parsed(module)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.args.args:
                first = node.args.args[0]
                assert not (first.arg == "self" and first.annotation is not None), f"{module}.py: {node.name}"
