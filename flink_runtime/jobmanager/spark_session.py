"""The JobManager's SparkSession, for plan checks and Hadoop paths (hdfs://, s3a://...).

Alone in its process, the JobManager's own session runs on local[1] (planning only): it
must not take a Spark cluster's cores from the TaskManagers. A MiniCluster's JobManager
shares the session its TaskManagers run on. (The job's own code runs in the planner
process, planner/, with a session of its own.)
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from flink_runtime.spark.session import acquire_session, release_session

if TYPE_CHECKING:
    from flink_runtime.configuration import Configuration


class JobManagerSpark:
    """Owns the JobManager's hold on the process's session. `get()` may be called from
    any thread (the in-process planner calls it from a worker)."""

    def __init__(self, config: Configuration, planning_only: bool) -> None:
        """planning_only: the JobManager is alone in its process (local[1], see above)."""
        self._config = config
        self._planning_only = planning_only
        self._lock = threading.Lock()
        self._session: Any = None

    def get(self) -> Any:
        """The session, started on first use."""
        with self._lock:
            if self._session is None:
                self._session = acquire_session(
                    self._config.to_dict(), default_cores=1, planning_only=self._planning_only
                )
            return self._session

    def release(self) -> None:
        """The JobManager stops: give its hold on the process's session back (if it took one)."""
        if self._session is not None:
            self._session = None
            release_session()
