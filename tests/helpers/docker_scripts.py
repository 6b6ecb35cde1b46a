"""The scripts under docker/ (healthcheck.py, requirements.py, ...), loaded for tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

DOCKER = Path(__file__).resolve().parents[2] / "docker"


def load_script(name: str) -> ModuleType:
    """docker/<name>.py, which is no package: the image runs it as a file."""
    spec = importlib.util.spec_from_file_location(f"docker_{name}", DOCKER / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
