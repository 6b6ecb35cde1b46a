"""Print the requirements an image installs before the project's code, one per line.

    python3 docker/requirements.py setup.cfg runtime   # [options] install_requires
    python3 docker/requirements.py setup.cfg airflow   # the same without Spark's, plus the airflow extra
    python3 docker/requirements.py setup.cfg build     # pyproject.toml's [build-system] requires

docker/Dockerfile installs these in a layer of their own, from setup.cfg alone, so that
a change to the code does not download and build PySpark again (its 456 MB source
archive is most of a cold build); the project itself is then installed with --no-deps,
from a wheel built without build isolation by the `build` requirements installed in a
layer before the code too (a rebuild after a code change needs no network).
Standard library only: it runs in the bare base image.
"""

from __future__ import annotations

import configparser
import re
import sys
import tomllib
from pathlib import Path

# What only the TaskManagers' Spark uses (pyspark[connect] brings pyarrow, numpy and
# grpcio with it; pandas is pinned for it). Airflow only talks to the REST API: the
# provider, its DAGs and the CLI import none of these (tests/test_docker_files.py checks).
SPARK_ONLY = frozenset({"pyspark", "pandas"})

TARGETS = ("runtime", "airflow", "build")


def name_of(requirement: str) -> str:
    """The distribution name of a requirement line, normalised (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def lines(value: str) -> list[str]:
    """A setup.cfg list: one item a line, comments and blank lines dropped."""
    items = (line.split("#", 1)[0].strip() for line in value.splitlines())
    return [item for item in items if item]


def requirements(setup_cfg: Path, target: str) -> list[str]:
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}: expected one of {', '.join(TARGETS)}")
    if target == "build":  # pyproject.toml beside setup.cfg
        pyproject = Path(setup_cfg).parent / "pyproject.toml"
        try:
            return list(tomllib.loads(pyproject.read_text())["build-system"]["requires"])
        except OSError as exc:
            raise ValueError(f"{pyproject}: cannot read it ({exc.strerror or exc})") from exc
    setup = configparser.ConfigParser()
    if not setup.read(setup_cfg):
        raise ValueError(f"{setup_cfg}: cannot read it")
    required = lines(setup["options"]["install_requires"])
    if target == "runtime":
        return required
    return [r for r in required if name_of(r) not in SPARK_ONLY] + lines(setup["options.extras_require"]["airflow"])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: requirements.py SETUP_CFG {{{'|'.join(TARGETS)}}}", file=sys.stderr)
        return 2
    try:
        print("\n".join(requirements(Path(argv[0]), argv[1])))
    except (ValueError, KeyError, tomllib.TOMLDecodeError) as exc:
        print(f"requirements.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
