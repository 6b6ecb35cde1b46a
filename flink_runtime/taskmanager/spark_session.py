"""The TaskManager's SparkSession: started by the first task that needs it, shared by all.

On a Spark cluster the executors must see io.tmp.dirs (shared_data_folder.py): that is
checked once, when the check comes to a verdict (a cluster without free cores gives
none), and every task fails with the reason rather than lose its partitions.
"""

from __future__ import annotations

import threading
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.spark.session import acquire_session, release_session
from flink_runtime.taskmanager.shared_data_folder import DataFolderNotShared, check_data_folder_shared


class TaskManagerSpark:
    """Owns the process's session (as this TaskManager holds it) and the data-folder verdict.
    `get()` may be called from any thread (tasks call it from theirs)."""

    def __init__(self, config: Configuration, slots: int, data_dir: str) -> None:
        self._config = config
        self._slots = slots
        self._data_dir = data_dir
        self._lock = threading.Lock()
        self._session: Any = None
        self._data_folder_checked = False
        self._data_folder_error: DataFolderNotShared | None = None

    @property
    def session(self) -> Any:
        """The session if one was started (None otherwise); never starts one."""
        return self._session

    def get(self) -> Any:
        with self._lock:
            if self._session is None:
                self._session = acquire_session(
                    self._config.to_dict(),
                    default_cores=self._slots,
                    resource_wait_timeout=self._config.get_seconds(cfg.SPARK_RESOURCE_WAIT_TIMEOUT),
                )
            if not self._data_folder_checked:
                remote = self._config.to_dict().get("spark.remote")
                try:
                    check_data_folder_shared(self._session, self._data_dir, remote)
                except DataFolderNotShared as error:
                    self._data_folder_error = error
                self._data_folder_checked = True
            if self._data_folder_error is not None:
                raise DataFolderNotShared(str(self._data_folder_error))
            return self._session

    def release(self) -> None:
        """This TaskManager stops: give its hold on the process's session back. Not under
        the lock: a task may hold it while a session waits for cluster resources, and the
        mailbox that stops the TaskManager must not wait for that."""
        if self._session is not None:
            self._session = None
            release_session()
