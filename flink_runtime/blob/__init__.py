"""Libraries attached to a job (.py, .zip, .whl), shipped to where its code runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def activate_libraries(
    libraries: list[str],
    *,
    cache_dir: str,
    blob_server_url: str | None = None,
    spark: Callable[[], Any] | None = None,
) -> list[str]:
    """Make a job's libraries importable in this process; returns their local paths.

    Placeholder until the blob service lands: plain local paths only.
    """
    import sys

    for path in libraries:
        if path not in sys.path:
            sys.path.insert(0, path)
    return list(libraries)
