"""No import cycles between the packages of flink_runtime, nor between the modules of one
package.

Every `import flink_runtime.<package>...` counts, at module level, inside functions and
under TYPE_CHECKING alike: a cycle hidden in a function is still two concepts that
each need the other. Top-level modules (invokable.py, minicluster.py) count as
packages of their own.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import flink_runtime

ROOT = Path(flink_runtime.__file__).parent


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "flink_runtime" else None


def package_imports() -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the files that import it."""
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT)
        source = relative.parts[0].removesuffix(".py")
        if source == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                target = package_of(name)
                if target is not None and target != source:
                    edges[source][target].add(str(relative))
    return edges


def find_cycle(edges: dict[str, dict[str, set[str]]]) -> list[str] | None:
    visiting: list[str] = []
    done: set[str] = set()

    def visit(package: str) -> list[str] | None:
        if package in visiting:
            return visiting[visiting.index(package) :] + [package]
        if package in done:
            return None
        visiting.append(package)
        for target in sorted(edges.get(package, {})):
            if (cycle := visit(target)) is not None:
                return cycle
        visiting.pop()
        done.add(package)
        return None

    for package in sorted(edges):
        if (cycle := visit(package)) is not None:
            return cycle
    return None


def test_no_import_cycle_between_packages() -> None:
    edges = package_imports()
    cycle = find_cycle(edges)
    if cycle is not None:
        steps = [f"{a} -> {b} ({', '.join(sorted(edges[a][b]))})" for a, b in zip(cycle, cycle[1:], strict=False)]
        raise AssertionError("import cycle between packages:\n  " + "\n  ".join(steps))


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b": {"a.py"}}, "b": {"c": {"b.py"}}, "c": {"a": {"c.py"}}}
    assert find_cycle(edges) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": {"a.py"}}, "b": {}}) is None


def test_low_layers_do_not_reach_up() -> None:
    edges = package_imports()
    for low, high in [
        ("rpc", "scheduler"),
        ("checkpoint", "jobmanager"),
        ("operators", "pipeline"),
        ("jobmanager", "rest"),
        ("io", "operators"),
    ]:
        assert high not in edges.get(low, {}), f"{low} imports {high}: {sorted(edges[low][high])}"


def module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """The statements run when a module is imported, those under `if TYPE_CHECKING:` too
    (a type-only back-reference is still two modules that each need the other)."""
    for node in tree.body:
        if isinstance(node, ast.If):
            yield from node.body
        else:
            yield node


def module_imports_within_packages() -> dict[str, dict[str, set[str]]]:
    """module -> the modules of its own package it imports at module level."""
    paths = {_module_name(path): path for path in ROOT.rglob("*.py")}
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for module, path in paths.items():
        package = module.rsplit(".", 1)[0]
        for node in module_level(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name in paths and name != module and name.rsplit(".", 1)[0] == package:
                    edges[module][name].add(str(path.relative_to(ROOT)))
    return edges


def _module_name(path: Path) -> str:
    parts = ["flink_runtime", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycle_between_modules_of_a_package() -> None:
    """Components composed by constructor and typed against Protocols need no
    back-reference: a module that imports the one importing it is a mixin in disguise."""
    edges = module_imports_within_packages()
    cycle = find_cycle(edges)
    if cycle is not None:
        raise AssertionError("import cycle between modules of a package:\n  " + " -> ".join(cycle))
