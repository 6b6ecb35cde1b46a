"""The "Flink Runtime Job" button on a task instance: a link to the job it submitted or acted on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

if TYPE_CHECKING:
    from airflow.models.taskinstancekey import TaskInstanceKey
    from airflow.sdk import BaseOperator, Context

__all__ = ["JOB_ID_XCOM_KEY", "JOB_URL_XCOM_KEY", "FlinkRuntimeJobLink"]

JOB_ID_XCOM_KEY = "job_id"
JOB_URL_XCOM_KEY = "job_url"


class FlinkRuntimeJobLink(BaseOperatorLink):
    """Points at ``GET /jobs/:id`` of the job whose URL the task pushed as XCom ``job_url``."""

    name = "Flink Runtime Job"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return XCom.get_value(ti_key=ti_key, key=JOB_URL_XCOM_KEY) or ""

    @classmethod
    def persist(cls, context: Context | dict[str, Any], job_url: str) -> None:
        """Push the URL under both keys, right after submit.

        Airflow 3 shows a link from the XCom under ``xcom_key``, which the worker
        writes only when the task ends; written now, the button works while the job
        runs, and while the task is deferred.
        """
        ti = context["ti"]
        ti.xcom_push(key=JOB_URL_XCOM_KEY, value=job_url)
        ti.xcom_push(key=cls().xcom_key, value=job_url)
