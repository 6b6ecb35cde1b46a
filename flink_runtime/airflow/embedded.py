"""The embedded cluster for Airflow connections marked ``embedded``.

The implementation is flink_runtime/embedded (outside airflow/, so that the
``flink-runtime embedded status|stop`` commands can use it without importing the
provider); this module is the provider's name for it.
"""

from flink_runtime.embedded import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_PORT,
    LOCK_FILE,
    LOG_FILE,
    STATE_FILE,
    EmbeddedClusterError,
    default_state_dir,
    ensure_embedded_cluster,
    stop_embedded_cluster,
)

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_PORT",
    "LOCK_FILE",
    "LOG_FILE",
    "STATE_FILE",
    "EmbeddedClusterError",
    "default_state_dir",
    "ensure_embedded_cluster",
    "stop_embedded_cluster",
]
