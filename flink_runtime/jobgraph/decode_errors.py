"""Rewriting msgspec's decode errors for people.

msgspec stops at the first bad field with a message written for programmers
("Expected `int` >= 1 - at `$.vertices[0].parallelism`"). Here it becomes a sentence
that names the vertex, edge or data set, says what the field must be and shows what
it was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec

from flink_runtime.jobgraph.jobgraph import JobGraph
from flink_runtime.jobgraph.wording import did_you_mean


def explain_malformed_json(error: msgspec.DecodeError, data: bytes) -> str:
    message = str(error)
    if message == "Input data was truncated":
        return "JobGraph is not valid JSON: the document ends early (is it truncated?); send all of it."
    # msgspec reports a byte offset; people and editors think in lines and columns.
    match = re.search(r"\(byte (\d+)\)$", message)
    if match:
        offset = int(match.group(1))
        line = data.count(b"\n", 0, offset) + 1
        column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
        problem = message[: match.start()].strip().removeprefix("JSON is malformed: ")
        return f"JobGraph is not valid JSON: {problem} at line {line}, column {column} (byte {offset})."
    return f"JobGraph is not valid JSON: {message}."


_SCHEMA_ERROR = re.compile(r"^(?P<problem>.*?) - at (?P<key>`key` in )?`(?P<path>\$[^`]*)`$", re.S)
_PATH_SEGMENT = re.compile(r"\.([A-Za-z_]\w*)|\[(\d+)\]")
_COLLECTIONS = {"vertices": "vertex", "edges": "edge", "intermediate_datasets": "data set"}
_MISSING: Any = object()
_JOB_GRAPH_TYPE = msgspec.inspect.type_info(JobGraph)


def explain_schema_error(message: str, document: Any) -> str:
    """Rewrite a msgspec ValidationError message for the person who wrote the document.

    Falls back to msgspec's own words (with its $.path) for anything not understood.
    """
    match = _SCHEMA_ERROR.match(message)
    problem, path_text = (match["problem"], match["path"]) if match else (message, "$")
    path = _parse_path(path_text)
    if path is None:
        return f"JobGraph does not match the schema: {message}."

    # Who: the vertex, edge or data set the path is inside of, named by its id.
    subject, field_path = "JobGraph", path
    if len(path) >= 2 and path[0] in _COLLECTIONS and isinstance(path[1], int):
        subject = f"{_COLLECTIONS[path[0]]} #{path[1]}"
        label = _item_label(path[0], _value_at(document, path[:2]))
        subject = f"{subject} ({label})" if label else subject
        field_path = path[2:]
    field = _format_path(field_path)
    where = f"{subject}: {field}" if field else subject
    at = f", at {path_text}"

    expected_type = _type_at(path)
    value = _value_at(document, path)
    if match and match["key"]:
        return f"{where} has a key that is not a string{at}; use string keys only."
    if missing := re.fullmatch(r"Object missing required field `(.+)`", problem):
        return f"{where}: required field '{missing[1]}' is missing{at}; add it."
    if unknown := re.fullmatch(r"Object contains unknown field `(.+)`", problem):
        known = _field_names(expected_type)
        listing = f" (known fields: {', '.join(known)})" if known else ""
        return (
            f"{where}: unknown field '{unknown[1]}'{did_you_mean(unknown[1], known)}{at}; remove or rename it{listing}."
        )
    if expected_type is not None and (problem.startswith("Expected") or problem.startswith("Invalid enum")):
        got = f" (got {_show(value)})" if value is not _MISSING else ""
        hint = ""
        if isinstance(value, str) and isinstance(_unwrap(expected_type), msgspec.inspect.EnumType):
            choices = [member.value for member in _unwrap(expected_type).cls]
            hint = did_you_mean(value, choices)
        return f"{where} must be {_describe(expected_type)}{got}{hint}{at}."
    return f"{where}: {problem}{at}."


def _parse_path(text: str) -> list[str | int] | None:
    path: list[str | int] = []
    position = 1  # after "$"
    while position < len(text):
        segment = _PATH_SEGMENT.match(text, position)
        if segment is None:
            return None
        path.append(segment[1] if segment[1] is not None else int(segment[2]))
        position = segment.end()
    return path


def _format_path(path: Sequence[str | int]) -> str:
    text = ""
    for segment in path:
        text += f"[{segment}]" if isinstance(segment, int) else f".{segment}"
    return text.removeprefix(".")


def _value_at(document: Any, path: Sequence[str | int]) -> Any:
    for segment in path:
        in_list = isinstance(segment, int) and isinstance(document, list) and segment < len(document)
        in_dict = isinstance(segment, str) and isinstance(document, dict) and segment in document
        if not (in_list or in_dict):
            return _MISSING
        document = document[segment]
    return document


def _item_label(collection: str, item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    if collection == "edges":
        source, target = item.get("source"), item.get("target")
        if isinstance(source, str) and isinstance(target, str):
            return f"'{source}' -> '{target}'"
        return ""
    for key in ("id", "name"):
        if isinstance(item.get(key), str):
            return f"'{item[key]}'"
    return ""


def _unwrap(type_: Any) -> Any:
    """The type without its metadata and without `| None`."""
    while True:
        if isinstance(type_, msgspec.inspect.Metadata):
            type_ = type_.type
        elif isinstance(type_, msgspec.inspect.UnionType):
            others = [t for t in type_.types if not isinstance(t, msgspec.inspect.NoneType)]
            if len(others) != 1:
                return type_
            type_ = others[0]
        else:
            return type_


def _type_at(path: Sequence[str | int]) -> Any:
    type_: Any = _JOB_GRAPH_TYPE
    for segment in path:
        type_ = _unwrap(type_)
        if isinstance(segment, int) and isinstance(type_, msgspec.inspect.ListType):
            type_ = type_.item_type
        elif isinstance(segment, str) and isinstance(type_, msgspec.inspect.StructType):
            fields = {field.encode_name: field.type for field in type_.fields}
            if segment not in fields:
                return None
            type_ = fields[segment]
        elif isinstance(segment, str) and isinstance(type_, msgspec.inspect.DictType):
            type_ = type_.value_type
        else:
            return None
    return type_


def _field_names(type_: Any) -> list[str]:
    type_ = _unwrap(type_)
    if isinstance(type_, msgspec.inspect.StructType):
        return [field.encode_name for field in type_.fields]
    return []


def _describe(type_: Any) -> str:
    """What a value of this type looks like, in words ("an integer from 1 to 32768")."""
    inspect = msgspec.inspect
    if isinstance(type_, inspect.Metadata):
        description = (type_.extra_json_schema or {}).get("description")
        return description.rstrip(".") if description else _describe(type_.type)
    if isinstance(type_, inspect.UnionType):
        # "or null" is left out: null only ever means "absent", which nobody gets wrong.
        members = [member for member in type_.types if not isinstance(member, inspect.NoneType)]
        return " or ".join(_describe(member) for member in members)
    if isinstance(type_, inspect.IntType | inspect.FloatType):
        kind = "an integer" if isinstance(type_, inspect.IntType) else "a number"
        if type_.ge is not None and type_.le is not None:
            return f"{kind} from {type_.ge} to {type_.le}"
        bounds = [
            f"{symbol} {bound}"
            for symbol, bound in ((">=", type_.ge), (">", type_.gt), ("<=", type_.le), ("<", type_.lt))
            if bound is not None
        ]
        return f"{kind} {' and '.join(bounds)}" if bounds else kind
    if isinstance(type_, inspect.StrType):
        low, high = type_.min_length, type_.max_length
        if low is not None and high is not None:
            text = f"a string of {low} to {high} characters"
        elif low is not None:
            text = f"a string of at least {low} characters"
        elif high is not None:
            text = f"a string of at most {high} characters"
        else:
            text = "a string"
        return f"{text} matching {type_.pattern}" if type_.pattern else text
    if isinstance(type_, inspect.EnumType):
        return "one of " + ", ".join(f"'{member.value}'" for member in type_.cls)
    simple = {
        inspect.BoolType: "true or false",
        inspect.NoneType: "null",
        inspect.ListType: "a list",
        inspect.DictType: "an object",
        inspect.StructType: "an object",
        inspect.AnyType: "any JSON value",
    }
    return simple.get(type(type_), "a valid value")


def _show(value: Any, limit: int = 40) -> str:
    if isinstance(value, str):
        text = f"'{value}'"
    else:
        try:
            text = msgspec.json.encode(value).decode()
        except (TypeError, msgspec.EncodeError):
            text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
