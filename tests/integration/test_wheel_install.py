"""The wheel, installed non-editable into a fresh virtual environment, runs a PySpark pipeline.

The rest of the suite imports flink_runtime from the source tree (the .venv holds an
editable install), so a package or data file that setup.cfg leaves out of the wheel
goes unnoticed there, and the Docker image, which installs the wheel non-editable,
crash-loops on it. Here the wheel is built from a copy of what docker/Dockerfile copies,
checked against every file git tracks under flink_runtime/, installed with --no-deps
into a new venv, and run from outside the repository with PYTHONPATH cleared.

The new venv borrows its dependencies (PySpark, ...) from the project's .venv through a
.pth file naming that site-packages folder: reinstalling PySpark would take minutes, and
a path line in a .pth only extends sys.path; the .pth files inside the folder named are
not processed, so the editable install's import hook stays out.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path, PurePosixPath

import pyarrow.parquet as pq
import pytest

from flink_runtime.client.cli import build_parser
from tests.conftest import fast_config

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "flink_runtime"
# What docker/Dockerfile copies into its `wheel` stage to build the wheel it installs.
BUILD_SOURCES = ("pyproject.toml", "setup.cfg", "README.md", PACKAGE)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy so the repository gets no build/ or *.egg-info."""
    work = tmp_path_factory.mktemp("wheel-build")
    source = work / "src"
    source.mkdir()
    for name in BUILD_SOURCES:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    out_dir = work / "dist"
    build = [uv(), "build", "--wheel", "--python", sys.executable, "--out-dir", str(out_dir), str(source)]
    # `make setup` built the editable install with uv, so setuptools and wheel are in uv's
    # cache; go to the index only when they are not (another cache, a pruned one).
    result = run([*build, "--offline"], cwd=work)
    if result.returncode != 0:
        result = run(build, cwd=work)
    assert result.returncode == 0, f"building the wheel failed:\n{result.stdout}\n{result.stderr}"
    (built,) = out_dir.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv (same base interpreter as the running one) with only the wheel installed."""
    path = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(path)
    site_packages = fresh_site_packages(path)
    dependencies = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    (site_packages / "project-dependencies.pth").write_text("".join(f"{folder}\n" for folder in dependencies))
    install = [uv(), "pip", "install", "--offline", "--no-deps", "--python", str(path / "bin" / "python"), str(wheel)]
    result = run(install, cwd=path)
    assert result.returncode == 0, f"installing {wheel.name} failed:\n{result.stdout}\n{result.stderr}"
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the repository, so `import flink_runtime` cannot find the source."""
    assert not tmp_path.resolve().is_relative_to(ROOT)
    return tmp_path


def test_wheel_holds_every_package_and_data_file(wheel: Path) -> None:
    tracked = git_files(PACKAGE)
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(set(tracked) - in_wheel)
    packages = {str(PurePosixPath(name).parent) for name in tracked if name.endswith(".py")}
    without_init = sorted(p for p in packages if not (ROOT / p / "__init__.py").is_file())
    if without_init:
        fix = f"add an __init__.py to {without_init}: `packages = find:` in setup.cfg skips folders without one"
    else:
        fix = "non-.py files ship only if a pattern under [options.package_data] in setup.cfg matches them"
    assert not missing, f"{wheel.name} lacks {len(missing)} file(s) git tracks: {missing}; {fix}"


def test_installed_package_is_the_wheels_not_the_source(fresh_venv: Path, outside: Path) -> None:
    code = (
        "import json, flink_runtime, flink_runtime.operators.spark.task as task;"
        "print(json.dumps([flink_runtime.__file__, task.__file__]))"
    )
    result = run([str(fresh_venv / "bin" / "python"), "-c", code], cwd=outside, env=venv_env(fresh_venv))
    assert result.returncode == 0, result.stderr
    site_packages = fresh_site_packages(fresh_venv).resolve()
    for module_file in json.loads(result.stdout):
        assert Path(module_file).resolve().is_relative_to(site_packages), f"{module_file} is not the wheel's"


def test_cli_runs_from_the_installed_wheel(fresh_venv: Path, outside: Path) -> None:
    result = run([str(fresh_venv / "bin" / "flink-runtime"), "--help"], cwd=outside, env=venv_env(fresh_venv))
    assert result.returncode == 0, result.stderr
    # argparse offers no public way to list a parser's subcommands.
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for verb in subcommands.choices:
        assert verb in result.stdout, f"`flink-runtime --help` does not list {verb!r}:\n{result.stdout}"


# Run by the fresh venv's python: the demo's word count (shipped in the wheel) on a MiniCluster.
PIPELINE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    from flink_runtime.client import JobClient
    from flink_runtime.configuration import Configuration
    from flink_runtime.demo import word_count
    from flink_runtime.minicluster import MiniCluster

    work, config = Path(sys.argv[1]), Configuration(json.loads(sys.argv[2]))
    pipeline = word_count(work / "input", work / "output")
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=2) as cluster:
        with JobClient(cluster.rest_url) as client:
            job_id = client.submit(pipeline.job_graph())
            status = client.wait(job_id, timeout=150)
            if status.value != "FINISHED":
                sys.exit(f"job {status.value}: {client.exceptions(job_id)['root-exception']}")
    """
)


def test_pyspark_pipeline_runs_from_the_installed_wheel(fresh_venv: Path, outside: Path) -> None:
    input_dir = outside / "input"
    input_dir.mkdir()
    (input_dir / "hamlet.txt").write_text("To be or not to be\n" * 40)
    (input_dir / "question.txt").write_text("that is the QUESTION\n" * 3 + "To be\n")
    script = outside / "word_count.py"
    script.write_text(PIPELINE_SCRIPT)
    config = fast_config(**{"io.tmp.dirs": str(outside / "partitions")}).to_dict()

    python = fresh_venv / "bin" / "python"
    result = run([str(python), str(script), str(outside), json.dumps(config)], cwd=outside, env=venv_env(fresh_venv))
    assert result.returncode == 0, f"the pipeline failed:\n{result.stderr[-5000:]}"

    table = pq.read_table(outside / "output").to_pylist()
    counts = {row["word"]: row["count"] for row in table}
    assert counts == {"to": 81, "be": 81, "or": 40, "not": 40, "that": 3, "is": 3, "the": 3, "question": 3}
    assert len(table) == len(counts), (
        f"a word in more than one row: {collections.Counter(row['word'] for row in table)}"
    )


# -- helpers ---------------------------------------------------------------------------------------


def uv() -> str:
    """uv from the running venv (`make setup` installs it there), else from the PATH."""
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.is_file() else shutil.which("uv")
    assert found, f"uv is neither next to {sys.executable} nor on the PATH: run `make setup`, which installs it"
    return found


def git_files(folder: str) -> list[str]:
    result = run(["git", "ls-files", "--", folder], cwd=ROOT)
    assert result.returncode == 0 and result.stdout, f"`git ls-files {folder}` in {ROOT} failed: {result.stderr}"
    return result.stdout.splitlines()


def fresh_site_packages(venv_dir: Path) -> Path:
    (site_packages,) = (venv_dir / "lib").glob("python3*/site-packages")
    return site_packages


def venv_env(venv_dir: Path) -> dict[str, str]:
    """The environment of a shell that activated the fresh venv, without this test's PYTHONPATH."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    python = str(venv_dir / "bin" / "python")
    env.update(
        VIRTUAL_ENV=str(venv_dir),
        PATH=f"{venv_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=python,
        PYSPARK_DRIVER_PYTHON=python,
    )
    return env


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
