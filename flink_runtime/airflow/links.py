"""The "Flink Runtime Job" button on a task instance: the job's page on the cluster's dashboard.

The button opens ``<Airflow>/flink-runtime/jobs/<job id>?conn_id=<connection>``, a route
of the provider's Airflow plugin (plugins/flink_runtime_plugin.py, plugin_views.py) that
redirects to the dashboard's job page, ``<REST URL>/#/jobs/<job id>``. Through the
plugin, the link works when Airflow's workers reach the cluster at an address the
browser cannot use as it is, and behind a REST token: the redirect adds the token in
the URL fragment (``#token=...``, never sent to a server) at click time, for users
allowed to read the connection. Airflow stores only the job id and connection id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink, conf
from airflow.sdk.execution_time.xcom import XCom

if TYPE_CHECKING:
    from airflow.models.taskinstancekey import TaskInstanceKey
    from airflow.sdk import BaseOperator, Context

__all__ = ["JOB_ID_XCOM_KEY", "JOB_LINK_XCOM_KEY", "JOB_URL_XCOM_KEY", "PLUGIN_URL_PREFIX", "FlinkRuntimeJobLink"]

JOB_ID_XCOM_KEY = "job_id"
#: The job's dashboard page as the worker reaches the cluster (no token).
JOB_URL_XCOM_KEY = "job_url"
#: What the button opens: the plugin's redirect to that page.
JOB_LINK_XCOM_KEY = "job_link"
#: Where plugins/flink_runtime_plugin.py mounts plugin_views on Airflow's API server.
PLUGIN_URL_PREFIX = "/flink-runtime"


def job_link(conn_id: str, job_id: str) -> str:
    """The plugin's redirect to the job's dashboard page: under ``[api] base_url`` when
    Airflow knows its own address, else root-relative (the UI's own origin)."""
    base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    return f"{base}{PLUGIN_URL_PREFIX}/jobs/{quote(job_id, safe='')}?conn_id={quote(conn_id, safe='')}"


class FlinkRuntimeJobLink(BaseOperatorLink):
    """Opens the dashboard page of the job the task submitted or acted on (see the module)."""

    name = "Flink Runtime Job"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return XCom.get_value(ti_key=ti_key, key=JOB_LINK_XCOM_KEY) or ""

    @classmethod
    def persist(
        cls, context: Context | dict[str, Any], job_url: str, job_id: str | None = None, conn_id: str | None = None
    ) -> None:
        """Push the job's URL and the button's link, right after submit.

        Airflow 3 shows a link from the XCom under ``xcom_key``, which the worker
        writes only when the task ends; written now, the button works while the job
        runs, and while the task is deferred. ``job_id`` defaults to the URL's last
        segment (``hook.job_url`` ends with it), ``conn_id`` to the task's connection.
        """
        ti = context["ti"]
        job_id = job_id or job_url.rstrip("/").rsplit("/", 1)[-1]
        task = context.get("task") or getattr(ti, "task", None)
        conn_id = conn_id or getattr(task, "flink_runtime_conn_id", None)
        link = job_link(conn_id, job_id) if conn_id else job_url
        ti.xcom_push(key=JOB_URL_XCOM_KEY, value=job_url)
        ti.xcom_push(key=JOB_LINK_XCOM_KEY, value=link)
        ti.xcom_push(key=cls().xcom_key, value=link)
