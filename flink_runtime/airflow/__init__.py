"""The Airflow provider of flink-runtime: hook, operators, sensor, trigger, connection type, link.

    from flink_runtime.airflow.operators.flink_runtime import SubmitJobOperator, StopJobOperator
    from flink_runtime.airflow.sensors.flink_runtime import JobStatusSensor

Airflow finds it through the ``apache_airflow_provider`` entry point, which names
``get_provider_info`` below. This module imports nothing from Airflow, so that
discovering providers stays cheap.
"""

from __future__ import annotations

from typing import Any

from flink_runtime import __version__

__all__ = ["get_provider_info"]

_INTEGRATION = "Flink Runtime"


def get_provider_info() -> dict[str, Any]:
    """The provider's metadata, as a provider.yaml would hold it."""
    return {
        # Airflow checks this against the distribution's normalised name.
        "package-name": "flink-runtime",
        "name": "Flink Runtime",
        "description": "Submit, follow, savepoint, stop and cancel jobs of a flink-runtime cluster.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/rest_api/",
                "tags": ["apache"],
            }
        ],
        "hooks": [{"integration-name": _INTEGRATION, "python-modules": ["flink_runtime.airflow.hooks.flink_runtime"]}],
        "operators": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "flink_runtime.airflow.operators.flink_runtime",
                    "flink_runtime.airflow.operators.job_control",
                ],
            }
        ],
        "sensors": [
            {"integration-name": _INTEGRATION, "python-modules": ["flink_runtime.airflow.sensors.flink_runtime"]}
        ],
        "triggers": [
            {"integration-name": _INTEGRATION, "python-modules": ["flink_runtime.airflow.triggers.flink_runtime"]}
        ],
        "task-decorators": [
            {"name": "flink_runtime", "class-name": "flink_runtime.airflow.decorators.flink_runtime.flink_runtime_task"}
        ],
        "connection-types": [
            {
                "hook-class-name": "flink_runtime.airflow.hooks.flink_runtime.FlinkRuntimeHook",
                "connection-type": "flink_runtime",
                "hook-name": "Flink Runtime",
                # Declarative form fields (Airflow >= 3.2 deprecates the hook methods
                # get_connection_form_widgets / get_ui_field_behaviour for these).
                "ui-field-behaviour": {
                    "hidden-fields": ["login"],
                    "relabeling": {"password": "Bearer token", "schema": "Scheme"},
                    "placeholders": {
                        "host": "jobmanager.example.com, or 'embedded' for a local MiniCluster",
                        "port": "8081",
                        "schema": "http or https",
                        "password": "sent as 'Authorization: Bearer <token>' (optional)",
                    },
                },
                "conn-fields": {
                    "https": {
                        "label": "HTTPS",
                        "description": "Use https:// (also chosen by the Scheme field or a URL in Host).",
                        "schema": {"type": "boolean", "default": False},
                    },
                    "verify_tls": {
                        "label": "Verify TLS certificates",
                        "schema": {"type": "boolean", "default": True},
                    },
                    "timeout": {
                        "label": "Request timeout (seconds)",
                        "description": "Per request; long polls for job events add their own wait.",
                        "schema": {"type": "number", "default": 30, "minimum": 1},
                    },
                    "embedded": {
                        "label": "Embedded MiniCluster",
                        "description": "Start (once) and use a local MiniCluster shared by all tasks; "
                        "the same as host 'embedded'.",
                        "schema": {"type": "boolean", "default": False},
                    },
                    "taskmanagers": {
                        "label": "Embedded: TaskManagers",
                        "schema": {"type": "integer", "default": 2, "minimum": 1},
                    },
                    "slots": {
                        "label": "Embedded: slots per TaskManager",
                        "schema": {"type": "integer", "default": 2, "minimum": 1},
                    },
                    "state_dir": {
                        "label": "Embedded: state directory",
                        "description": "Where the embedded cluster's state file, log, job store, checkpoints "
                        "and savepoints live (default $AIRFLOW_HOME/flink-runtime).",
                        "schema": {"type": "string"},
                    },
                    "embedded_idle_timeout": {
                        "label": "Embedded: idle timeout (seconds)",
                        "description": "The embedded cluster stops itself after this long with no job running "
                        "and no request; 0: never.",
                        "schema": {"type": "number", "default": 3600, "minimum": 0},
                    },
                    "taskmanager_rpc_port": {
                        "label": "Embedded: first TaskManager RPC port",
                        "description": "The i-th TaskManager listens on this port + i (e.g. for a firewall); "
                        "empty: free ports.",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 65535},
                    },
                },
            }
        ],
        "extra-links": ["flink_runtime.airflow.links.FlinkRuntimeJobLink"],
    }
