"""The OpenLineage provider in tests: its presence, checked."""

from __future__ import annotations

import pytest

__all__ = ["require_openlineage"]


def require_openlineage() -> None:
    """The openlineage provider is part of the `airflow` extra: its absence is a broken
    install, which must fail here, not skip."""
    try:
        import airflow.providers.openlineage  # noqa: F401
    except ImportError as exc:
        pytest.fail(
            f"apache-airflow-providers-openlineage is not installed ({exc}); it is in setup.cfg's "
            "`airflow` extra: run `make setup` (or pip install -e '.[airflow]')"
        )
