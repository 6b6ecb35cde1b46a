"""docker/'s scripts without a Docker engine: requirements.py (the dependency layers),
healthcheck.py (against a real JobManager and TaskManagers), and that what the Airflow
image runs imports without PySpark, pyarrow or pandas (the image has none of them).

The images themselves are built and started by `make docker-smoke` (scripts/docker-smoke.sh).
"""

from __future__ import annotations

import configparser
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_runtime.minicluster import MiniCluster
from tests.helpers.docker_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"


requirements = load_script("requirements")
healthcheck = load_script("healthcheck")


# -- requirements.py -------------------------------------------------------------------------------


def setup_cfg() -> configparser.ConfigParser:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return setup


def test_runtime_requirements_are_setup_cfgs_install_requires() -> None:
    listed = requirements.requirements(ROOT / "setup.cfg", "runtime")
    assert listed == requirements.lines(setup_cfg()["options"]["install_requires"])
    assert any(line.startswith("pyspark[connect]==") for line in listed)


def test_airflow_requirements_leave_out_spark_and_add_the_airflow_extra() -> None:
    listed = requirements.requirements(ROOT / "setup.cfg", "airflow")
    names = {requirements.name_of(line) for line in listed}
    assert not names & {"pyspark", "pandas", "pyarrow", "py4j"}, names
    assert "apache-airflow" in names and "httpx" in names
    assert not any("#" in line for line in listed), "setup.cfg's comments must not reach pip"
    runtime = {requirements.name_of(line) for line in requirements.requirements(ROOT / "setup.cfg", "runtime")}
    assert runtime - names == {"pyspark", "pandas"}, "only Spark's own requirements are left out"


def test_build_requirements_are_pyprojects_build_system() -> None:
    assert requirements.requirements(ROOT / "setup.cfg", "build") == ["setuptools>=68", "wheel"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("pyspark[connect]==4.3.0", "pyspark"), ("prometheus_client>=0.20", "prometheus-client"), ("Py.Yaml", "py-yaml")],
)
def test_requirement_names_are_normalised(text: str, expected: str) -> None:
    assert requirements.name_of(text) == expected


def test_requirements_bad_input_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert requirements.main([str(ROOT / "setup.cfg"), "spark"]) == 1
    assert "unknown target 'spark': expected one of runtime, airflow, build" in capsys.readouterr().err
    assert requirements.main([str(tmp_path / "missing.cfg"), "runtime"]) == 1
    assert "missing.cfg: cannot read it" in capsys.readouterr().err
    (tmp_path / "empty.cfg").write_text("[metadata]\nname = x\n")
    assert requirements.main([str(tmp_path / "empty.cfg"), "runtime"]) == 1
    assert "'options'" in capsys.readouterr().err
    assert requirements.main([]) == 2
    assert "usage: requirements.py SETUP_CFG {runtime|airflow|build}" in capsys.readouterr().err
    assert requirements.main([str(tmp_path / "empty.cfg"), "build"]) == 1  # no pyproject.toml beside it
    assert "pyproject.toml: cannot read it (No such file or directory)" in capsys.readouterr().err


# -- what the Airflow image runs, without Spark ----------------------------------------------------


@pytest.mark.integration  # imports all of Airflow in a fresh interpreter: 10-25 s
def test_the_provider_dags_plugin_and_cli_import_without_spark(tmp_path: Path) -> None:
    """The Airflow image has no PySpark, pyarrow or pandas: nothing it imports may need them."""
    script = textwrap.dedent(
        """
        import glob, importlib, pkgutil, runpy, sys

        class NoSpark:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("pyspark", "pyarrow", "pandas", "py4j"):
                    raise ImportError(f"the Airflow image has no {name}")

        sys.meta_path.insert(0, NoSpark())
        import flink_runtime.airflow
        import flink_runtime.client.cli
        failed = []
        for module in pkgutil.walk_packages(flink_runtime.airflow.__path__, "flink_runtime.airflow."):
            try:
                importlib.import_module(module.name)
            except Exception as exc:
                failed.append(f"{module.name}: {exc!r}")
        for path in sorted(glob.glob("dags/*.py") + glob.glob("plugins/*.py")):
            try:
                runpy.run_path(path)
            except Exception as exc:
                failed.append(f"{path}: {exc!r}")
        print("\\n".join(failed) or "ok")
        """
    )
    environ = {"PATH": "/usr/bin:/bin", "AIRFLOW_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "ok", done.stdout


# -- healthcheck.py, against a real JobManager -----------------------------------------------------


def environ_for(cluster: MiniCluster, **properties: object) -> dict[str, str]:
    """A container's environment: FLINK_PROPERTIES pointing at the cluster's REST API."""
    port = cluster.rest_url.rsplit(":", 1)[1].strip("/")
    values = {"rest.address": "127.0.0.1", "rest.port": port, **properties}
    return {"FLINK_PROPERTIES": "\n".join(f"{key}: {value}" for key, value in values.items())}


@pytest.mark.integration
def test_healthcheck_of_the_jobmanager_and_a_registered_taskmanager(minicluster: MiniCluster) -> None:
    environ = environ_for(minicluster)
    assert healthcheck.check(["jobmanager"], environ).startswith("jobmanager healthy")
    taskmanager_id = next(iter(minicluster.jobmanager.task_managers))
    assert healthcheck.check(["taskmanager", taskmanager_id], environ).startswith("taskmanager healthy")


@pytest.mark.integration
def test_healthcheck_fails_with_the_reason(minicluster: MiniCluster, capsys: pytest.CaptureFixture[str]) -> None:
    environ = environ_for(minicluster)
    with pytest.raises(RuntimeError, match="does not know TaskManager taskmanager-9 \\(not registered yet\\)"):
        healthcheck.check(["taskmanager", "taskmanager-9"], environ)
    # Nothing listens on port 9: the JobManager is down.
    with pytest.raises(RuntimeError, match="http://127.0.0.1:9/overview"):
        healthcheck.check(["jobmanager"], {"FLINK_PROPERTIES": "rest.port: 9"})
    with pytest.raises(ValueError, match="usage: healthcheck.py jobmanager | taskmanager TASKMANAGER_ID"):
        healthcheck.check(["taskmanager"], environ)
    # As Docker runs it: exit 1 (2 is reserved) with the reason on stdout, no traceback.
    assert healthcheck.main(["taskmanager", "taskmanager-9"]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("unhealthy: ") and "Traceback" not in out.out + out.err
    assert healthcheck.main(["nonsense"]) == 1


# -- the shell scripts -----------------------------------------------------------------------------


@pytest.mark.parametrize("script", ["docker-smoke.sh", "docker-build.sh", "docker-base-image.sh", "ensure-docker.sh"])
def test_the_docker_scripts_parse_and_are_executable(script: str) -> None:
    path = ROOT / "scripts" / script
    assert path.stat().st_mode & 0o111, f"{script} is not executable"
    parsed = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert parsed.returncode == 0, parsed.stderr
    assert "set -euo pipefail" in path.read_text()


def test_make_docker_smoke_runs_the_script_and_is_not_part_of_make_test() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("\ndocker-smoke:", 1)[1].split("\n\n", 1)[0]
    assert target.strip() == "scripts/docker-smoke.sh"
    test_target = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    # It neither builds the images nor runs the tests that need them (marked docker).
    assert "docker-smoke" not in test_target and '-m "not docker"' in test_target


def test_make_test_docker_builds_the_runtime_image_and_runs_the_docker_tests_without_reinstalling_the_project() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("\ntest-docker:", 1)[1].split("\n\n", 1)[0]
    assert target.split("\n", 1)[0].split() == ["runtime", "docker-image"]
    # The docker extra's requirements only: an editable install of this checkout would
    # repoint a shared virtual environment at it.
    assert "--extra docker" in target and "-e " not in target
    assert "pytest -m docker" in target
    image = makefile.split("\ndocker-image:", 1)[1].split("\n\n", 1)[0]
    assert image.strip() == "scripts/docker-build.sh runtime"


def test_docker_build_refuses_an_unknown_target_before_touching_docker() -> None:
    built = subprocess.run(
        [str(ROOT / "scripts" / "docker-build.sh"), "jobmanager"], capture_output=True, text=True, timeout=30
    )
    assert built.returncode == 2
    assert "unknown image target 'jobmanager': expected runtime or airflow" in built.stderr
