"""A typed configuration option (Flink's ConfigOption<T>) and the parsers that type it.

An option knows its key, how its value is read from YAML or `-D` text (its parser),
its default (written as in config.yaml, and read by the same parser, so a default
cannot disagree with the grammar), its description (docs/configuration.md is
generated from it) and whether a job's own config may override it. `Configuration.get`
of a `ConfigOption[T]` returns a T.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from flink_runtime.config_values import (
    ConfigurationError,
    parse_bool,
    parse_choice,
    parse_duration_ms,
    parse_list,
    parse_size_bytes,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Parser(Generic[T]):
    """How one kind of value is read. `convert(value, key)` raises ConfigurationError
    (naming the key) or ValueError/TypeError, which `parse` words as "expected ..."."""

    type_name: str  # the "Type" column of docs/configuration.md
    expected: str  # what is accepted, for error messages
    convert: Callable[[Any, str], T]

    def parse(self, value: Any, key: str) -> T:
        try:
            return self.convert(value, key)
        except ConfigurationError:
            raise
        except (TypeError, ValueError):
            raise ConfigurationError(f"{key}: expected {self.expected}, got {value!r}") from None


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    key: str
    parser: Parser[T]
    default: Any  # as written in config.yaml; read by `parser` like a value that was set
    description: str
    # False: a setting of the whole cluster; a job's config naming it is refused at submit.
    job_overridable: bool = False

    def parse(self, value: Any) -> T:
        return self.parser.parse(value, self.key)

    @property
    def type_name(self) -> str:
        return self.parser.type_name


# -- parsers ---------------------------------------------------------------------------------


def _to_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(value)
    return int(str(value).strip()) if isinstance(value, str) else int(value)


def integer(minimum: int | None = None) -> Parser[int]:
    def convert(value: Any, key: str) -> int:
        number = _to_int(value, key)
        if minimum is not None and number < minimum:
            raise ConfigurationError(f"{key}: must be at least {minimum}, got {value!r}")
        return number

    expected = "a whole number" if minimum is None else f"a whole number >= {minimum}"
    return Parser("Integer", expected, convert)


def _optional_int(value: Any, key: str) -> int | None:
    return None if value is None or str(value).strip() == "" else _to_int(value, key)


def _float(value: Any, key: str) -> float:
    if isinstance(value, bool):
        raise ValueError(value)
    return float(value)


def _text(value: Any, key: str) -> str:
    return "" if value is None else str(value)


def _optional_text(value: Any, key: str) -> str | None:
    return None if value is None else str(value)


def directory_or_temp(name: str) -> Parser[str]:
    """A directory (path or URI); empty or unset: `<system temp dir>/<name>`."""

    def convert(value: Any, key: str) -> str:
        return str(value or "") or os.path.join(tempfile.gettempdir(), name)

    return Parser("String", "a directory", convert)


def _bool(value: Any, key: str) -> bool:
    return parse_bool(value)


def _duration(value: Any, key: str) -> float:
    return parse_duration_ms(value, key)


def _positive_duration(value: Any, key: str) -> float:
    millis = parse_duration_ms(value, key)
    if millis <= 0:
        raise ConfigurationError(f"{key}: must be a positive duration (e.g. '10 min'), got {value!r}")
    return millis


def _optional_duration(value: Any, key: str) -> float | None:
    if value is None or str(value).strip() in ("", "0"):
        return None
    return parse_duration_ms(value, key)


def _size(value: Any, key: str) -> int:
    return parse_size_bytes(value, key)


def _list(value: Any, key: str) -> list[str]:
    return parse_list(value)


def choice(*choices: str) -> Parser[str]:
    """One of `choices` (upper case), read case-insensitively as Flink reads enums."""
    return Parser(
        f"Enum: {', '.join(choices)}", f"one of {', '.join(choices)}", lambda v, k: parse_choice(v, k, choices)
    )


def _lower_choice(
    choices: tuple[str, ...], what: str, aliases: dict[str, str] | None, optional: bool
) -> Parser[str | None]:
    names = " or ".join([", ".join(choices[:-1]), choices[-1]] if len(choices) > 1 else choices)

    def convert(value: Any, key: str) -> str | None:
        text = "" if value is None else str(value).strip().lower()
        if optional and text == "":
            return None
        text = (aliases or {}).get(text, text)
        if text not in choices:
            raise ConfigurationError(f"{key}: unknown {what} {value!r}; use {names}")
        return text

    return Parser(f"Enum: {', '.join(choices)}", names, convert)


def lower_choice(*choices: str, what: str, aliases: dict[str, str] | None = None) -> Parser[str]:
    """One of `choices` (lower case), case-insensitive; `what` names the kind of value in
    errors ("unknown strategy 'x'"); `aliases` map other spellings to a choice."""
    return cast("Parser[str]", _lower_choice(choices, what, aliases, optional=False))


def optional_lower_choice(*choices: str, what: str) -> Parser[str | None]:
    """As lower_choice, but unset or empty reads as None (the setting was not asked for)."""
    return _lower_choice(choices, what, None, optional=True)


INTEGER: Parser[int] = integer()
OPTIONAL_INTEGER: Parser[int | None] = Parser("Integer", "a whole number (or nothing: unset)", _optional_int)
FLOAT: Parser[float] = Parser("Double", "a number", _float)
STRING: Parser[str] = Parser("String", "text", _text)
# Unset reads as None, which callers tell from "" (e.g. jobstore.url: "" is "no store").
OPTIONAL_STRING: Parser[str | None] = Parser("String", "text", _optional_text)
BOOLEAN: Parser[bool] = Parser("Boolean", "true or false", _bool)
DURATION: Parser[float] = Parser("Duration", "a duration such as '10 s' or '500 ms'", _duration)
POSITIVE_DURATION: Parser[float] = Parser("Duration", "a positive duration such as '10 min'", _positive_duration)
# A duration that may be off: unset, "" or "0" read as None (periodic checkpointing off).
OPTIONAL_DURATION: Parser[float | None] = Parser(
    "Duration", "a duration such as '10 s' (or 0: off)", _optional_duration
)
MEMORY_SIZE: Parser[int] = Parser("MemorySize", "a size such as '64m', '10 mb' or '1g'", _size)
LIST: Parser[list[str]] = Parser("List<String>", "a YAML list or items separated by ','", _list)
