"""How the hook's errors read: the JobClient's exceptions mapped to the provider's
AirflowException subclasses (messages kept), and a failed job's exception built from its
root exception."""

from __future__ import annotations

import contextlib
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

__all__ = ["job_failed", "translated"]


def job_failed(
    job_id: str, state: str, reason: str | None, root: str | None, log_lines: list[str]
) -> FlinkRuntimeJobFailed:
    message = reason or f"Flink Runtime job {job_id} ended {state}"
    if root:
        message = f"{message}: {first_paragraph(root)}"
    return FlinkRuntimeJobFailed(job_id, state, message, root, log_lines)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """JobClient's exceptions -> the provider's AirflowException subclasses, messages kept."""
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
