"""The TaskManager's SparkSession: started by the first task that needs it, shared by all.

On a Spark cluster the executors must see io.tmp.dirs (shared_data_folder.py): that is
checked once, when the check comes to a verdict (a cluster without free cores gives
none), and every task fails with the reason rather than lose its partitions.

The TaskManager's resources size its Spark application where Spark can
(``session_settings``): ``taskmanager.cpu.cores`` is the number of cores it runs tasks
on (``local[N]``, or ``spark.cores.max`` on a standalone cluster) and
``taskmanager.memory.task.heap.size`` the heap they share (the driver's in local mode,
the executors' ``spark.executor.memory`` on a cluster), unless the spark.* key is set.
Within the application each slot has its own FAIR scheduler pool; Spark fixes a pool's
weight when the session starts, so a slot's cores decide how many tasks run at once
(the JobManager never carves more than the TaskManager has), not a weighted share.
"""

from __future__ import annotations

import glob
import logging
import math
import os
import shutil
import tempfile
import threading
import time
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.io.partitions import write_chunk_manifest
from flink_runtime.spark.session import acquire_session, is_connect, release_session
from flink_runtime.taskmanager.shared_data_folder import DataFolderNotShared, check_data_folder_shared

log = logging.getLogger(__name__)


def session_settings(config: Configuration, slots: int) -> tuple[dict[str, Any], int]:
    """The flat configuration the session starts from, with the TaskManager's resources
    filled in where the spark.* keys leave them open, and the cores it runs tasks on."""
    settings = config.to_dict()
    cores = config.get(cfg.TASKMANAGER_CPU_CORES)
    default_cores = max(1, math.ceil(cores)) if cores else slots
    heap = config.get(cfg.TASKMANAGER_TASK_HEAP)
    on_cluster = str(settings.get("spark.master", "")).startswith("spark://")
    if heap and not settings.get("spark.remote"):  # a Spark Connect server owns its memory
        key = "spark.executor.memory" if on_cluster else "spark.driver.memory"
        settings.setdefault(key, f"{max(1, heap // 2**20)}m")
    elif not settings.get("spark.remote") and not on_cluster:
        # In local mode the task threads share the driver's heap: Spark's 1g is one slot's
        # share at 2 slots, a quarter of one at 8 (GC thrash, spills).
        settings.setdefault("spark.driver.memory", f"{default_heap_mb(default_cores)}m")
    return settings, default_cores


def default_heap_mb(cores: int) -> int:
    """The local driver's heap when nothing sets it: 512 MB a core, at least Spark's 1 GB
    and at most a quarter of the machine's memory."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError):  # not a POSIX sysconf: no cap to compute
        physical = 0
    wanted = max(1024, 512 * cores)
    return max(1024, min(wanted, physical // 4)) if physical else wanted


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
        self._released = False
        # Set once warm_up() ended (warm, or failed: the first task then starts Spark itself).
        self.warmed = threading.Event()

    @property
    def session(self) -> Any:
        """The session if one was started (None otherwise); never starts one."""
        return self._session

    def get(self) -> Any:
        return self._get(warming=False)

    def _get(self, warming: bool) -> Any:
        """warming: for warm_up(), which must not start (or keep) a session for a
        TaskManager that stopped meanwhile."""
        with self._lock:
            if warming and self._released:
                raise RuntimeError("the TaskManager stopped before Spark's warm-up")
            if self._session is None:
                settings, cores = session_settings(self._config, self._slots)
                session = acquire_session(
                    settings,
                    default_cores=cores,
                    resource_wait_timeout=self._config.get_seconds(cfg.SPARK_RESOURCE_WAIT_TIMEOUT),
                )
                if warming and self._released:  # stopped while the warm-up started it: give it back
                    release_session()
                    raise RuntimeError("the TaskManager stopped while its SparkSession started")
                self._session = session
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

    def warm_up(self) -> None:
        """Start the session and run a tiny job on it through the Spark calls a first task
        makes (_exercise_file_paths: code generation, the scheduler, the file sources and
        writers), so the first task finds Spark ready: a bare shuffle query left a 1 MB word
        count 13 s for its first run against 3.6 s warm; a text -> Parquet word count 3.5 s,
        these calls 2.8-3.1 s. On a cluster master only the session starts: a query would
        hold cluster cores (or wait for them)."""
        started = time.monotonic()
        try:
            session = self._get(warming=True)
            master = "" if is_connect(session) else session.sparkContext.master
            if master.startswith("local"):
                _exercise_file_paths(session, self._data_dir)
            log.info(
                "SparkSession warm (%s) %.1f s after the TaskManager started",
                master or "connect",
                time.monotonic() - started,
            )
        except Exception as error:  # noqa: BLE001 - the first task starts Spark itself (and reports why not)
            if not self._released:
                log.warning("warming up Spark failed (the first task starts it instead): %s", error)
        finally:
            self.warmed.set()

    def release(self) -> None:
        """This TaskManager stops: give its hold on the process's session back. Not under
        the lock: a task may hold it while a session waits for cluster resources, and the
        mailbox that stops the TaskManager must not wait for that."""
        self._released = True
        if self._session is not None:
            self._session = None
            release_session()


def _exercise_file_paths(session: Any, data_dir: str) -> None:
    """A tiny word count through the Spark calls a Pipeline API job's tasks make, in a
    scratch folder of `data_dir`: the source's (text read, a combining aggregate in a
    session with adaptive execution off over a small split's one partition, the
    exchange's Parquet write split into subpartition folders, its rows read from the
    footers) and the final aggregate's (Parquet read with a schema, its partials merged
    in one partition, the sink's Parquet write). Each plan shape Spark meets the first
    time costs code generation and class loading, and pyarrow's first import 0.2 s; the
    same shapes here leave that to the warm-up (operators/spark/task.py, io.py). A split
    over 4 MiB meets the partial aggregate's shuffle cold."""
    from pyspark.sql import functions as F  # noqa: N812

    scratch = tempfile.mkdtemp(prefix="spark-warm-up-", dir=data_dir if os.path.isdir(data_dir) else None)
    try:
        text, exchange, sink = (os.path.join(scratch, name) for name in ("text", "exchange", "sink"))
        lines = session.range(16).selectExpr("concat('w', CAST(id % 4 AS STRING), ' w1') AS value")
        lines.coalesce(1).write.mode("overwrite").text(text)
        one_job = session.newSession()
        one_job.conf.set("spark.sql.adaptive.enabled", "false")
        one_job.conf.set("spark.sql.shuffle.partitions", str(max(1, session.sparkContext.defaultParallelism)))
        # In one partition, as a small split's partial aggregate reads (task.py small_split_in_one_partition).
        lines = one_job.read.text(text).coalesce(1)
        words = lines.selectExpr("explode(split(value, ' ')) AS word").filter("word != ''")
        partials = words.groupBy("word").agg(F.count(F.lit(1)).alias("n"))
        subpartition = F.pmod(F.hash(F.col("word")), F.lit(2))
        partials.withColumn("_sub", subpartition).write.mode("append").partitionBy("_sub").parquet(exchange)
        write_chunk_manifest(exchange)  # the footers' rows, as a task records them (imports pyarrow)
        files = glob.glob(os.path.join(exchange, "_sub=*", "*.parquet"))
        merged = one_job.read.schema(partials.schema).parquet(*files).coalesce(1)
        counts = merged.groupBy("word").agg(F.sum("n").alias("n"))
        counts.write.mode("append").parquet(sink)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
