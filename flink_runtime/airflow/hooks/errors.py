"""How the hook's errors read: the client's exceptions mapped to the provider's
AirflowException subclasses (messages kept), and a failed job's exception built from its
root exception and written to a task's log."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from flink_runtime.airflow.exceptions import (
    FlinkRuntimeApiError,
    FlinkRuntimeClusterUnreachable,
    FlinkRuntimeException,
    FlinkRuntimeInvalidInput,
    FlinkRuntimeJobFailed,
    FlinkRuntimeJobNotFound,
    FlinkRuntimeSavepointFailed,
    FlinkRuntimeTimeout,
)
from flink_runtime.client.errors import ClusterUnreachable, JobNotFound, RestClientError, SavepointFailed

__all__ = ["job_failed", "log_job_failure", "translated"]


def job_failed(
    job_id: str, state: str, reason: str | None, root: str | None, log_lines: list[str]
) -> FlinkRuntimeJobFailed:
    message = reason or f"Flink Runtime job {job_id} ended {state}"
    if root:
        message = f"{message}: {first_paragraph(root)}"
    return FlinkRuntimeJobFailed(job_id, state, message, root, log_lines)


def log_job_failure(log: logging.Logger | logging.LoggerAdapter, failure: FlinkRuntimeJobFailed) -> None:
    """What a task's log shows of a failed job, on a worker (the operators and the sensor)
    or in the triggerer (a trigger that ends the task itself): the root exception in
    full, then the failing subtask's last log lines. The exception's message keeps only
    the root exception's first paragraph, which is what Airflow shows elsewhere."""
    if failure.root_exception:
        log.error("Root exception of job %s (%s):\n%s", failure.job_id, failure.state, failure.root_exception)
    if failure.log_lines:
        log.error("The failing subtask's last log lines:\n%s", "\n".join(failure.log_lines))


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """The client's exceptions -> the provider's AirflowException subclasses, messages kept."""
    try:
        yield
    except FlinkRuntimeException:
        raise
    except JobNotFound as exc:
        raise FlinkRuntimeJobNotFound(exc.status_code, exc.errors, exc.method, exc.path) from exc
    except RestClientError as exc:
        raise FlinkRuntimeApiError(exc.status_code, exc.errors, exc.method, exc.path) from exc
    except ClusterUnreachable as exc:
        raise FlinkRuntimeClusterUnreachable(str(exc)) from exc
    except SavepointFailed as exc:
        raise FlinkRuntimeSavepointFailed(str(exc)) from exc
    except TimeoutError as exc:
        raise FlinkRuntimeTimeout(str(exc)) from exc
    except ValueError as exc:
        raise FlinkRuntimeInvalidInput(str(exc)) from exc


def first_paragraph(text: str, max_lines: int = 5) -> str:
    """The root exception's "Class: message" part, before its traceback."""
    lines: list[str] = []
    for line in text.strip().splitlines():
        if not line.strip():
            break
        lines.append(line.rstrip())
    return "\n".join(lines[:max_lines])
