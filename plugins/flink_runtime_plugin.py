"""Airflow plugin for flink-runtime: a cluster page in the Airflow UI and the job link.

Copy (or mount) this file into $AIRFLOW_HOME/plugins of an Airflow that has the
flink-runtime package installed. It adds:

- the FastAPI app of flink_runtime.airflow.plugin_views at /flink-runtime on the API
  server (an HTML page of the cluster behind the `flink_runtime_default` connection, or
  `?conn_id=`, and /flink-runtime/api/overview as JSON);
- "Flink Runtime" under Browse in the UI, showing that page;
- the "Flink Runtime Job" extra link on tasks, which opens /flink-runtime/jobs/<id>: a
  redirect to the job's page on the cluster's dashboard (with the connection's token in
  the URL fragment for users allowed to read the connection).

The plugin is defined here only, not also under an `airflow.plugins` entry point of the
package: Airflow loads the plugins folder first and then entry points, and a second
plugin of the same name is refused ("already registered") and listed as an import error.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from flink_runtime.airflow.links import PLUGIN_URL_PREFIX, FlinkRuntimeJobLink
from flink_runtime.airflow.plugin_views import create_app

URL_PREFIX = PLUGIN_URL_PREFIX


class FlinkRuntimePlugin(AirflowPlugin):
    name = "flink_runtime"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Flink Runtime"}]
    external_views = [
        {
            "name": "Flink Runtime",
            # With a url_route the UI shows href in an iframe at /plugin/flink-runtime. The
            # href is relative (no leading slash) so it resolves against Airflow's base URL,
            # which may be a sub-path behind a proxy.
            "href": f"{URL_PREFIX.lstrip('/')}/",
            "url_route": "flink-runtime",
            "destination": "nav",
            "category": "Browse",
        }
    ]
    operator_extra_links = [FlinkRuntimeJobLink()]
