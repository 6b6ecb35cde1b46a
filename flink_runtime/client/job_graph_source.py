"""What JobClient.submit accepts as a JobGraph, turned into the JSON document it
sends: loading and checking local input (ValueError, before any request), pointing the
graph at a savepoint to resume from, and finding the local library files to upload."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from flink_runtime import configuration as cfg
from flink_runtime.blob.store import MAX_BLOB_BYTES, is_blob_key, name_problem, parse_blob_key
from flink_runtime.jobgraph.jobgraph import JobGraph

# What submit() accepts: a JobGraph, a JSON-like dict, JSON bytes, or a .json file's path.
JobGraphSource = JobGraph | dict[str, Any] | str | os.PathLike[str] | bytes

# JobGraph config keys (Flink's SavepointConfigOptions) for resuming from a savepoint.
SAVEPOINT_PATH_KEY = cfg.SAVEPOINT_PATH.key
SAVEPOINT_IGNORE_UNCLAIMED_STATE_KEY = cfg.SAVEPOINT_IGNORE_UNCLAIMED_STATE.key


def set_savepoint_config(
    document: dict[str, Any], savepoint_path: str | os.PathLike[str] | None, allow_non_restored_state: bool
) -> None:
    """Point the (copied) JobGraph document at the savepoint to resume from."""
    if savepoint_path is None:
        if allow_non_restored_state:
            raise ValueError("allow_non_restored_state only applies when resuming: pass savepoint_path too")
        return
    path = os.fspath(savepoint_path)
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"savepoint_path must be a non-empty path, got {savepoint_path!r}")
    config = {**_config_of(document), SAVEPOINT_PATH_KEY: path}
    if allow_non_restored_state:
        config[SAVEPOINT_IGNORE_UNCLAIMED_STATE_KEY] = True
    document["config"] = config


def set_config_defaults(document: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Give the (copied) JobGraph document ``defaults`` for the keys its config does not set."""
    document["config"] = {**defaults, **_config_of(document)}


def _config_of(document: dict[str, Any]) -> dict[str, Any]:
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise ValueError(f"the JobGraph's config must be an object, not {type(config).__name__}")
    return config


def library_files(document: dict[str, Any]) -> dict[str, str]:
    """The graph's library entries that are local files to upload, entry -> path.

    Every other entry must be a blob key; anything else is refused before any request,
    since the cluster could not find it either.
    """
    libraries = document.get("libraries") or []
    if not isinstance(libraries, list):
        raise ValueError(f"the JobGraph's libraries must be a list of paths, not {type(libraries).__name__}")
    files: dict[str, str] = {}
    for entry in libraries:
        if not isinstance(entry, str):
            raise ValueError(f"JobGraph library {entry!r} is not a string (a file path or a blob key)")
        if is_blob_key(entry):
            parse_blob_key(entry)  # ValueError says what is wrong with it
            continue
        file = Path(entry).expanduser()
        if not file.is_file():
            raise ValueError(
                f"JobGraph library {entry!r} is neither an existing file nor a blob key (blob:<sha256>/<name>); "
                "list the .py, .zip, .whl or .egg file's path here, where the job is submitted"
            )
        problem = library_file_problem(entry, file)
        if problem:
            raise ValueError(problem)
        files[entry] = str(file.resolve())
    return files


def library_file_problem(entry: str, file: Path) -> str | None:
    if not file.is_file():
        return f"library {entry!r} is not an existing file"
    problem = name_problem(file.name)
    if problem:
        return f"library {entry!r} cannot be uploaded: {problem}; rename the file"
    size = file.stat().st_size
    if size > MAX_BLOB_BYTES:
        return f"library {entry!r} is {size} bytes; the JobManager accepts at most {MAX_BLOB_BYTES} bytes per library"
    return None


def load_job_graph_document(job_graph: JobGraphSource) -> dict[str, Any]:
    """Turn the accepted inputs into a JSON object, raising ValueError for bad local input."""
    if isinstance(job_graph, JobGraph):
        return msgspec.to_builtins(job_graph)
    if isinstance(job_graph, dict):
        try:
            # A round trip copies the dict (we set job_id) and finds values JSON cannot hold.
            return msgspec.json.decode(msgspec.json.encode(job_graph))
        except (TypeError, msgspec.EncodeError) as exc:
            raise ValueError(f"the JobGraph dict cannot be encoded as JSON: {exc}") from None
    if isinstance(job_graph, bytes | bytearray | memoryview):
        return _parse_document(bytes(job_graph), "the JobGraph bytes")
    if isinstance(job_graph, str | os.PathLike):
        path = Path(job_graph)
        where = f"JobGraph file {str(path)!r}"
        if isinstance(job_graph, str) and job_graph.lstrip().startswith("{"):
            # An easy mistake to make; say so rather than "file not found".
            raise ValueError("submit() takes a str as a file path; pass JSON text as bytes or a dict")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ValueError(f"{where} does not exist") from None
        except IsADirectoryError:
            raise ValueError(f"{where} is a directory, not a .json file") from None
        except OSError as exc:
            raise ValueError(f"cannot read {where}: {exc.strerror or exc}") from None
        return _parse_document(data, where)
    raise ValueError(
        f"cannot submit a {type(job_graph).__name__}: pass a JobGraph, a dict, JSON bytes or the path of a .json file"
    )


def _parse_document(data: bytes, where: str) -> dict[str, Any]:
    if not data.strip():
        raise ValueError(f"{where} is empty")
    try:
        document = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{where} must hold a JSON object (a JobGraph), not a {type(document).__name__}")
    return document
