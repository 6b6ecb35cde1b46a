"""What a ``flink_runtime`` Airflow connection says: the cluster's REST URL, token, TLS
verification and request timeout (``ClusterSettings``).

Host and port (or a URL in Host), the scheme from Schema or the ``https`` extra, the
token as password, extras ``verify_tls`` and ``timeout``. Host ``embedded`` (or the
extra ``"embedded": true``) asks for the embedded cluster (airflow/embedded.py), started
here if none runs, sized by the extras ``taskmanagers`` and ``slots``, on the REST port
Port (default 18081), stopping itself after the extra ``embedded_idle_timeout`` seconds
unused (default 3600, 0: never).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

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


def cluster_settings(conn: Connection, timeout: float | None = None) -> ClusterSettings:
    """The settings of ``conn``; ``timeout`` overrides the connection's. May start the
    embedded cluster (seconds): call it off an event loop."""
    extra = conn.extra_dejson

    def option(name: str, default: Any) -> Any:
        # The UI may store a form field under its prefixed name, and an empty one as "".
        value = extra.get(name, extra.get(f"extra__{CONN_TYPE}__{name}"))
        return default if value is None or value == "" else value

    host = (conn.host or "").strip()
    if host.lower() == "embedded" or _as_bool(option("embedded", False)):
        try:
            rest_url = ensure_embedded_cluster(
                taskmanagers=int(option("taskmanagers", 2)),
                slots=int(option("slots", 2)),
                state_dir=option("state_dir", None),
                port=conn.port or None,
                idle_timeout=_idle_timeout(conn.conn_id, option("embedded_idle_timeout", None)),
            )
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
