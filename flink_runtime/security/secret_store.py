"""Secrets a job names but never carries: `secret://<name>` resolved where it is used.

A JobGraph is stored, shown over REST, logged and sent to every TaskManager, so a
database password must not be in it. A job names the secret instead
(`password="secret://orders-db"`), and the process that needs the value (the planner
that checks the plan and publishes, the TaskManager that reads or writes) looks it up
in the cluster's own store:

1. the file `<security.secrets.dir>/<name>` (first line; a Kubernetes secret volume or
   a folder only the cluster's user can read), when the key is set;
2. the environment variable `FLINK_SECRET_<NAME>` (upper case, `-` and `.` as `_`).

A name is letters, digits, `-`, `_` and `.` (no path separators, no leading dot), so
a job cannot make a process read a file outside the store.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration

SCHEME = "secret://"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")


class SecretError(ValueError):
    """A secret reference that is malformed or names no secret; the message says what to do."""


def is_reference(value: object) -> bool:
    return isinstance(value, str) and value.startswith(SCHEME)


def check_reference(value: object, where: str) -> str:
    """`value` if it is a well-formed `secret://<name>`; SecretError saying why not."""
    if not is_reference(value):
        raise SecretError(
            f"{where} must name a secret as 'secret://<name>', not give the value: the job graph is "
            "stored, shown over REST and sent to every TaskManager. Put the value in the file "
            "<security.secrets.dir>/<name> or the environment variable FLINK_SECRET_<NAME> of the cluster."
        )
    name = value[len(SCHEME) :]  # type: ignore[index]
    if not _NAME.match(name) or ".." in name:
        raise SecretError(
            f"{where}: secret name {name!r} must be letters, digits, '-', '_' and '.' "
            "(up to 128, not starting with '.'), e.g. 'secret://orders-db'"
        )
    return value  # type: ignore[return-value]


def env_variable(name: str) -> str:
    return "FLINK_SECRET_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


class SecretStore:
    """Resolves `secret://<name>` from a directory and the environment (see the module doc)."""

    def __init__(self, directory: str | None = None, environ: dict[str, str] | None = None) -> None:
        self.directory = directory or None
        self._environ = environ if environ is not None else os.environ

    @classmethod
    def of(cls, config: Configuration) -> SecretStore:
        return cls(config.get(cfg.SECRETS_DIR) or None)

    def resolve(self, reference: str, where: str = "secret") -> str:
        check_reference(reference, where)
        name = reference[len(SCHEME) :]
        if self.directory:
            path = Path(self.directory) / name
            if path.is_file():
                lines = path.read_text().splitlines()
                return lines[0] if lines else ""
        variable = env_variable(name)
        if variable in self._environ:
            return self._environ[variable]
        looked = f"the file {Path(self.directory) / name} nor " if self.directory else ""
        raise SecretError(
            f"{where}: secret {name!r} not found in this process's secret store: neither {looked}"
            f"the environment variable {variable} exists"
            + ("" if self.directory else " (security.secrets.dir is not set)")
        )
