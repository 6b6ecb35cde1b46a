"""What a ``flink_runtime`` Airflow connection says: the cluster's REST URL, token, TLS
verification and request timeout (``ClusterSettings``).

Host and port (or a URL in Host), the scheme from Schema or the ``https`` extra, the
token as password, extras ``verify_tls`` and ``timeout``. Host ``embedded`` (or the
extra ``"embedded": true``) asks for the embedded cluster (airflow/embedded.py), started
here if none runs, sized by the extras ``taskmanagers`` and ``slots``, on the REST port
Port (default 18081), its TaskManagers' RPC ports from the extra ``taskmanager_rpc_port``
(the i-th TaskManager takes that port + i; default: free ports), stopping itself after
the extra ``embedded_idle_timeout`` seconds unused (default 3600, 0: never).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from flink_runtime import configuration as cfg
from flink_runtime.airflow.embedded import EmbeddedClusterError, ensure_embedded_cluster
from flink_runtime.airflow.exceptions import FlinkRuntimeClusterUnreachable, FlinkRuntimeException

if TYPE_CHECKING:
    from airflow.sdk import Connection

CONN_TYPE = "flink_runtime"
DEFAULT_REST_PORT = 8081
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class ClusterSettings:
    rest_url: str
    token: str | None
    verify: bool
    timeout: float


@dataclass(frozen=True)
class EmbeddedOptions:
    """What an ``embedded`` connection asks of the embedded cluster (ensure_embedded_cluster's arguments)."""

    taskmanagers: int
    slots: int
    state_dir: str | None
    port: int | None
    idle_timeout: float | None
    taskmanager_rpc_port: int | None = None

    def arguments(self) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "taskmanagers": self.taskmanagers,
            "slots": self.slots,
            "state_dir": self.state_dir,
            "port": self.port,
            "idle_timeout": self.idle_timeout,
        }
        if self.taskmanager_rpc_port:
            arguments["config"] = {cfg.TASKMANAGER_RPC_PORT.key: self.taskmanager_rpc_port}
        return arguments


def _options(conn: Connection) -> Callable[[str, Any], Any]:
    extra = conn.extra_dejson

    def option(name: str, default: Any) -> Any:
        # The UI may store a form field under its prefixed name, and an empty one as "".
        value = extra.get(name, extra.get(f"extra__{CONN_TYPE}__{name}"))
        return default if value is None or value == "" else value

    return option


def embedded_options(conn: Connection) -> EmbeddedOptions | None:
    """The embedded cluster ``conn`` asks for, None if it names a cluster of its own.
    FlinkRuntimeException names an extra that is out of range or malformed."""
    option = _options(conn)
    if (conn.host or "").strip().lower() != "embedded" and not _as_bool(option("embedded", False)):
        return None
    try:
        options = EmbeddedOptions(
            taskmanagers=int(option("taskmanagers", 2)),
            slots=int(option("slots", 2)),
            state_dir=option("state_dir", None),
            port=conn.port or None,
            idle_timeout=_idle_timeout(conn.conn_id, option("embedded_idle_timeout", None)),
            taskmanager_rpc_port=int(option("taskmanager_rpc_port", 0)) or None,
        )
    except ValueError as exc:
        raise FlinkRuntimeException(f"connection {conn.conn_id!r} (embedded cluster): {exc}") from None
    last = (options.taskmanager_rpc_port or 1) + max(options.taskmanagers, 1) - 1
    if options.taskmanager_rpc_port is not None and not (options.taskmanager_rpc_port > 0 and last < 65536):
        raise FlinkRuntimeException(
            f"connection {conn.conn_id!r}: extra taskmanager_rpc_port must leave a port for each of the "
            f"{options.taskmanagers} TaskManagers within 1..65535 (the i-th takes port + i), "
            f"got {options.taskmanager_rpc_port}"
        )
    return options


def cluster_settings(conn: Connection, timeout: float | None = None) -> ClusterSettings:
    """The settings of ``conn``; ``timeout`` overrides the connection's. May start the
    embedded cluster (seconds): call it off an event loop."""
    option = _options(conn)
    host = (conn.host or "").strip()
    embedded = embedded_options(conn)
    if embedded is not None:
        try:
            rest_url = ensure_embedded_cluster(**embedded.arguments())
        except EmbeddedClusterError as exc:
            raise FlinkRuntimeClusterUnreachable(str(exc)) from exc
        except ValueError as exc:  # a size, port or timeout out of range
            raise FlinkRuntimeException(f"connection {conn.conn_id!r} (embedded cluster): {exc}") from None
    elif not host:
        raise FlinkRuntimeException(
            f"connection {conn.conn_id!r} has no host: set the host and port of the "
            "JobManager's REST API, or host 'embedded' for a MiniCluster shared by all tasks"
        )
    else:
        rest_url = _rest_url(host, conn.port, conn.schema, _as_bool(option("https", False)))
    return ClusterSettings(
        rest_url=rest_url,
        token=conn.password or None,
        verify=_as_bool(option("verify_tls", True)),
        timeout=timeout if timeout is not None else float(option("timeout", DEFAULT_TIMEOUT)),
    )


def _idle_timeout(conn_id: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0:  # also NaN
        raise FlinkRuntimeException(
            f"connection {conn_id!r}: extra embedded_idle_timeout must be a number of seconds "
            f"(0: the embedded cluster never stops itself), got {value!r}"
        )
    return seconds


def _rest_url(host: str, port: int | None, schema: str | None, https: bool) -> str:
    if "://" in host:
        url = httpx.URL(host)
        if port:
            url = url.copy_with(port=port)
        return str(url).rstrip("/")
    scheme = (schema or "").strip().lower()
    if scheme not in ("http", "https"):
        scheme = "https" if https else "http"
    return f"{scheme}://{host}:{port or DEFAULT_REST_PORT}"


def _as_bool(value: Any) -> bool:
    # Extras typed into the UI arrive as strings.
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def describe_overview(overview: dict[str, Any]) -> str:
    return (
        f"{overview.get('taskmanagers', 0)} TaskManagers, "
        f"{overview.get('slots-available', 0)} of {overview.get('slots-total', 0)} slots free"
    )


def check_embedded(options: EmbeddedOptions) -> tuple[bool, str]:
    """The "Test" button for an embedded connection: its options are valid (checked by
    embedded_options), and the cluster, if it runs on this host, answers. Starts nothing."""
    from flink_runtime.embedded import DEFAULT_PORT, status

    found = status(options.state_dir)
    if found.running and found.overview is not None:
        overview = describe_overview(found.overview)
        return True, f"The embedded cluster runs at {found.rest_url} (pid {found.pid}): {overview}"
    if found.running:
        return False, (
            f"The embedded cluster of {found.state_dir} (pid {found.pid}) does not answer at {found.rest_url}; "
            f"its log: {found.log}"
        )
    return True, (
        f"Valid embedded connection: the first task that uses it starts a cluster of {options.taskmanagers} "
        f"TaskManagers x {options.slots} slots on port {options.port or DEFAULT_PORT} (state dir {found.state_dir}). "
        "None runs on this host now; the Test button does not start one."
    )
