"""The embedded cluster for Airflow connections marked ``embedded``.

The implementation is flink_runtime/embedded (outside airflow/, so that the
``flink-runtime embedded status|stop`` commands can use it without importing the
provider); this module is the provider's name for it.
"""

from flink_runtime.embedded import *  # noqa: F403
from flink_runtime.embedded import __all__  # noqa: F401
