"""docker/: the Dockerfile and the compose file, checked by parsing (no Docker engine needed).

The compose services' configuration is computed the way the containers compute it: the
command line through the CLI's own parser, FLINK_PROPERTIES through Configuration.load.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from flink_runtime import configuration as cfg
from flink_runtime.client.cli import build_parser
from flink_runtime.configuration import Configuration
from flink_runtime.security import check_rest_exposure, rest_token

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
RUNTIME_SERVICES = ("jobmanager", "taskmanager-1", "taskmanager-2")


# -- Dockerfile ------------------------------------------------------------------------------------


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [arguments for instruction, arguments in self.instructions if instruction == keyword]


def parse_dockerfile(path: Path) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages); continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"

    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        instruction, _, arguments = line.partition(" ")
        instruction, arguments = instruction.upper(), arguments.strip()
        if instruction == "FROM":
            words = arguments.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif not stages:
            assert instruction == "ARG", f"only ARG may precede the first FROM, got {line!r}"
            key, _, default = arguments.partition("=")
            global_args[key] = default
        else:
            stages[-1].instructions.append((instruction, arguments))
    return global_args, stages


def substitute(text: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables[m.group(1) or m.group(2)], text)


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return parse_dockerfile(DOCKER / "Dockerfile")


def stage(stages: list[Stage], name: str) -> Stage:
    return next(s for s in stages if s.name == name)


def test_every_base_image_has_a_pinned_tag(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    global_args, stages = dockerfile
    for s in stages:
        image = substitute(s.base, global_args)
        assert ":" in image.rsplit("/", 1)[-1], f"{image}: no tag"
        assert not image.endswith(":latest"), f"{image}: a moving tag"


def test_runtime_image_is_python_with_a_java_runtime_and_the_project(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    global_args, stages = dockerfile
    runtime = stage(stages, "runtime")
    assert stages[-1] is runtime, "the runtime must be the default (last) stage"
    assert re.fullmatch(r"python:3\.11-slim(-bookworm)?", substitute(runtime.base, global_args))

    runs = " ".join(runtime.args("RUN"))
    assert re.search(r"apt-get install\b.*\bopenjdk-17-jre-headless\b", runs), "PySpark needs a Java runtime"
    assert "rm -rf /var/lib/apt/lists" in runs

    copied = [shlex.split(a)[-2::-1] for a in runtime.args("COPY")]  # sources, reversed; last arg = target
    sources = {Path(src).name for group in copied for src in group if not src.startswith("--")}
    assert {"pyproject.toml", "setup.cfg", "README.md", "flink_runtime"} <= sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    assert re.search(r"\bpip install (\S+ )*\./src\b", runs), "the project is installed with pip"

    assert json.loads(runtime.args("ENTRYPOINT")[-1]) == ["flink-runtime"]
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert "flink-runtime = " in setup["options.entry_points"]["console_scripts"]

    exposed = {int(port) for ports in runtime.args("EXPOSE") for port in ports.split()}
    defaults = Configuration()
    assert exposed == {6123, 8081} == {defaults.get(cfg.JOBMANAGER_RPC_PORT), defaults.get(cfg.REST_PORT)}
    assert runtime.args("USER") == ["50000"], "the same uid as Airflow's image, for the shared volume"


def test_airflow_image_is_the_pinned_airflow_with_the_project(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    global_args, stages = dockerfile
    airflow = stage(stages, "airflow")
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    pinned = re.search(r"apache-airflow==(\S+)", setup["options.extras_require"]["airflow"]).group(1)
    assert substitute(airflow.base, global_args).startswith(f"apache/airflow:{pinned}-python")
    runs = " ".join(airflow.args("RUN"))
    assert f'"apache-airflow=={pinned}"' in runs, "pip must not change the image's Airflow"
    assert "/opt/flink-runtime/src" in runs


def test_dockerignore_keeps_what_the_dockerfile_copies() -> None:
    ignore = DOCKER / "Dockerfile.dockerignore"
    patterns = [line.strip() for line in ignore.read_text().splitlines() if line.strip() and line[0] != "#"]
    for pattern in (".venv", ".git", "__pycache__"):
        assert any(p.endswith(pattern) for p in patterns), f"{pattern} should not go into the build context"
    for needed in ("flink_runtime", "setup.cfg", "pyproject.toml", "README.md"):
        assert not any(p.strip("*/") == needed for p in patterns), f"{needed} is ignored but copied"


# -- docker-compose.yaml ---------------------------------------------------------------------------


class MissingVariable(ValueError):
    pass


def interpolate(text: str, environ: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR-default}` and `${VAR:?error}` substitution."""

    def value(match: re.Match[str]) -> str:
        name, operator, default = match.group(1), match.group(2), match.group(3) or ""
        if operator == ":-":
            return environ.get(name) or default
        if operator == "-":
            return environ.get(name, default)
        if operator in (":?", "?"):
            if not environ.get(name):
                raise MissingVariable(f"{name}: {default}")
            return environ[name]
        return environ.get(name, "")

    return re.sub(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}", value, text)


COMPOSE_ENVIRONMENT = {"FLINK_REST_TOKEN": "t0kenFromDotEnv"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(interpolate((DOCKER / "docker-compose.yaml").read_text(), COMPOSE_ENVIRONMENT))


def test_compose_refuses_to_start_without_a_rest_token() -> None:
    with pytest.raises(MissingVariable, match="FLINK_REST_TOKEN"):
        interpolate((DOCKER / "docker-compose.yaml").read_text(), {})


def test_the_rest_api_is_reachable_only_with_the_token(compose: dict) -> None:
    token = COMPOSE_ENVIRONMENT["FLINK_REST_TOKEN"]
    for name in RUNTIME_SERVICES:  # the TaskManagers download job libraries with it
        _, config = service_config(compose["services"][name])
        assert rest_token(config) == token
    _, jobmanager = service_config(compose["services"]["jobmanager"])
    check_rest_exposure(jobmanager, rest_token(jobmanager))  # would refuse 0.0.0.0 without it
    healthcheck = " ".join(compose["services"]["jobmanager"]["healthcheck"]["test"])
    assert "Authorization" in healthcheck and "FLINK_REST_TOKEN" in healthcheck
    assert compose["services"]["jobmanager"]["environment"]["FLINK_REST_TOKEN"] == token
    connection = json.loads(compose["services"]["airflow"]["environment"]["AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT"])
    assert connection["password"] == token


def service_config(service: dict) -> tuple[str, Configuration]:
    """(subcommand, configuration) as the container's `flink-runtime` computes them."""
    args = build_parser().parse_args(service["command"])
    environ = {key: str(value) for key, value in service["environment"].items()}
    return args.command, Configuration.load(args.config, args.properties, environ=environ)


def test_services_and_images(compose: dict) -> None:
    services = compose["services"]
    assert set(services) == {*RUNTIME_SERVICES, "airflow"}
    for name, service in services.items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: {image}"
        assert (DOCKER / service["build"]["context"] / service["build"]["dockerfile"]).resolve() == (
            DOCKER / "Dockerfile"
        )
        _, stages = parse_dockerfile(DOCKER / "Dockerfile")
        assert service["build"]["target"] in {s.name for s in stages}
    assert {services[name]["build"]["target"] for name in RUNTIME_SERVICES} == {"runtime"}
    assert services["airflow"]["build"]["target"] == "airflow"


def test_runtime_services_form_one_cluster(compose: dict) -> None:
    services = compose["services"]
    command, jobmanager = service_config(services["jobmanager"])
    assert command == "jobmanager"
    assert jobmanager.get(cfg.JOBMANAGER_RPC_ADDRESS) == "jobmanager" == services["jobmanager"]["hostname"]
    assert jobmanager.get(cfg.REST_BIND_ADDRESS) == "0.0.0.0"
    assert jobmanager.get(cfg.REST_ADDRESS) == "jobmanager"
    rest_port = jobmanager.get(cfg.REST_PORT)
    assert f"{rest_port}:{rest_port}" in services["jobmanager"]["ports"]
    assert str(rest_port) in " ".join(services["jobmanager"]["healthcheck"]["test"])

    taskmanagers = [service_config(services[name]) for name in RUNTIME_SERVICES[1:]]
    assert [command for command, _ in taskmanagers] == ["taskmanager", "taskmanager"]
    hosts = set()
    for (_, config), name in zip(taskmanagers, RUNTIME_SERVICES[1:], strict=True):
        # The JobManager connects back to the address a TaskManager registers with.
        assert config.get(cfg.TASKMANAGER_HOST) == name == services[name]["hostname"]
        hosts.add(config.get(cfg.TASKMANAGER_HOST))
        assert config.get(cfg.JOBMANAGER_RPC_ADDRESS) == jobmanager.get(cfg.JOBMANAGER_RPC_ADDRESS)
        assert config.get(cfg.JOBMANAGER_RPC_PORT) == jobmanager.get(cfg.JOBMANAGER_RPC_PORT)
        assert config.get(cfg.CLUSTER_SECRET) == jobmanager.get(cfg.CLUSTER_SECRET) != ""
        assert config.get(cfg.TASKMANAGER_SLOTS) >= 1
        assert config.get(cfg.IO_TMP_DIRS) == jobmanager.get(cfg.IO_TMP_DIRS)
        assert services[name]["depends_on"]["jobmanager"]["condition"] == "service_healthy"
    assert len(hosts) == 2


def test_flink_properties_use_the_runtimes_keys(compose: dict) -> None:
    source = "\n".join(path.read_text() for path in (ROOT / "flink_runtime").rglob("*.py"))
    for name in RUNTIME_SERVICES:
        properties = yaml.safe_load(compose["services"][name]["environment"]["FLINK_PROPERTIES"])
        for key in properties:
            assert key in cfg.OPTIONS or f'"{key}"' in source, f"{name}: unknown configuration key {key!r}"
        # A secret of digits would become a number (or, with a leading 0, an octal one) in YAML.
        assert isinstance(properties["security.cluster.secret"], str)


def test_shared_data_volume(compose: dict) -> None:
    services = compose["services"]
    assert "data" in compose["volumes"]
    for name, service in services.items():
        assert "data:/data" in service["volumes"], f"{name} must mount the shared data volume"
    _, jobmanager = service_config(services["jobmanager"])
    for key in (cfg.IO_TMP_DIRS.key, "state.savepoints.dir", "state.checkpoints.dir", "blob.storage.directory"):
        assert str(jobmanager.raw(key)).startswith("/data/"), key
    assert jobmanager.raw("jobstore.url").startswith("sqlite:////data/")
    assert services["airflow"]["environment"]["FLINK_RUNTIME_DATA"].startswith("/data/")


def test_airflow_service_reaches_the_jobmanager(compose: dict) -> None:
    airflow = compose["services"]["airflow"]
    assert airflow["command"] == ["standalone"]
    environment = airflow["environment"]
    assert environment["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    connection = json.loads(environment["AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT"])
    _, jobmanager = service_config(compose["services"]["jobmanager"])
    assert connection["conn_type"] == "flink_runtime"
    assert (connection["host"], connection["port"]) == ("jobmanager", jobmanager.get(cfg.REST_PORT))
    assert airflow["depends_on"]["jobmanager"]["condition"] == "service_healthy"
    mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in airflow["volumes"]}
    for folder, key in (("dags", "AIRFLOW__CORE__DAGS_FOLDER"), ("plugins", "AIRFLOW__CORE__PLUGINS_FOLDER")):
        assert (DOCKER / mounts[environment[key]]).resolve() == ROOT / folder
