"""README.md and docs/*.md cannot rot: every code sample is compiled, run or checked
against the code, every link between the pages resolves, and the names the pages
use (classes, files, packages) exist. The samples that need Spark or Airflow run in
tests/test_docs_samples.py (an integration test); tests/helpers/doc_samples.py says
how a sample is labelled.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import importlib
import importlib.util
import io
import json
import re
import shlex
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
import yaml

from flink_runtime.client.cli_arguments import build_parser
from flink_runtime.configuration import OPTIONS, Configuration
from flink_runtime.invokable import BUILTIN_INVOKABLES
from flink_runtime.jobgraph import InvalidJobGraph, decode_job_graph
from flink_runtime.jobmanager.submission import _builtin_or_class_path
from tests.helpers.doc_samples import (
    LANGUAGES,
    PAGES,
    PYTHON_TAGS,
    ROOT,
    Sample,
    all_samples,
    heading_anchors,
    text_outside_code,
)

SAMPLES = all_samples()


def samples_of(language: str, *, tags: set[str] | None = None) -> list[Sample]:
    return [s for s in SAMPLES if s.language == language and (tags is None or s.tags <= tags)]


def ids(samples: list[Sample]) -> list[str]:
    return [str(sample) for sample in samples]


# -- the pages themselves -------------------------------------------------------------


def test_the_readme_starts_with_the_two_commands_and_stays_short() -> None:
    readme = ROOT / "README.md"
    lines = readme.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail into docs/"
    first = next(s for s in SAMPLES if s.page == readme)
    assert first.line == 4, "the first thing after the title is the block of the two commands"
    commands = [line.split("#")[0].strip() for line in first.code.splitlines()]
    assert commands == ["make demo", "make test"]


def test_every_sample_names_its_language() -> None:
    unlabelled = [
        f"{sample}: ```{sample.language} {' '.join(sorted(sample.tags))}".strip()
        for sample in SAMPLES
        if sample.language not in LANGUAGES
        or (sample.tags and sample.language != "python")
        or not sample.tags <= PYTHON_TAGS
    ]
    assert unlabelled == [], f"label each fence with one of {sorted(LANGUAGES)} (python: + {sorted(PYTHON_TAGS)})"


# -- Python ---------------------------------------------------------------------------


@pytest.mark.parametrize("sample", samples_of("python"), ids=ids(samples_of("python")))
def test_python_sample_compiles(sample: Sample) -> None:
    compile(sample.code, str(sample), "exec")


@pytest.mark.parametrize("sample", samples_of("python"), ids=ids(samples_of("python")))
def test_python_sample_imports_names_that_exist(sample: Sample) -> None:
    """What a sample imports exists. Airflow's own modules are left to the DAG import in
    tests/test_docs_samples.py (importing Airflow here would set it up in this process)."""
    missing = []
    for node in ast.walk(ast.parse(sample.code)):
        if isinstance(node, ast.ImportFrom) and node.module:
            module, names = node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            module, names = None, [alias.name for alias in node.names]
        else:
            continue
        for name in names if module is None else [module]:
            if name.split(".")[0] == "airflow" or name.startswith("flink_runtime.airflow"):
                continue
            if importlib.util.find_spec(name) is None:
                missing.append(name)
            elif module is not None:
                imported = importlib.import_module(module)
                missing += [f"{module}.{n}" for n in names if not hasattr(imported, n)]
    assert missing == []


def _runnable_pages() -> list[Path]:
    return sorted({s.page for s in samples_of("python", tags=set())})


@pytest.mark.parametrize("page", _runnable_pages(), ids=[str(p.relative_to(ROOT)) for p in _runnable_pages()])
def test_python_samples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's untagged Python samples run, in order, in one namespace, in an empty
    working directory (relative paths they write land there)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc_sample__"}
    output = io.StringIO()
    for sample in samples_of("python", tags=set()):
        if sample.page == page:
            with contextlib.redirect_stdout(output):
                exec(compile(sample.code, str(sample), "exec"), namespace)  # noqa: S102 - the docs' own samples
    assert "Traceback" not in output.getvalue()
    if "client.wait(job_id)" in "".join(s.code for s in samples_of("python", tags=set()) if s.page == page):
        assert "FINISHED" in output.getvalue(), output.getvalue()


@pytest.mark.parametrize("sample", samples_of("pycon"), ids=ids(samples_of("pycon")))
def test_pycon_sample_prints_what_it_shows(sample: Sample) -> None:
    test = doctest.DocTestParser().get_doctest(sample.code, {}, str(sample), str(sample.page), sample.line - 1)
    assert test.examples, "a pycon sample holds >>> lines"
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test, out=report.write)
    assert result.failed == 0, report.getvalue()


# -- JSON and YAML --------------------------------------------------------------------


@cache
def spark_operator_names() -> frozenset[str]:
    """The `op` values the Spark chain accepts: its `case "..."` arms and the operators
    that combine a vertex's inputs (read from the code, so a new operator needs no edit here)."""
    source = (ROOT / "flink_runtime/operators/spark/chain.py").read_text()
    names = set(re.findall(r'case "(\w+)"', source))
    from flink_runtime.operators.spark import chain

    return frozenset(names | set(chain.MULTI_INPUT_OPERATORS))


def check_job_graph(text: str) -> None:
    graph = decode_job_graph(text, invokable_exists=_builtin_or_class_path, builtin_invokables=BUILTIN_INVOKABLES)
    for vertex in graph.vertices:
        if vertex.invokable == "spark":
            operators = vertex.config.get("operators", [])
            unknown = [op["op"] for op in operators if op.get("op") not in spark_operator_names()]
            assert unknown == [], f"vertex {vertex.id}: unknown Spark operators {unknown}"


@pytest.mark.parametrize("sample", samples_of("json"), ids=ids(samples_of("json")))
def test_json_sample_parses_and_a_job_graph_validates(sample: Sample) -> None:
    document = json.loads(sample.code)
    if isinstance(document, dict) and "vertices" in document:
        check_job_graph(sample.code)
    elif isinstance(document, dict) and "invokable" in document:
        # One vertex, as a page shows it: it must be valid inside a graph of its own.
        check_job_graph(json.dumps({"name": "a page's vertex", "vertices": [document]}))


def test_the_linked_job_graph_examples_validate() -> None:
    examples = sorted((ROOT / "examples").glob("*.json"))
    assert examples
    for example in examples:
        try:
            check_job_graph(example.read_text())
        except InvalidJobGraph as error:
            pytest.fail(f"{example.relative_to(ROOT)}: {error}")


@cache
def known_config_keys() -> frozenset[str]:
    """The registry's keys, and every key the code reads by its name (string literals
    of the form a.b under flink_runtime/), which the registry may not list yet."""
    literals: set[str] = set(OPTIONS)
    for path in (ROOT / "flink_runtime").rglob("*.py"):
        literals.update(re.findall(r'"([a-z][\w-]*(?:\.[\w-]+)+)"', path.read_text()))
    return frozenset(literals)


def unknown_config_keys(keys: list[str]) -> list[str]:
    return [key for key in keys if not key.startswith("spark.") and key not in known_config_keys()]


@pytest.mark.parametrize("sample", samples_of("yaml"), ids=ids(samples_of("yaml")))
def test_yaml_sample_is_a_configuration_of_known_keys(sample: Sample) -> None:
    values = yaml.safe_load(sample.code)
    assert isinstance(values, dict)
    assert unknown_config_keys(list(Configuration(values).to_dict())) == []


# -- shell ----------------------------------------------------------------------------

# Commands the pages use that are not this project's (the checks below cover ours).
EXTERNAL_COMMANDS = {
    *("bin/flink", "cat", "cd", "curl", "docker", "docker-compose", "kill", "pip", "printf", "python3", "rm", "sed"),
}
REPO_DIRS = {"benchmarks", "dags", "docker", "docs", "examples", "flink_runtime", "plugins", "scripts", "tests"}


@cache
def make_targets() -> frozenset[str]:
    makefile = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([\w-]+):", makefile, re.MULTILINE))


def commands(code: str) -> Iterator[list[str]]:
    """Each command of a shell sample as words: continuation lines joined, comments
    dropped, `a=$(cmd)` yielding cmd too, a trailing `&` dropped."""
    text = code.replace("\\\n", " ")
    for line in text.splitlines():
        for inner in re.findall(r"\$\(([^()]*)\)", line):
            yield from commands(inner)
        words = shlex.split(re.sub(r"\$\(([^()]*)\)", "VALUE", line), comments=True)
        while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
            words = words[1:]  # environment assignments before the command
        while words and words[-1] == "&":
            words = words[:-1]
        if words:
            yield words


def command_problems(words: list[str]) -> list[str]:
    program, args = words[0], words[1:]
    problems = [f"{word}: no such file" for word in args if _repo_path(word) and not _exists(word)]
    if program == "make":
        problems += [f"make {a}: no such target" for a in args if "=" not in a and a not in make_targets()]
    elif Path(program).name == "flink-runtime":
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            try:
                parsed = build_parser().parse_args(args)
            except SystemExit:
                return problems + [f"flink-runtime {' '.join(args)}: {stderr.getvalue().strip()}"]
        keys = [prop.partition("=")[0] for prop in parsed.properties]
        problems += [f"-D {key}: no such configuration key" for key in unknown_config_keys(keys)]
    elif program == ".venv/bin/python":
        if args[:1] == ["-m"]:
            problems += [] if importlib.util.find_spec(args[1]) else [f"python -m {args[1]}: no such module"]
        elif not _exists(args[0]):
            problems.append(f"{args[0]}: no such file")
    elif program.startswith((".venv/", "scripts/")):
        problems += [] if _exists(program) else [f"{program}: no such file"]
    elif program not in EXTERNAL_COMMANDS:
        problems.append(f"{program}: not a command these checks know (another project's? add it to EXTERNAL_COMMANDS)")
    return problems


def _repo_path(word: str) -> bool:
    return word.split("/")[0] in REPO_DIRS and "/" in word


def _exists(word: str) -> bool:
    return any(ROOT.glob(word)) if any(c in word for c in "*?[") else (ROOT / word).exists()


@pytest.mark.parametrize("sample", samples_of("sh"), ids=ids(samples_of("sh")))
def test_shell_sample_uses_commands_targets_options_and_files_that_exist(sample: Sample) -> None:
    problems: list[str] = []
    cwd = ROOT
    for words in commands(sample.code):
        if words[0] == "cd":
            cwd = cwd / words[1]
            problems += [] if cwd.is_dir() else [f"cd {words[1]}: no such directory"]
            continue
        problems += command_problems(words)
    assert problems == []


# -- links and names --------------------------------------------------------------------

# Pages a generator writes (flink_runtime/configuration/docs.py writes
# configuration.md): a link to one may point ahead of the generator's first run.
GENERATED_PAGES = {ROOT / "docs" / "configuration.md"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_resolves_inside_the_repository(page: Path) -> None:
    broken = []
    for target in LINK.findall(text_outside_code(page)):
        if re.match(r"[a-z]+:", target):
            broken.append(f"{target}: links outside the repository")
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            if path not in GENERATED_PAGES:
                broken.append(f"{target}: no such file")
            continue
        if anchor and path.suffix == ".md" and anchor not in heading_anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert broken == []


def test_the_layout_names_every_package_and_module_of_flink_runtime() -> None:
    """docs/architecture.md's Layout tree lists flink_runtime/'s packages and top-level
    modules, and nothing that does not exist."""
    architecture = ROOT / "docs" / "architecture.md"
    tree = next(s for s in SAMPLES if s.page == architecture and s.code.startswith("flink_runtime/\n"))
    listed = set()
    for line in tree.code.splitlines()[1:]:
        if not line.startswith("  "):
            break
        name = re.match(r"^  ([\w.]+/?)", line)
        if name:
            listed.add(name[1])
    package = ROOT / "flink_runtime"
    present = {f"{p.name}/" for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"}
    present |= {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    assert sorted(listed - present) == [], "named in the layout, missing in flink_runtime/"
    assert sorted(present - listed) == [], "in flink_runtime/, missing in the layout"


# Names the pages use that belong to other projects.
OUTSIDE_NAMES = {
    *("FoundationDB", "TigerBeetle", "MinIO", "JavaScript", "GitHub", "OpenJDK", "MySQL"),
    *("StandaloneSessionClusterEntrypoint", "S3AFileSystem"),  # Flink's and Hadoop's classes
}


@cache
def repository_text() -> str:
    parts = []
    for folder in ("flink_runtime", "tests", "plugins", "dags", "docker", "scripts", "benchmarks"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".sh", ".js", ".html", ".yaml", ".json"} and path.is_file():
                parts.append(path.read_text(errors="replace"))
    parts.append((ROOT / "Makefile").read_text())
    return "\n".join(parts)


@cache
def repository_words() -> frozenset[str]:
    return frozenset(re.findall(r"\w+", repository_text()))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_class_names_a_page_uses_exist_in_the_code(page: Path) -> None:
    """CamelCase names (classes, messages, components, exceptions) appear in the code,
    so a renamed class cannot leave the docs behind."""
    names = set(re.findall(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b", page.read_text())) - OUTSIDE_NAMES
    assert sorted(names - repository_words()) == []


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_repository_files_a_page_names_exist(page: Path) -> None:
    """`path/to/file.py`-style names in code spans point at files of this repository
    (or of a package folder of it: `scheduler/failover.py` is flink_runtime's)."""
    missing = []
    for name in re.findall(r"`([\w./-]+/[\w.-]+\.(?:py|json|yaml|sh|md|cfg|toml))`", page.read_text()):
        if name.startswith(("bin/", "sbin/", "/")):
            continue  # Flink's and Spark's own scripts, absolute paths on a host
        candidates = [ROOT / name, ROOT / "flink_runtime" / name, *ROOT.glob(f"tests/*/{name}")]
        if not any(candidate.exists() for candidate in candidates):
            missing.append(name)
    assert missing == []
