"""What the provider's operators share: the connection, the hook, the job link, and how
a job that ended badly fails the task (root exception and log lines first)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseOperator

from flink_runtime.airflow.hooks.errors import log_job_failure
from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook
from flink_runtime.airflow.links import FlinkRuntimeJobLink

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["FlinkRuntimeBaseOperator", "raise_job_failure"]


def raise_job_failure(
    task: BaseOperator, hook: FlinkRuntimeHook, job_id: str, state: str, reason: str | None = None
) -> NoReturn:
    """Fail the task for a job that ended ``state``: root exception to the task log, then raise."""
    failure = hook.job_failure(job_id, state, reason)
    log_job_failure(task.log, failure)
    raise failure


class FlinkRuntimeBaseOperator(BaseOperator):
    """What every operator here shares: the connection, the hook, the job link."""

    operator_extra_links = (FlinkRuntimeJobLink(),)
    ui_color = "#e3eef9"

    def __init__(self, *, flink_runtime_conn_id: str = FlinkRuntimeHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flink_runtime_conn_id = flink_runtime_conn_id

    @cached_property
    def hook(self) -> FlinkRuntimeHook:
        return FlinkRuntimeHook(self.flink_runtime_conn_id)

    def _publish_link(self, context: Context, job_id: str) -> None:
        FlinkRuntimeJobLink.persist(context, self.hook.job_url(job_id), job_id, self.flink_runtime_conn_id)
