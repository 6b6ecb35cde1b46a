"""Where a job may read and write: no `..` anywhere, and, with
`security.allowed-directories`, only under the listed directories.

The paths a job names (its sources, sinks, checkpoint and savepoint directories, a
savepoint target) are opened by the TaskManagers and the JobManager with their own
permissions, so on a shared cluster an authenticated user could otherwise point a
sink's `mode: overwrite` at any directory those processes can write. The check is
lexical (the path as given, normalized): a `..` segment is refused outright, so a
normalized prefix match cannot be escaped.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration


def allowed_directories(config: Configuration) -> list[str]:
    """`security.allowed-directories` as a list (YAML list, or text separated by `,` or `;`)."""
    value = config.raw(cfg.ALLOWED_DIRECTORIES)
    if value in (None, ""):
        return []
    items = value if isinstance(value, list | tuple) else str(value).replace(";", ",").split(",")
    return [_normalized(str(item).strip()) for item in items if str(item).strip()]


def path_problem(path: str, allowed: list[str]) -> str | None:
    """Why a job may not use `path` (None: it may)."""
    if ".." in path.replace("\\", "/").split("/"):
        return f"{path!r} has a '..' segment; give the path without one"
    if allowed and not any(_is_within(_normalized(path), directory) for directory in allowed):
        return f"{path!r} is outside security.allowed-directories ({', '.join(allowed)})"
    return None


# Job config keys that name directories or files.
JOB_PATH_KEYS = ("state.checkpoints.dir", "state.savepoints.dir", cfg.SAVEPOINT_PATH.key)


def job_path_problems(job_config: Mapping[str, Any], vertices: Iterable[Any], allowed: list[str]) -> list[str]:
    """Every path of a JobGraph (job config, vertex configs) it may not use."""
    problems = []
    for key in JOB_PATH_KEYS:
        value = job_config.get(key)
        if isinstance(value, str) and value and (problem := path_problem(value, allowed)):
            problems.append(f"config[{key!r}]: {problem}.")
    for vertex in vertices:
        for where, path in vertex_paths(vertex.config):
            if problem := path_problem(path, allowed):
                problems.append(f"vertex '{vertex.id}': config {where}: {problem}.")
    return problems


def vertex_paths(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, path) for every path a vertex's config names: a Spark vertex's source
    paths and sink path, a built-in sink's `path`."""
    source = config.get("source")
    if isinstance(source, Mapping):
        for index, path in enumerate(_strings(source.get("paths"))):
            yield f"source.paths[{index}]", path
    sink = config.get("sink")
    if isinstance(sink, Mapping) and isinstance(sink.get("path"), str):
        yield "sink.path", sink["path"]
    if isinstance(config.get("path"), str):
        yield "path", config["path"]


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def _normalized(path: str) -> str:
    """scheme://authority/normal/path (a plain path: file:///...)."""
    parts = urlsplit(path)
    if parts.scheme and len(parts.scheme) > 1:  # not a Windows drive letter
        return f"{parts.scheme.lower()}://{parts.netloc}{posixpath.normpath(parts.path or '/')}"
    return "file://" + posixpath.normpath(posixpath.abspath(path))


def _is_within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")
