"""Task deployment: the descriptor the JobManager sends to deploy one execution, and the
environment a TaskManager builds from it (Flink's runtime/deployment)."""

from flink_runtime.deployment.descriptors import partition_writers, task_deployment_descriptor, task_environment

__all__ = ["partition_writers", "task_deployment_descriptor", "task_environment"]
