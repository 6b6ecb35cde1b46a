"""Airflow tests: a throw-away AIRFLOW_HOME, a metadata database on demand, task contexts.

Airflow reads AIRFLOW_HOME and its configuration when it is first imported, and the
test modules here import it at collection time: so the variables are set when this
conftest is imported, before any of them. The session fixture only cleans up.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.minicluster import MiniCluster
from tests.helpers.openlineage import require_openlineage

_AIRFLOW_HOME = tempfile.mkdtemp(prefix="flink-runtime-airflow-home-")
os.environ["AIRFLOW_HOME"] = _AIRFLOW_HOME
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"

MINICLUSTER_CONN_ID = "flink_runtime_minicluster"


@pytest.fixture(scope="session", autouse=True)
def airflow_home() -> Iterator[Path]:
    """The session's AIRFLOW_HOME (removed at the end)."""
    os.environ["AIRFLOW_HOME"] = _AIRFLOW_HOME
    yield Path(_AIRFLOW_HOME)
    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db(airflow_home: Path) -> None:
    """Airflow's metadata database (SQLite in AIRFLOW_HOME), created once per session."""
    from airflow.utils import db

    db.initdb()


@pytest.fixture(scope="session")
def minicluster_conn_id(minicluster: MiniCluster) -> Iterator[str]:
    """A connection (as an environment variable, JSON form) to the session's MiniCluster."""
    host, port = minicluster.rest_url.removeprefix("http://").rsplit(":", 1)
    variable = f"AIRFLOW_CONN_{MINICLUSTER_CONN_ID.upper()}"
    os.environ[variable] = json.dumps({"conn_type": "flink_runtime", "host": host, "port": int(port)})
    yield MINICLUSTER_CONN_ID
    os.environ.pop(variable, None)


# -- a task instance's context, without a task runner --------------------------------------------------


class FakeTaskStateStore:
    """context["task_state_store"], kept in a dict (it outlives tries, as the real one does)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any, **kwargs: Any) -> None:
        self.values[key] = value

    def delete(self, key: str) -> None:
        self.values.pop(key, None)


@dataclass
class FakeTaskInstance:
    dag_id: str = "dag"
    task_id: str = "task"
    run_id: str = "manual__2026-01-01T00:00:00+00:00"
    map_index: int = -1
    try_number: int = 1
    xcoms: dict[str, Any] = field(default_factory=dict)
    stats_tags: dict[str, str] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, task_ids: str | None = None, key: str = "return_value", **kwargs: Any) -> Any:
        return self.xcoms.get(key)


@dataclass
class TaskContexts:
    """Contexts for successive tries of one task instance, sharing its state store."""

    store: FakeTaskStateStore = field(default_factory=FakeTaskStateStore)

    def __call__(self, try_number: int = 1, with_store: bool = True, **ti_fields: Any) -> dict[str, Any]:
        ti = FakeTaskInstance(try_number=try_number, **ti_fields)
        context: dict[str, Any] = {"ti": ti, "task_instance": ti, "run_id": ti.run_id}
        if with_store:
            context["task_state_store"] = self.store
        return context


@pytest.fixture
def task_context() -> Callable[..., dict[str, Any]]:
    """``task_context(try_number=1, with_store=True)`` -> a minimal context dict."""
    return TaskContexts()


# -- the OpenLineage provider's listener ------------------------------------------------------------


@pytest.fixture
def openlineage_events(tmp_path: Path) -> Iterator[Path]:
    """The openlineage provider's listener, writing its events to a file (its file transport).

    Airflow registers the listener when its plugin loads, and only if a transport is
    configured then; this session loaded plugins long before, so the listener is
    added to the task runner's listener manager here (and removed after). Events are
    sent from a thread, not a fork of this multi-threaded process.
    """
    require_openlineage()
    from airflow.providers.openlineage import conf as ol_conf
    from airflow.providers.openlineage.plugins.listener import OpenLineageListener
    from airflow.sdk.listener import get_listener_manager

    def clear_config_cache() -> None:  # the provider caches its settings per process
        for name in dir(ol_conf):
            cache_clear = getattr(getattr(ol_conf, name), "cache_clear", None)
            if callable(cache_clear):
                cache_clear()

    events = tmp_path / "openlineage-events.jsonl"
    transport = {"type": "file", "log_file_path": str(events), "append": True}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps(transport))
        patch.setenv("AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD", "True")
        patch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "flink-runtime-tests")
        clear_config_cache()
        listener = OpenLineageListener()
        manager = get_listener_manager()
        manager.add_listener(listener)
        try:
            yield events
        finally:
            manager.pm.unregister(listener)
    clear_config_cache()
