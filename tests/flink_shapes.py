"""Hold our REST answers against recorded Flink 2.3 answers (tests/flink_reference/recorded).

A typed Flink client (Jackson, unknown fields ignored) breaks on a field that is
missing or of another JSON type, never on one it does not know. So an answer of ours
has Flink's shape when every key of the recorded answer is there, recursively, with a
compatible type; extra keys of ours are fine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parent / "flink_reference" / "recorded"


def recorded(name: str) -> Any:
    """The body of a recorded answer (recorded/<name>.json)."""
    return json.loads((RECORDED / f"{name}.json").read_text())["body"]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"  # Flink writes "NaN" for some doubles: a string where we have a number is fine below
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def shape_problems(ours: Any, flink: Any, path: str = "$", keyed_by_id: frozenset[str] = frozenset()) -> list[str]:
    """Where `ours` lacks a field of `flink` or has one of another JSON type.

    Lists: each of our items against Flink's first item (_first_item_like). Objects whose path is in
    `keyed_by_id` (maps from ids to values) are compared value against value."""
    flink_kind, our_kind = _kind(flink), _kind(ours)
    if flink_kind == "null" or (flink_kind == "string" and flink == "NaN" and our_kind == "number"):
        return []
    if flink_kind != our_kind:
        return [f"{path}: Flink has {flink_kind} {json.dumps(flink)[:60]}, ours is {our_kind} {json.dumps(ours)[:60]}"]
    problems: list[str] = []
    if flink_kind == "array" and flink:
        for index, item in enumerate(ours):
            problems += shape_problems(item, _first_item_like(item, flink), f"{path}[{index}]", keyed_by_id)
    elif flink_kind == "object" and path in keyed_by_id:
        sample = next(iter(flink.values()), None)
        for key, value in ours.items():
            problems += shape_problems(value, sample, f"{path}.{key}", keyed_by_id)
    elif flink_kind == "object":
        for key, value in flink.items():
            if key not in ours:
                problems.append(f"{path}.{key}: missing (Flink has {json.dumps(value)[:60]})")
            else:
                problems += shape_problems(ours[key], value, f"{path}.{key}", keyed_by_id)
    return problems


def _first_item_like(item: Any, flink: list[Any]) -> Any:
    """Flink's first item, null where any of Flink's items is null. A list mixing kinds of
    records (Flink's JSON type property "className", as in checkpoint histories) is held
    kind by kind; a kind Flink's answer has no example of is not checked (null)."""
    alike = flink
    if isinstance(item, dict) and "className" in item:
        alike = [other for other in flink if isinstance(other, dict) and other.get("className") == item["className"]]
    if not alike or not isinstance(alike[0], dict):
        return alike[0] if alike else None
    return {key: None if any(other.get(key) is None for other in alike) else value for key, value in alike[0].items()}


def assert_flink_shape(ours: Any, flink_name: str, keyed_by_id: frozenset[str] = frozenset()) -> None:
    problems = shape_problems(ours, recorded(flink_name), keyed_by_id=keyed_by_id)
    assert not problems, f"not Flink's shape ({flink_name}):\n" + "\n".join(problems)
