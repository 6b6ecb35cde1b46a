"""The Pipeline API's argument checks: a mistake is reported at the call that made it,
saying what was wrong and what to write instead."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from flink_runtime.jobgraph.jobgraph import MAX_PARALLELISM_UPPER_BOUND


def parallelism(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_PARALLELISM_UPPER_BOUND:
        raise ValueError(f"{where} must be an integer from 1 to {MAX_PARALLELISM_UPPER_BOUND}, got {value!r}.")
    return value


def job_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"Pipeline() needs a non-empty name, got {name!r}.")
    if len(name) > 256:
        raise ValueError(f"Pipeline name must be at most 256 characters, got {len(name)}; shorten it.")
    return name


def job_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    config = dict(config or {})
    bad = [key for key in config if not isinstance(key, str)]
    if bad:
        raise ValueError(f"Pipeline config keys must be strings (Flink keys such as 'restart-strategy.type'): {bad!r}.")
    return config


def libraries(libraries: Iterable[str] | None) -> list[str]:
    if isinstance(libraries, str):
        raise ValueError(f"Pipeline libraries must be a list of paths, got the string {libraries!r}; wrap it in [].")
    result = list(libraries or [])
    for library in result:
        if not isinstance(library, str) or not library.strip():
            raise ValueError(f"Pipeline libraries must be non-empty paths, got {library!r}.")
    return result


def expressions(
    values: Iterable[Any], method: str, example: str, *, what: str = "expression", arg: str | None = None
) -> list[str]:
    values = list(values)
    argument = f" {arg}" if arg else ""
    if not values:
        raise ValueError(f"{method}(){argument} needs at least one {what}, e.g. {example}.")
    result = []
    for position, value in enumerate(values, 1):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{method}(){argument}: {what} #{position} must be a non-empty string, got {value!r}.")
        result.append(value.strip())
    return result


def text(value: Any, method: str, what: str, example: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{method}() needs {what} as a non-empty string, got {value!r}; e.g. {example}.")
    return value.strip()


def paths(paths: Any, method: str) -> list[str]:
    listed = [paths] if isinstance(paths, str) else paths
    if not isinstance(listed, list | tuple) or not listed:
        raise ValueError(f"{method}() needs a path or a non-empty list of paths (globs allowed), got {paths!r}.")
    for path in listed:
        if not isinstance(path, str) or not path.strip():
            raise ValueError(f"{method}(): every path must be a non-empty string, got {path!r}.")
    return [absolute(path.strip()) for path in listed]


def absolute(path: str) -> str:
    """A relative local path is relative to where the pipeline is built (as a Spark
    driver's are to its working directory), not to the TaskManager that reads it."""
    if "://" in path or path.startswith("file:") or os.path.isabs(path):
        return path
    return os.path.abspath(path)


def schema(schema: Any, method: str) -> str | None:
    if schema is None:
        return None
    if not isinstance(schema, str) or not schema.strip():
        raise ValueError(
            f"{method}() schema must be a Spark DDL string such as 'id INT, name STRING' (or None to infer it), "
            f"got {schema!r}."
        )
    return schema.strip()


def options(defaults: dict[str, Any], options: Any, method: str) -> dict[str, str]:
    """Spark reader/writer options, all as strings (True becomes "true"); `options` wins over `defaults`."""
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"{method}() options must be a dict of option name to value, got {options!r}.")
    result = {}
    for key, value in {**defaults, **(options or {})}.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{method}() option names must be non-empty strings, got {key!r}.")
        if isinstance(value, bool):
            result[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            result[key] = str(value)
        else:
            raise ValueError(
                f"{method}() option {key!r} must be a string, number or bool, got {type(value).__name__} {value!r}."
            )
    return result
