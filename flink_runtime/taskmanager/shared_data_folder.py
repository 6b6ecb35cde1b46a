"""Does the Spark cluster see this TaskManager's data folder?

With a local master (`local[N]`) Spark runs inside the TaskManager and sees what it
sees. On a Spark cluster (`spark://`, `k8s://`, `yarn`) the executors read and write
the task's files on their own hosts, and with Spark Connect (`sc://`) the server does:
a local path (`io.tmp.dirs`, the default) must then name a folder they share with the
TaskManager (NFS, a volume mounted everywhere), or be a Hadoop URI (hdfs://, s3a://).
Otherwise a task's partitions land on another host's disk and the TaskManager's commit
finds nothing, or a consumer reads an empty folder: an error far from its cause.

So a TaskManager on a cluster checks once, before its first task runs Spark work: it
writes a probe file with a random token into the folder and asks Spark to read it back.
The token comes back only if the cluster sees the same folder.
"""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any

from flink_runtime.io.filesystem import is_local
from flink_runtime.security import mask_url_password
from flink_runtime.spark.session import SparkResourcesUnavailable, TaskScope, is_connect

log = logging.getLogger(__name__)


class DataFolderNotShared(RuntimeError):
    """The Spark cluster does not see the TaskManager's data folder."""


def runs_elsewhere(spark: Any, remote: str | None) -> str | None:
    """Where the session's data work runs when that is not this process: the master or
    the Connect URL (`remote`, as configured: `spark.remote`); None for a local master
    or an in-process Connect server (`local[N]`)."""
    if is_connect(spark):
        remote = remote or "a Spark Connect server"
        return None if remote.startswith("local") else mask_url_password(remote)
    master = spark.sparkContext.master
    return None if master.startswith("local") else mask_url_password(master)


def check_data_folder_shared(spark: Any, folder: str, remote: str | None = None) -> None:
    """Raise DataFolderNotShared unless the Spark cluster behind `spark` reads what this
    process writes into `folder` (a local path); a no-op for local Spark and Hadoop URIs.
    remote: the configured `spark.remote`, if any."""
    where = runs_elsewhere(spark, remote)
    if where is None or not is_local(folder):
        return
    token = secrets.token_hex(16)
    # Not a hidden name: Spark skips files whose names start with "." or "_".
    probe = os.path.join(os.path.abspath(folder), f"flink-runtime-probe-{token}.txt")
    os.makedirs(os.path.dirname(probe), exist_ok=True)
    with open(probe, "w") as file:
        file.write(token + "\n")
    try:
        # collect() makes an executor (or the Connect server) open the file itself. In a
        # TaskScope, like a task's own Spark work: on a cluster without free cores it
        # fails after taskmanager.spark.resource-wait-timeout instead of waiting for ever.
        with TaskScope(spark, tag=f"flink-runtime-probe-{token[:8]}", pool=None):
            rows = spark.read.text(probe).collect()
        seen = [row[0] for row in rows]
    except SparkResourcesUnavailable:
        raise  # no verdict: the caller checks again with its next task
    except Exception as error:  # Spark's AnalysisException / Py4JJavaError: the path is missing there
        seen = [f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"]
    finally:
        os.remove(probe)
    if seen != [token]:
        raise DataFolderNotShared(
            f"The Spark cluster at {where} does not see this TaskManager's data folder {folder} "
            f"(io.tmp.dirs): a probe file written there read back as {seen[:1]!r}. On a Spark cluster "
            "or Spark Connect server the executors write and read the task's files on their own hosts, so "
            "io.tmp.dirs must be a folder mounted at the same path on every TaskManager and Spark host "
            "(NFS, a shared volume) or a Hadoop URI such as hdfs://... or s3a://...; "
            "or run Spark locally (spark.master: local[N])."
        )
    log.info("The Spark cluster at %s sees the data folder %s", where, folder)
