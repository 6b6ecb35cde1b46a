"""docker/: the Dockerfile and the compose file, checked by parsing (no Docker engine needed).

The compose services' configuration is computed the way the containers compute it: the
command line through the CLI's own parser, FLINK_PROPERTIES through Configuration.load.
"""

from __future__ import annotations

import configparser
import fnmatch
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
from tests.helpers.docker_scripts import load_script

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


def copies(s: Stage) -> list[tuple[str | None, list[str]]]:
    """Each COPY of a stage: (the stage it copies from or None for the build context, sources)."""
    result = []
    for arguments in s.args("COPY"):
        words = shlex.split(arguments)
        flags = [w for w in words if w.startswith("--")]
        paths = [w for w in words if not w.startswith("--")][:-1]  # the last is the target
        source = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
        result.append((source, paths))
    return result


def context_files(stages: list[Stage], name: str) -> set[str]:
    """What a stage's layers depend on from the build context, through the stages it copies from."""
    found: set[str] = set()
    for source, paths in copies(stage(stages, name)):
        found |= set(paths) if source is None else context_files(stages, source)
    return found


def test_runtime_image_is_python_with_a_java_runtime_and_the_project(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    global_args, stages = dockerfile
    runtime = stage(stages, "runtime")
    assert stages[-1] is runtime, "the runtime must be the default (last) stage"
    assert global_args["BASE_IMAGE"] == "python:3.11-slim-bookworm"
    assert {s.base for s in stages} == {"${BASE_IMAGE}"}, "every stage builds on the one Python base"

    runs = " ".join(runtime.args("RUN"))
    assert re.search(r"apt-get install -y --no-install-recommends openjdk-17-jre-headless\b", runs), "PySpark's Java"
    assert "rm -rf /var/lib/apt/lists" in runs
    assert context_files(stages, "runtime") == {
        "pyproject.toml", "setup.cfg", "README.md", "flink_runtime", "docker/requirements.py", "docker/healthcheck.py"
    }  # fmt: skip
    for source in context_files(stages, "runtime"):
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    assert re.search(r"\bpip install --quiet --no-deps /tmp/wheels/\*\.whl", runs), "the project, from its wheel"
    assert "/opt/venv/bin" in " ".join(runtime.args("ENV")), "the virtual environment comes first on PATH"

    assert json.loads(runtime.args("ENTRYPOINT")[-1]) == ["flink-runtime"]
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert "flink-runtime = " in setup["options.entry_points"]["console_scripts"]

    exposed = {int(port) for ports in runtime.args("EXPOSE") for port in ports.split()}
    defaults = Configuration()
    assert exposed == {6123, 8081} == {defaults.get(cfg.JOBMANAGER_RPC_PORT), defaults.get(cfg.REST_PORT)}
    assert runtime.args("USER") == ["50000"], "the same uid as Airflow's image, for the shared volume"


@pytest.mark.parametrize("target", ["runtime", "airflow"])
def test_a_code_change_does_not_rebuild_the_dependencies(
    dockerfile: tuple[dict[str, str], list[Stage]], target: str
) -> None:
    """PySpark's 456 MB source archive is built in a layer that only setup.cfg's requirements key."""
    _, stages = dockerfile
    dependencies = f"{target}-dependencies"
    assert context_files(stages, dependencies) == {"pyproject.toml", "setup.cfg", "docker/requirements.py"}
    assert f"-r /requirements/{target}.txt" in " ".join(stage(stages, dependencies).args("RUN"))
    order = [source for source, _ in copies(stage(stages, target))]
    assert dependencies in order and "wheel" in order, order
    assert order.index(dependencies) < order.index("wheel"), "the dependencies' layer must come before the code's"
    assert None not in order[: order.index(dependencies)], "nothing from the build context before the dependencies"


def test_a_code_change_builds_the_wheel_without_network(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    """setuptools and wheel are installed before the code is copied; the wheel is built without isolation."""
    _, stages = dockerfile
    wheel = stage(stages, "wheel")
    kinds = [(kind, arguments) for kind, arguments in wheel.instructions if kind in ("COPY", "RUN")]
    first_code = next(i for i, (kind, arguments) in enumerate(kinds) if kind == "COPY" and "--from=" not in arguments)
    assert any("-r /requirements/build.txt" in arguments for _, arguments in kinds[:first_code])
    assert all("pip install" not in arguments and "venv" not in arguments for _, arguments in kinds[first_code:])
    assert "--no-build-isolation" in kinds[-1][1]


def test_the_images_keep_no_build_leftovers(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    _, stages = dockerfile
    for s in stages:
        runs = " ".join(s.args("RUN"))
        if "pip " in runs:
            assert "PIP_NO_CACHE_DIR=1" in " ".join(s.args("ENV")), f"{s.name}: pip keeps its cache"
        for install in re.findall(r"apt-get install[^&]*", runs):
            assert "--no-install-recommends" in install, f"{s.name}: {install}"
        assert not re.search(r"\b(gcc|build-essential|python3-dev)\b", runs), f"{s.name}: build tools"
    for final in ("runtime", "airflow"):
        runs = " ".join(stage(stages, final).args("RUN"))
        assert "rm -rf /tmp/wheels" in runs, f"{final}: the project's wheel is left in the image"


def test_the_dockerfile_builds_without_buildkit() -> None:
    """Debian's docker-compose 1.29 builds with the classic builder: no BuildKit-only syntax."""
    text = (DOCKER / "Dockerfile").read_text()
    assert not re.search(r"^#\s*syntax=", text, re.MULTILINE), "a syntax line makes BuildKit pull a frontend image"
    for feature in ("--mount=", "--link", "<<EOF", "--chmod=", "--parents", "--exclude="):
        assert feature not in text, f"{feature}: BuildKit only"


def test_airflow_image_is_airflow_with_the_project_and_no_spark(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    _, stages = dockerfile
    airflow = stage(stages, "airflow")
    assert json.loads(airflow.args("ENTRYPOINT")[-1]) == ["airflow"]
    assert json.loads(airflow.args("CMD")[-1]) == ["standalone"]
    assert airflow.args("USER") == ["50000"]
    runs = " ".join(airflow.args("RUN"))
    assert "apt-get" not in runs, "Airflow needs no Java"
    assert [source for source, _ in copies(airflow)] == ["airflow-dependencies", "wheel"]
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    pinned = re.search(r"apache-airflow==(\S+)", setup["options.extras_require"]["airflow"]).group(1)
    requirements = load_script("requirements").requirements(ROOT / "setup.cfg", "airflow")
    assert f"apache-airflow=={pinned}" in requirements, "pip must install the Airflow the provider is pinned to"
    assert not [r for r in requirements if re.match(r"(pyspark|pandas|pyarrow|py4j)\b", r)], requirements


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins; `!` re-includes; a pattern
    matching a folder matches everything under it."""
    result = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!").strip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if glob.startswith("**/"):
            matched = any(fnmatch.fnmatch(part, glob[3:]) for part in parts)
        else:
            matched = any(fnmatch.fnmatch(prefix, glob) and prefix.count("/") == glob.count("/") for prefix in prefixes)
        if matched:
            result = not negated
    return result


def test_dockerignore_sends_only_what_the_dockerfile_copies(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    """The repository root's .dockerignore (the classic builder reads no other) is a whitelist."""
    assert not (DOCKER / "Dockerfile.dockerignore").exists(), "BuildKit would read it instead of /.dockerignore"
    text = (ROOT / ".dockerignore").read_text()
    patterns = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    _, stages = dockerfile
    copied = {path for s in stages for source, paths in copies(s) if source is None for path in paths}
    for path in copied:
        assert not ignored(path, patterns), f"{path} is copied but ignored"
    assert not ignored("flink_runtime/schema/jobgraph.json", patterns)
    for path in (".venv/bin/python", ".git/HEAD", "tests/test_x.py", "work-dirs/a", "docker/.env",
                 "flink_runtime/__pycache__/x.cpython-311.pyc", "dags/daily_word_count.py"):  # fmt: skip
        assert ignored(path, patterns), f"{path} goes into the build context"


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


COMPOSE_ENVIRONMENT = {"FLINK_REST_TOKEN": "t0kenFromDotEnv", "FLINK_CLUSTER_SECRET": "0123"}
COMPOSE_TEXT = (DOCKER / "docker-compose.yaml").read_text()


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(interpolate(COMPOSE_TEXT, COMPOSE_ENVIRONMENT))


@pytest.mark.parametrize("secret", ["FLINK_REST_TOKEN", "FLINK_CLUSTER_SECRET"])
def test_compose_refuses_to_start_without_each_secret(secret: str) -> None:
    """No secret has a default in git: docker/.env (not in git) or the environment sets them."""
    others = {key: value for key, value in COMPOSE_ENVIRONMENT.items() if key != secret}
    with pytest.raises(MissingVariable, match=f"{secret}: set {secret} to a secret of your own"):
        interpolate(COMPOSE_TEXT, others)
    assert not re.search(rf"\$\{{{secret}:?-", COMPOSE_TEXT), f"{secret} has a default"
    assert "/docker/.env" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_file_suits_compose_v2_and_debians_1_29(compose: dict) -> None:
    """1.29 rejects a top-level `name:`; v2 warns about `version:`; both read the rest."""
    assert set(compose) == {"services", "volumes"} | {key for key in compose if key.startswith("x-")}
    for name, service in compose["services"].items():
        for key in service:
            assert key in {
                "build", "image", "init", "restart", "volumes", "command", "hostname", "environment",
                "ports", "healthcheck", "depends_on",
            }, f"{name}: {key} is not checked to work with both"  # fmt: skip
        for dependency in service.get("depends_on", {}).values():
            assert dependency == {"condition": "service_healthy"}


def test_every_service_has_a_healthcheck(compose: dict) -> None:
    services = compose["services"]
    for name in RUNTIME_SERVICES:
        healthcheck = services[name]["healthcheck"]
        command, config = service_config(services[name])
        expected = (
            ["jobmanager"] if command == "jobmanager" else ["taskmanager", config.get(cfg.TASKMANAGER_RESOURCE_ID)]
        )
        assert healthcheck["test"] == ["CMD", "python", "/opt/flink-runtime/healthcheck.py", *expected], name
        assert {"interval", "timeout", "retries", "start_period"} <= set(healthcheck), name
    airflow = " ".join(services["airflow"]["healthcheck"]["test"])
    assert "http://127.0.0.1:8080/api/v2/monitor/health" in airflow


def test_the_rest_api_is_reachable_only_with_the_token(compose: dict) -> None:
    token = COMPOSE_ENVIRONMENT["FLINK_REST_TOKEN"]
    for name in RUNTIME_SERVICES:  # the TaskManagers download job libraries and check their health with it
        _, config = service_config(compose["services"][name])
        assert rest_token(config) == token
    _, jobmanager = service_config(compose["services"]["jobmanager"])
    check_rest_exposure(jobmanager, rest_token(jobmanager))  # would refuse 0.0.0.0 without it
    connection = json.loads(compose["services"]["airflow"]["environment"]["AIRFLOW_CONN_FLINK_RUNTIME_DEFAULT"])
    assert connection["password"] == token
    for name in ("jobmanager", "airflow"):  # published on the host's loopback only
        assert all(port.startswith("127.0.0.1:") for port in compose["services"][name]["ports"]), name


def test_the_base_image_is_a_build_argument(compose: dict, dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    """Where no registry is reachable, BASE_IMAGE names the stand-in scripts/docker-base-image.sh makes."""
    global_args, _ = dockerfile
    for name, service in compose["services"].items():
        assert service["build"]["args"] == {"BASE_IMAGE": global_args["BASE_IMAGE"]}, name
    stand_in = yaml.safe_load(interpolate(COMPOSE_TEXT, {**COMPOSE_ENVIRONMENT, "BASE_IMAGE": "local:tag"}))
    assert {s["build"]["args"]["BASE_IMAGE"] for s in stand_in["services"].values()} == {"local:tag"}


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
    assert services["jobmanager"]["ports"] == [f"127.0.0.1:8081:{rest_port}"]

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
