"""Where a job may read and write: no `..` anywhere, and, with
`security.allowed-directories`, only under the listed directories once links are resolved.

The paths a job names (its sources, sinks, checkpoint and savepoint directories, a
savepoint target) are opened by the TaskManagers and the JobManager with their own
permissions, so on a shared cluster an authenticated user could otherwise point a
sink's `mode: overwrite` at any directory those processes can write.

A `..` segment is refused outright. A local path (a plain path or a file: URI) is
compared after resolving its symbolic links (os.path.realpath), against the allowed
directories resolved the same way: `data/link_etc -> /etc` inside an allowed folder
does not make `/etc/passwd` readable, and an allowed directory that is itself a link
(`/tmp` on some systems) keeps working. Hadoop URIs (hdfs://, s3a://, ...) have no
links the runtime could follow; they are compared as normalized text.

A link can appear after a check (a job's own transform may create one), so the check
runs again where files are opened or committed: the planner resolves every file it
lists into a split, a TaskManager checks each file before reading it and each sink
directory before writing and committing into it, the JobManager before publishing a
sink and writing a checkpoint or savepoint (see AllowedDirectories).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration


class PathNotAllowedError(ValueError):
    """A job's path lies (once its links are resolved) outside security.allowed-directories."""


def allowed_directories(config: Configuration) -> list[str]:
    """`security.allowed-directories` as a list (YAML list, or text separated by `,` or `;`),
    normalized but not resolved: links are resolved at each check, as they are then."""
    return [_normalized(item) for item in config.get(cfg.ALLOWED_DIRECTORIES)]


def path_problem(path: str, allowed: list[str]) -> str | None:
    """Why a job may not use `path` (None: it may)."""
    if ".." in path.replace("\\", "/").split("/"):
        return f"{path!r} has a '..' segment; give the path without one"
    if not allowed:
        return None
    resolved = resolved_path(path)
    if any(_is_within(resolved, resolved_path(directory)) for directory in allowed):
        return None
    listed = ", ".join(_shown(directory) for directory in allowed)
    if resolved != _normalized(path):
        return (
            f"{path!r} resolves to {_shown(resolved)!r} (through a symbolic link), "
            f"outside security.allowed-directories ({listed})"
        )
    return f"{path!r} is outside security.allowed-directories ({listed})"


def resolved_path(path: str) -> str:
    """`path` normalized (scheme://authority/path; a local one as file:///...) with the
    symbolic links of a local path resolved. A glob pattern resolves up to its first
    component that does not exist (its wildcards are kept as text)."""
    normalized = _normalized(path)
    if not normalized.startswith("file:///"):  # a Hadoop URI (or file://host/...): no links to follow
        return normalized
    return "file://" + os.path.realpath(normalized.removeprefix("file://"))


def local_resolved(path: str) -> str:
    """The local `path` (plain or file:) with its links resolved, as the OS names it: what a
    split carries, so a TaskManager reads exactly the file that was checked."""
    return _shown(resolved_path(path))


class AllowedDirectories:
    """The allowed-directory lists one process enforces: a path must satisfy every
    non-empty one. A TaskManager enforces the JobManager's list (sent with each task,
    so a TaskManager whose own configuration lacks the key is not left open) and its
    own, when its configuration sets one (its host's operator may confine it further).
    """

    def __init__(self, *lists: Iterable[str]) -> None:
        self.lists = [list(items) for items in lists if items]

    @classmethod
    def of(cls, config: Configuration) -> AllowedDirectories:
        return cls(allowed_directories(config))

    def __bool__(self) -> bool:
        return bool(self.lists)

    def problem(self, path: str) -> str | None:
        """Why `path` may not be used (a '..' segment is refused even without a list)."""
        for allowed in self.lists or [[]]:
            if problem := path_problem(path, allowed):
                return problem
        return None

    def check(self, path: str, what: str) -> None:
        """PathNotAllowedError naming `what` (e.g. "sink of vertex 'write'") unless `path` is allowed."""
        if problem := self.problem(path):
            raise PathNotAllowedError(f"{what}: {problem}; the job may not use it")


# Job config keys that name directories or files.
JOB_PATH_KEYS = (
    cfg.CheckpointingOptions.CHECKPOINTS_DIRECTORY.key,
    cfg.CheckpointingOptions.SAVEPOINT_DIRECTORY.key,
    cfg.SAVEPOINT_PATH.key,
)


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


def _shown(normalized: str) -> str:
    """A normalized path as a user wrote it: a local one without file://."""
    return normalized.removeprefix("file://") if normalized.startswith("file:///") else normalized


def _is_within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")
