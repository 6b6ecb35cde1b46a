"""Clients of a running cluster: `JobClient` (REST, blocking), its twin `AsyncJobClient`
(REST, asyncio) and the `flink-runtime` CLI."""

from flink_runtime.client.async_job_client import AsyncJobClient
from flink_runtime.client.job_client import (
    ClusterUnreachable,
    EventPage,
    JobClient,
    JobClientError,
    JobNotFound,
    JobStatusEvent,
    RestClientError,
    SavepointFailed,
    normalize_rest_url,
)

__all__ = [
    "AsyncJobClient",
    "ClusterUnreachable",
    "EventPage",
    "JobClient",
    "JobClientError",
    "JobNotFound",
    "JobStatusEvent",
    "RestClientError",
    "SavepointFailed",
    "normalize_rest_url",
]
