"""The SparkSession a TaskManager's tasks share.

One session per process, created on first use and kept warm across tasks: starting
a JVM costs 7-16 s, running a query on a warm one costs milliseconds. TaskManagers
in one MiniCluster process share it, as Flink's MiniCluster shares one JVM.

What it connects to comes from the configuration:

- `spark.remote` = `sc://host:port`: a Spark Connect server (the data work then
  scales past this host; nothing but a gRPC client runs here);
- otherwise a classic session on `spark.master` (default `local[N]`, N = the slots
  of the TaskManagers in this process). On a standalone cluster (`spark://`) each
  TaskManager's application asks for its slots' worth of cores (`spark.cores.max`),
  or the first one would take every core and the others would wait for ever; the
  JobManager's plan checks run on `local[1]` and take no cluster cores at all;
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
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flink_runtime.security import mask_url_password
from flink_runtime.spark.jdbc_driver import driver_jars
from flink_runtime.spark.local_filesystem import use_nio_local_filesystem

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
}

# The driver JVM's collector when spark.driver.extraJavaOptions is unset (benchmarks/README.md,
# "GC of the driver JVM"): the parallel (throughput) collector once two or more task threads
# share the heap: SerialGC stops them all for one collecting thread (at 1 GB its pauses
# added up to twice G1's), and G1's barriers and concurrent work cost the batch work
# itself (a warm 1 GB word count 16.5 s on G1, 13.4 s on ParallelGC; 200 MB 4.0-4.3 s
# against 3.7 s). SerialGC on one core (the planner's local[1]: smaller, quicker to start,
# nothing to run beside it).
PARALLEL_GC = "-XX:+UseParallelGC"
SINGLE_CORE_GC = "-XX:+UseSerialGC"

_lock = threading.Lock()
_session: SparkSession | None = None
_users = 0
# Seconds a task waits while its application has no executor (0: for ever).
_resource_wait_timeout = 0.0


class SparkResourcesUnavailable(RuntimeError):
    """The task's Spark application got no executor in time: the cluster is full."""


def spark_properties(config: Mapping[str, Any]) -> dict[str, str]:
    """The `spark.*` keys of a flat configuration, over the runtime's defaults."""
    properties = dict(_DEFAULTS)
    properties.update({key: str(value) for key, value in config.items() if key.startswith("spark.")})
    # The JDBC sources and sinks' driver (spark/jdbc_driver.py), when installed: a session's classpath
    # is fixed when its JVM starts, and sessions outlive jobs.
    jars = [jar for jar in properties.get("spark.jars", "").split(",") if jar]
    jars += [jar for jar in driver_jars() if jar not in jars]
    if jars:
        properties["spark.jars"] = ",".join(jars)
    properties.setdefault("spark.sql.warehouse.dir", os.path.join(tempfile.gettempdir(), "flink-runtime-warehouse"))
    if "spark.master" in properties:
        _default_java_options(properties)
    return properties


def local_cores(master: str) -> int | None:
    """The task threads of a local master (local[N], local[*], local[N,F]); None otherwise."""
    if master == "local":
        return 1
    if not master.startswith("local[") or not master.endswith("]"):
        return None
    threads = master[len("local[") : -1].split(",")[0].strip()
    if threads == "*":
        return os.cpu_count() or 1
    return int(threads) if threads.isdigit() else None


def _default_java_options(properties: dict[str, str]) -> None:
    """The driver's GC when the user set no driver JVM options: ParallelGC for local[N >= 2]
    and for a driver that only drives a cluster's executors, SerialGC for local[1]."""
    cores = local_cores(properties.get("spark.master", ""))
    properties.setdefault("spark.driver.extraJavaOptions", SINGLE_CORE_GC if cores == 1 else PARALLEL_GC)


def acquire_session(
    config: Mapping[str, Any],
    default_cores: int,
    planning_only: bool = False,
    resource_wait_timeout: float = 0.0,
) -> SparkSession:
    """The process's SparkSession, created on first call; pair with release_session().

    planning_only: the session only resolves plans on empty DataFrames (the
    JobManager's), so it never needs a cluster's executors.
    resource_wait_timeout: seconds a task may run while the application has no
    executor before it fails (TaskScope); 0 waits for ever."""
    global _session, _users, _resource_wait_timeout
    with _lock:
        if resource_wait_timeout:
            _resource_wait_timeout = resource_wait_timeout
        if _session is None:
            properties = spark_properties(config)
            master = properties.get("spark.master", "")
            if planning_only and "spark.remote" not in properties and master and not master.startswith("local"):
                log.info("Plan checks run on local[1], not on %s: they need no executors", master)
                properties["spark.master"] = "local[1]"
            _session = _create(properties, default_cores)
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

    _defer_numpy_converters()
    remote = properties.pop("spark.remote", None)
    builder = SparkSession.builder
    if remote:
        builder = builder.remote(remote)
        # A remote server owns its settings; an in-process one ("local[N]") takes ours.
        for key, value in properties.items() if remote.startswith("local") else []:
            builder = builder.config(key, value)
        log.info("Connecting to Spark Connect at %s", mask_url_password(remote))
    else:
        properties.setdefault("spark.master", f"local[{max(1, default_cores)}]")
        if properties["spark.master"].startswith("spark://"):
            properties.setdefault("spark.cores.max", str(max(1, default_cores)))
        _default_java_options(properties)
        use_nio_local_filesystem(properties)
        properties.setdefault("spark.scheduler.allocation.file", _slot_pools_file(max(default_cores, 16)))
        for key, value in properties.items():
            builder = builder.config(key, value)
        log.info("Starting SparkSession on %s", mask_url_password(properties["spark.master"]))
    return builder.getOrCreate()


_NUMPY_CONVERTERS = ("NumpyArrayConverter", "NumpyScalarConverter")


class _OnlyOnceNumpyIsLoaded:
    """A numpy converter asked only when numpy is imported: no argument can be a numpy
    value before, and asking imports pandas, pyarrow and numpy (through
    `pyspark.testing.utils`), ~100 MB a process that never uses them (the planner)."""

    def __init__(self, converter: Any) -> None:
        self.converter = converter

    def can_convert(self, obj: Any) -> bool:
        return "numpy" in sys.modules and self.converter.can_convert(obj)

    def convert(self, obj: Any, gateway_client: Any) -> Any:
        return self.converter.convert(obj, gateway_client)


def _defer_numpy_converters() -> None:
    """Wrap PySpark's numpy input converters (registered when pyspark.sql.types is
    imported) so that py4j calls do not import numpy; idempotent."""
    import pyspark.sql.types  # noqa: F401  (registers the converters)
    from py4j import protocol

    protocol.INPUT_CONVERTER[:] = [
        _OnlyOnceNumpyIsLoaded(converter) if type(converter).__name__ in _NUMPY_CONVERTERS else converter
        for converter in protocol.INPUT_CONVERTER
    ]


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


def executor_count(spark: SparkSession) -> int | None:
    """Executors the application has now, the driver not counted; None when there is no
    cluster to wait for (a local master, where the driver runs the tasks, or Spark
    Connect, whose server owns its executors)."""
    if is_connect(spark):
        return None
    context = spark.sparkContext
    if context.master.startswith("local"):
        return None
    # One entry per block manager: the executors and the driver.
    return max(0, context._jsc.sc().getExecutorMemoryStatus().size() - 1)


class TaskScope:
    """Marks the Spark work of one task: its scheduler pool and a tag to cancel it by.

    On a Spark cluster it also watches that the application has executors: Spark waits
    for ever (logging `Initial job has not accepted any resources`) when the cluster
    has no free cores or memory for it; after `taskmanager.spark.resource-wait-timeout`
    without one, the task's Spark jobs are cancelled and it fails with that reason."""

    def __init__(self, spark: SparkSession, tag: str, pool: str | None) -> None:
        self.spark = spark
        self.tag = tag
        self.pool = pool
        self.starved: str | None = None
        self._done = threading.Event()

    def __enter__(self) -> TaskScope:
        # Classic sessions tag jobs on the SparkContext: SparkSession.interruptTag finds no
        # job there (it answers [] and the job runs on), cancelJobsWithTag cancels it.
        # Tags and the pool are the thread's, and task threads are pooled
        # (taskmanager/task_threads.py): nothing of an earlier task's may carry over, so the
        # tags are cleared first and the pool always set (None removes it).
        if is_connect(self.spark):
            self.spark.clearTags()
            self.spark.addTag(self.tag)
        else:
            self.spark.sparkContext.clearJobTags()
            self.spark.sparkContext.addJobTag(self.tag)
            self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", self.pool)
        if _resource_wait_timeout > 0 and executor_count(self.spark) is not None:
            threading.Thread(
                target=self._watch, args=(_resource_wait_timeout,), name=f"watch-{self.tag}", daemon=True
            ).start()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, traceback: Any) -> None:
        self._done.set()
        try:
            if is_connect(self.spark):
                self.spark.removeTag(self.tag)
            else:
                self.spark.sparkContext.removeJobTag(self.tag)
        except Exception:
            log.debug("removing the job tag failed", exc_info=True)
        if self.starved is not None and exc is not None:
            raise SparkResourcesUnavailable(self.starved) from exc

    def _watch(self, timeout: float) -> None:
        """Cancel the task's Spark jobs once the application has had jobs waiting and no
        executor for `timeout` seconds in a row (an idle application may have none)."""
        without_since = time.monotonic()
        while not self._done.wait(0.5):
            try:
                executors = executor_count(self.spark)
                waiting = bool(self.spark.sparkContext.statusTracker().getActiveJobsIds())
            except Exception:  # a stopping session: the task ends anyway
                return
            if executors or not waiting:
                without_since = time.monotonic()
            elif time.monotonic() - without_since >= timeout:
                conf = self.spark.sparkContext.getConf()
                self.starved = (
                    f"The Spark application of this TaskManager has had no executor for {timeout:.0f} s "
                    f"on {self.spark.sparkContext.master}: the Spark cluster has no free cores or memory "
                    f"for it (spark.cores.max={conf.get('spark.cores.max', 'unset')}, "
                    f"spark.executor.memory={conf.get('spark.executor.memory', '1g')}). Free resources "
                    "on the cluster or ask for less; taskmanager.spark.resource-wait-timeout sets this limit."
                )
                log.error("%s Cancelling task %s.", self.starved, self.tag)
                self.cancel()
                return

    def cancel(self) -> None:
        """Called from another thread: interrupt the task's running Spark jobs."""
        try:
            if is_connect(self.spark):
                self.spark.interruptTag(self.tag)
            else:
                self.spark.sparkContext.cancelJobsWithTag(self.tag)
        except Exception:
            log.debug("cancelling the task's Spark jobs failed", exc_info=True)
