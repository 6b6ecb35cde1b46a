"""The config of JDBC sources and sinks (Pipeline.read_jdbc, DataSet.write_jdbc), checked
where the user calls them: a bad URL, a password given in clear or a missing key column
is reported at that line, not when the job runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flink_runtime.io import jdbc
from flink_runtime.security.secret_store import check_reference


def _credentials(method: str, user: Any, password: Any) -> dict[str, str]:
    credentials = {}
    if user is not None:
        if not isinstance(user, str) or not user.strip():
            raise ValueError(f"{method}() user must be a non-empty string, got {user!r}.")
        credentials["user"] = user.strip()
    if password is not None:
        credentials["password"] = check_reference(password, f"{method}() password")
    return credentials


def _string_options(method: str, options: Mapping | None) -> dict[str, str]:
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"{method}() options must be a dict of Spark JDBC option to value, got {options!r}.")
    result = {}
    for key, value in (options or {}).items():
        if not isinstance(key, str) or not isinstance(value, str | int | float | bool):
            raise ValueError(f"{method}() option {key!r} must be a string, number or bool, got {value!r}.")
        if key.lower() in ("password", "user", "url", "dbtable", "query"):
            raise ValueError(f"{method}() option {key!r} is set by {method}()'s own arguments; pass it there.")
        result[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return result


def _integer(method: str, name: str, value: Any, minimum: int | None = None) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ValueError(f"{method}() {name} must be an integer{bound}, got {value!r}.")
    return value


def source_spec(
    url: Any,
    table: Any,
    query: Any,
    user: Any,
    password: Any,
    partition_column: Any,
    lower: Any,
    upper: Any,
    splits: Any,
    options: Mapping | None,
) -> dict[str, Any]:
    method = "read_jdbc"
    try:
        jdbc.parse_url(url, f"{method}() url")
        if (table is None) == (query is None):
            raise ValueError(f"{method}() needs exactly one of table='schema.table' or query='SELECT ...'.")
        if table is not None:
            jdbc.split_table(table, f"{method}() table")
        elif not isinstance(query, str) or not query.strip():
            raise ValueError(f"{method}() query must be a non-empty SELECT statement, got {query!r}.")
        if partition_column is not None:
            jdbc.check_identifier(partition_column, f"{method}() partition_column")
    except jdbc.JdbcError as exc:
        raise ValueError(str(exc)) from None
    lower, upper = _integer(method, "lower", lower), _integer(method, "upper", upper)
    splits = _integer(method, "splits", splits, minimum=1)
    if partition_column is None and (lower, upper, splits) != (None, None, None):
        raise ValueError(f"{method}() lower/upper/splits split by a partition_column; name one, e.g. 'id'.")
    if lower is not None and upper is not None and upper < lower:
        raise ValueError(f"{method}() upper ({upper}) must be >= lower ({lower}).")
    spec: dict[str, Any] = {"format": "jdbc", "url": url}
    spec["table" if table is not None else "query"] = table if table is not None else query.strip().rstrip(";")
    spec.update(_credentials(method, user, password))
    if partition_column is not None:
        spec.update({"partition_column": partition_column, "lower": lower, "upper": upper, "splits": splits})
    spec["options"] = _string_options(method, options)
    return spec


def sink_spec(
    url: Any, table: Any, mode: Any, keys: Any, user: Any, password: Any, options: Mapping | None
) -> dict[str, Any]:
    method = "write_jdbc"
    try:
        jdbc.parse_url(url, f"{method}() url")
        jdbc.split_table(table, f"{method}() table")
        if mode not in jdbc.SINK_MODES:
            raise ValueError(f"{method}() mode must be one of {', '.join(map(repr, jdbc.SINK_MODES))}, got {mode!r}.")
        key_list = [keys] if isinstance(keys, str) else list(keys or [])
        if mode == "upsert" and not key_list:
            raise ValueError(f"{method}(mode='upsert') needs keys=[...]: the columns rows are merged on.")
        if mode != "upsert" and key_list:
            raise ValueError(f"{method}() keys are for mode='upsert' only, got mode={mode!r}.")
        for key in key_list:
            jdbc.check_identifier(key, f"{method}() keys")
    except jdbc.JdbcError as exc:
        raise ValueError(str(exc)) from None
    spec: dict[str, Any] = {"format": "jdbc", "url": url, "table": table, "mode": mode, "keys": key_list}
    spec.update(_credentials(method, user, password))
    spec["options"] = _string_options(method, options)
    return spec
