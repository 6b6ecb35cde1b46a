"""The SparkSession a TaskManager's tasks share.

One session per process, created on first use and kept warm across tasks: starting
a JVM costs 7-16 s, running a query on a warm one costs milliseconds. TaskManagers
in one MiniCluster process share it, as Flink's MiniCluster shares one JVM.

What it connects to comes from the configuration:

- `spark.remote` = `sc://host:port`: a Spark Connect server (the data work then
  scales past this host; nothing but a gRPC client runs here);
- otherwise a classic session on `spark.master` (default `local[N]`, N = the slots
  of the TaskManagers in this process);
- every other `spark.*` key is passed to the builder as is.

Each slot gets its own FAIR scheduler pool, so two tasks in two slots share the
executors fairly instead of queueing behind each other.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Defaults a runtime wants and a user may override with the same keys.
_DEFAULTS: dict[str, str] = {
    "spark.app.name": "flink-runtime",
    "spark.scheduler.mode": "FAIR",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # A task's shuffle is small (one split, or one subpartition); 200 partitions would
    # cost far more in scheduling than they save.
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    # The JobManager has listed the input files already; without this, Spark starts a
    # listing job (one task per file) for every split of more than 32 files.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC",
}

_lock = threading.Lock()
_session: SparkSession | None = None
_users = 0


def spark_properties(config: Mapping[str, Any]) -> dict[str, str]:
    """The `spark.*` keys of a flat configuration, over the runtime's defaults."""
    properties = dict(_DEFAULTS)
    properties.update({key: str(value) for key, value in config.items() if key.startswith("spark.")})
    properties.setdefault("spark.sql.warehouse.dir", os.path.join(tempfile.gettempdir(), "flink-runtime-warehouse"))
    return properties


def acquire_session(config: Mapping[str, Any], default_cores: int) -> SparkSession:
    """The process's SparkSession, created on first call; pair with release_session()."""
    global _session, _users
    with _lock:
        if _session is None:
            _session = _create(spark_properties(config), default_cores)
        _users += 1
        return _session


def release_session() -> None:
    """Stop the session when its last user (TaskManager) is gone."""
    global _session, _users
    with _lock:
        _users = max(0, _users - 1)
        if _users == 0 and _session is not None:
            session, _session = _session, None
            try:
                session.stop()
            except Exception:  # a dying JVM must not fail a clean shutdown
                log.warning("stopping the SparkSession failed", exc_info=True)


def current_session() -> SparkSession | None:
    return _session


def is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _create(properties: dict[str, str], default_cores: int) -> SparkSession:
    # py4j logs from finalizers at interpreter exit; at INFO that can block on the logging
    # lock while threads are torn down (a process seen hanging for minutes at exit).
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # Workers must run this interpreter (the venv's), and the host name may not resolve.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    remote = properties.pop("spark.remote", None)
    builder = SparkSession.builder
    if remote:
        builder = builder.remote(remote)
        # A remote server owns its settings; an in-process one ("local[N]") takes ours.
        for key, value in properties.items() if remote.startswith("local") else []:
            builder = builder.config(key, value)
        log.info("Connecting to Spark Connect at %s", remote)
    else:
        properties.setdefault("spark.master", f"local[{max(1, default_cores)}]")
        properties.setdefault("spark.scheduler.allocation.file", _slot_pools_file(max(default_cores, 16)))
        for key, value in properties.items():
            builder = builder.config(key, value)
        log.info("Starting SparkSession on %s", properties["spark.master"])
    return builder.getOrCreate()


def _slot_pools_file(slots: int) -> str:
    """A fair-scheduler file declaring one pool per slot (slot-0, slot-1, ...): equal
    weight, FIFO inside, so each slot's task gets a fair share of the executors."""
    pools = "".join(
        f'  <pool name="slot-{index}"><schedulingMode>FIFO</schedulingMode><weight>1</weight>'
        f"<minShare>0</minShare></pool>\n"
        for index in range(slots)
    )
    path = os.path.join(tempfile.gettempdir(), f"flink-runtime-fairscheduler-{slots}.xml")
    # Written aside and renamed: another process may be reading the same file.
    staging = f"{path}.{os.getpid()}.tmp"
    with open(staging, "w") as file:
        file.write(f'<?xml version="1.0"?>\n<allocations>\n{pools}</allocations>\n')
    os.replace(staging, path)
    return path


class TaskScope:
    """Marks the Spark work of one task: its scheduler pool and a tag to cancel it by."""

    def __init__(self, spark: SparkSession, tag: str, pool: str | None) -> None:
        self.spark = spark
        self.tag = tag
        self.pool = pool

    def __enter__(self) -> TaskScope:
        self.spark.addTag(self.tag)
        if self.pool is not None and not is_connect(self.spark):
            self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", self.pool)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        try:
            self.spark.removeTag(self.tag)
        except Exception:
            log.debug("removeTag failed", exc_info=True)

    def cancel(self) -> None:
        """Called from another thread: interrupt the task's running Spark jobs."""
        try:
            self.spark.interruptTag(self.tag)
        except Exception:
            log.debug("interruptTag failed", exc_info=True)
