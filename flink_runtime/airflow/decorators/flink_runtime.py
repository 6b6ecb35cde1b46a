"""``@task.flink_runtime``: a function that builds a Pipeline or JobGraph, submitted and
awaited like SubmitJobOperator, as ``@task.pyspark`` is for plain Spark.

    @task.flink_runtime(flink_runtime_conn_id="flink_runtime_default", deferrable=True)
    def word_count(day: str, ds=None) -> Pipeline:
        pipeline = Pipeline(f"word count {day}", parallelism=2)
        ...
        return pipeline

The function runs on the worker when the task runs (its arguments rendered as a
TaskFlow task's, context keys such as ``ds`` or ``ti`` passed by name); what it returns
is submitted with every option of SubmitJobOperator (``deferrable``, ``timeout``,
``from_savepoint``, ``wait_for_completion``, ...), and a retry re-attaches to its
running job instead of calling the function and submitting again (it calls the
function only to learn the job's outputs). The task's XCom is SubmitJobOperator's:
``{"job_id", "state", "job_url", "outputs": [...]}``, and so are its lineage
(OpenLineage inputs and outputs) and asset events (``outlets=[AssetAlias(...)]``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory

from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator

__all__ = ["flink_runtime_task"]


class _FlinkRuntimeDecoratedOperator(DecoratedOperator, SubmitJobOperator):
    custom_operator_name = "@task.flink_runtime"
    # The function's arguments are rendered; the job graph is whatever it returns.
    template_fields: Sequence[str] = (*DecoratedOperator.template_fields, "from_savepoint")
    template_fields_renderers = DecoratedOperator.template_fields_renderers

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # No job_graph of its own: build_job_graph calls the function. Not a bound method
        # handed to SubmitJobOperator either: Airflow renders the arguments on a copy of
        # the task (prepare_for_execution), and a method bound here would see this
        # object's unrendered XComArgs and "{{ ds }}" strings.
        super().__init__(
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs=op_kwargs,
            kwargs_to_upstream={"job_graph": None},
            **kwargs,
        )

    @property
    def builds_graph_at_runtime(self) -> bool:
        return True

    def build_job_graph(self, context: Any) -> Any:
        """The decorated function's result, called with this task's rendered arguments
        (upstream XComs resolved, templates rendered) and the context keys it names."""
        kwargs = self.determine_kwargs({**context, **self.op_kwargs})
        graph = self.python_callable(*self.op_args, **kwargs)
        if graph is None:
            raise TypeError(
                f"@task.flink_runtime function {self.python_callable.__name__} returned None: "
                "return the Pipeline or JobGraph to submit."
            )
        return graph


def flink_runtime_task(
    python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """``@task.flink_runtime``: submit what the decorated function returns (see the module)."""
    return task_decorator_factory(
        python_callable=python_callable,
        # Not inferred from the function's return annotation: that is the job graph (a
        # dict graph would split the XCom), while the XCom is the job's result.
        multiple_outputs=bool(multiple_outputs),
        decorated_operator_class=_FlinkRuntimeDecoratedOperator,
        **kwargs,
    )
