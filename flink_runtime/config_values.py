"""How a configuration value is read from text: Flink's durations ("10 s", "500 ms",
"10000"), memory sizes ("64m", "10 mb", "512KiB"), booleans, enum choices and lists.
Each parser names the key in its error, so a bad value is reported where it was set."""

from __future__ import annotations

import re
from typing import Any


class ConfigurationError(ValueError):
    """A configuration value is missing or malformed; the message names the key."""


_DURATION_UNITS = {
    "": 1.0, "ms": 1.0, "milli": 1.0, "millis": 1.0, "millisecond": 1.0, "milliseconds": 1.0,
    "s": 1e3, "sec": 1e3, "secs": 1e3, "second": 1e3, "seconds": 1e3,
    "min": 60e3, "m": 60e3, "minute": 60e3, "minutes": 60e3,
    "h": 3600e3, "hour": 3600e3, "hours": 3600e3,
    "d": 86400e3, "day": 86400e3, "days": 86400e3,
}  # fmt: skip
# Flink's MemorySize units (binary: 1k = 1024 bytes), plus the IEC spellings "KiB", "MiB", ...
_SIZE_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40, "tebibytes": 1 << 40,
}  # fmt: skip
_NUMBER_AND_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration_ms(value: Any, key: str = "duration") -> float:
    if isinstance(value, bool):
        raise ConfigurationError(f"{key}: expected a duration such as '10 s' or '500 ms', got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    match = _NUMBER_AND_UNIT.match(str(value))
    if not match or match.group(2).lower() not in _DURATION_UNITS:
        raise ConfigurationError(f"{key}: expected a duration such as '10 s' or '500 ms', got {value!r}")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]


def parse_size_bytes(value: Any, key: str = "size", minimum: int = 0) -> int:
    """Bytes from an int or a string such as "64m", "10 mb", "512KiB" or "1048576".

    The one size grammar of the project: configuration options, Pipeline arguments and
    source configs all read sizes through here.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        match = _NUMBER_AND_UNIT.match(str(value)) if isinstance(value, str) else None
        if not match or match.group(2).lower() not in _SIZE_UNITS:
            raise ConfigurationError(
                f"{key} must be a number of bytes or a size such as '64m', '10 mb' or '1g' "
                f"(units b, k, m, g, t), got {value!r}"
            )
        size = int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])
    if size < minimum:
        raise ConfigurationError(f"{key} must be at least {minimum} byte{'s' if minimum != 1 else ''}, got {value!r}")
    return size


def parse_choice(value: Any, key: str, choices: tuple[str, ...]) -> str:
    """One of `choices`, case-insensitive as Flink reads enum options."""
    text = str(value).strip().upper()
    if text not in choices:
        raise ConfigurationError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")
    return text


def parse_list(value: Any) -> list[str]:
    """A YAML list, or text separated by `,` or `;` (Flink's list separator): its non-empty items."""
    items = value if isinstance(value, list | tuple) else str(value or "").replace(";", ",").split(",")
    return [text for item in items if (text := str(item).strip())]


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean (true or false): {value!r}")
