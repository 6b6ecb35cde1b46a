"""Clients of a running cluster: `JobClient` (REST, synchronous) and the `flink-runtime` CLI."""

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
