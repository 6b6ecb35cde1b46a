"""Configuration: a flat key -> value map read through typed options.

Values come, later ones winning, from: the options' defaults, a YAML file
(`$FLINK_CONF_DIR/config.yaml`, or `--config FILE`), the `FLINK_PROPERTIES`
environment variable (YAML text, as Flink's docker images use it), and `-D key=value`
on the command line. Nested YAML (`rest: {port: 8081}`) and flat keys
(`rest.port: 8081`) are both accepted, as in Flink 2's config.yaml.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from flink_runtime.config_values import ConfigurationError
from flink_runtime.configuration.option import ConfigOption
from flink_runtime.configuration.registry import OPTIONS

T = TypeVar("T")


def _flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        full_key = f"{prefix}{key}"
        if isinstance(value, Mapping) and full_key not in OPTIONS:
            flat.update(_flatten(value, f"{full_key}."))
        else:
            flat[full_key] = value
    return flat


class Configuration:
    """What was set, by key; `get(option)` reads a value (or the option's default) typed."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = _flatten(values or {})

    # -- loading -----------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        config_file: str | os.PathLike[str] | None = None,
        dynamic_properties: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> Configuration:
        environ = os.environ if environ is None else environ
        config = cls()
        if config_file is None and environ.get("FLINK_CONF_DIR"):
            candidate = Path(environ["FLINK_CONF_DIR"]) / "config.yaml"
            config_file = candidate if candidate.exists() else None
        if config_file is not None:
            config.update(_read_yaml(Path(config_file).read_text(), f"config file {config_file}"))
        if environ.get("FLINK_PROPERTIES"):
            config.update(_read_yaml(environ["FLINK_PROPERTIES"], "FLINK_PROPERTIES"))
        for prop in dynamic_properties:
            key, sep, value = prop.partition("=")
            if not sep or not key.strip():
                raise ConfigurationError(f"-D {prop!r}: expected key=value, e.g. -D rest.port=8081")
            # Taken as text, not YAML: "-D security.cluster.secret=0123" must not become 83.
            # The options' parsers convert.
            config.set(key.strip(), value.strip())
        return config

    def update(self, values: Mapping[str, Any]) -> None:
        self._values.update(_flatten(values))

    def set(self, key: str, value: Any) -> Configuration:
        self._values[key] = value
        return self

    def copy(self, overrides: Mapping[str, Any] | None = None) -> Configuration:
        """A copy, with `overrides` (flat or nested keys) applied."""
        clone = Configuration(self._values)
        clone.update(overrides or {})
        return clone

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __contains__(self, key: str) -> bool:
        return key in self._values

    # -- typed access ----------------------------------------------------------------------

    def get(self, option: ConfigOption[T]) -> T:
        """The option's value, typed; ConfigurationError names the key, the bad value and
        what is accepted."""
        return option.parse(self._values.get(option.key, option.default))

    def get_seconds(self, option: ConfigOption[float]) -> float:
        """A duration option in seconds (asyncio's unit)."""
        return self.get(option) / 1000.0

    def as_written(self, option: ConfigOption[Any]) -> str:
        """The option's value as the user wrote it (or its default), for messages that
        quote the setting ("limited to 2 gb")."""
        return str(self._values.get(option.key, option.default))

    def raw(self, key: str) -> Any:
        """The value set for a key no option declares (spark.*, a job's own settings), or
        None. Declared options are read with get(); a declared key answers its default."""
        option = OPTIONS.get(key)
        return self._values.get(key, None if option is None else option.default)


def _read_yaml(text: str, where: str) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{where} is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigurationError(f"{where} must be a mapping of keys to values, got {type(loaded).__name__}")
    return loaded
