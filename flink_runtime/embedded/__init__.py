"""The embedded cluster: a detached MiniCluster process that outlives whoever started it.

A caller that needs a cluster but has none (an Airflow task whose connection says
``embedded``) gets one that outlives it: under a real executor a task's threads and
children die with the task, and the sensor that waits on the job runs in another task,
maybe another process. So the cluster is a process of its own (foreground.py, in a new
session, no parent to die with), found again through a small JSON state file::

    <state_dir>/minicluster.json   {"pid", "rest_url", "port", "started_at", "create_time", ...}
    <state_dir>/minicluster.log    the cluster's stdout and stderr, appended across starts
    <state_dir>/log/               its log files (env.log.dir): the tasks' tagged lines
    <state_dir>/jobstore.db        its job store (jobstore.url): the history outlives restarts
    <state_dir>/minicluster.lock   held while a caller checks, starts or stops the cluster

Its REST port is fixed (default 18081, ports.py says why), so a restarted cluster
answers at the same URL and links to its jobs (served from the job store) keep
working. It stops itself after ``minicluster.idle-timeout`` (default here 1 h) with
no job running and no REST request, removing its state file under the lock first.
A failure of its JobManager or a TaskManager that they cannot handle ends the process
(exit status 70, the reason at the end of its log: rpc/supervision.py); the next caller
finds the pid gone, says why in its own log, and starts a fresh cluster.
``flink-runtime embedded status|stop`` (client/cli_embedded.py) look at it and stop it.

The state directory defaults to ``$AIRFLOW_HOME/flink-runtime`` (else
``<tmp>/flink-runtime-airflow``). The first caller picks the size and port; later
callers reuse whatever runs there. Nothing here imports Airflow.
"""

from flink_runtime.embedded.launcher import (
    DEFAULT_IDLE_TIMEOUT,
    EmbeddedClusterError,
    EmbeddedStatus,
    StopResult,
    ensure_embedded_cluster,
    status,
    stop,
    stop_embedded_cluster,
)
from flink_runtime.embedded.ports import DEFAULT_PORT
from flink_runtime.embedded.state import LOCK_FILE, LOG_FILE, STATE_FILE, default_state_dir

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_PORT",
    "LOCK_FILE",
    "LOG_FILE",
    "STATE_FILE",
    "EmbeddedClusterError",
    "EmbeddedStatus",
    "StopResult",
    "default_state_dir",
    "ensure_embedded_cluster",
    "status",
    "stop",
    "stop_embedded_cluster",
]
