"""A real Airflow 3 deployment for end-to-end tests: one process per Airflow component.

``airflow scheduler`` (LocalExecutor: its workers run the tasks in their own processes),
``airflow triggerer``, ``airflow dag-processor`` and ``airflow api-server`` start as
separate processes on a throw-away AIRFLOW_HOME, each on its own so a test can kill
one. The metadata database is a fresh PostgreSQL database on the session's server, as a
deployment runs it: on SQLite, Airflow refused backfills while the scheduler wrote
("Database is locked"), and the scheduler once died of a DagRun that a refused backfill
had rolled back under it (sqlalchemy ObjectDeletedError), failing the test 300 s later.
Everything is driven through Airflow's public REST API (``/api/v2``), as an outsider
would: trigger a DAG run, read task instances and XComs, mark a task failed.

The simple auth manager runs with ``all_admins`` (no login), the execution API of
the api-server is what the workers report to, and nothing is inherited from the test
process's own Airflow settings (tests/airflow/conftest.py sets unit-test mode there).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

from tests.flink_tools import cache_root
from tests.helpers.postgres import PostgresServer

__all__ = ["AirflowDeployment", "AirflowDeploymentError"]

COMPONENTS = ("api-server", "dag-processor", "scheduler", "triggerer")
TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


class AirflowDeploymentError(AssertionError):
    """A component did not start or a wait ran out: the message holds the components' log tails."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AirflowDeployment:
    """Airflow's four components as processes on ``home``; use as a context manager.

    :param home: AIRFLOW_HOME (created; holds logs and each component's output).
    :param dags_folder: the DAG files to parse.
    :param metadata_server: the PostgreSQL server to make this deployment's metadata database on.
    :param connections: Airflow connections as ``{conn_id: {"conn_type": ..., ...}}``
        (passed as ``AIRFLOW_CONN_*`` variables, JSON form).
    :param env: more environment variables for every component (e.g. OpenLineage's).
    """

    def __init__(
        self,
        home: Path,
        dags_folder: Path,
        metadata_server: PostgresServer,
        connections: Mapping[str, Mapping[str, Any]] = {},
        env: Mapping[str, str] = {},
    ) -> None:
        self.home = home
        self.dags_folder = dags_folder
        self.metadata_server = metadata_server
        self.database = f"airflow_{uuid.uuid4().hex[:12]}"
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.env = self._environment(connections, env)
        self.client = httpx.Client(base_url=f"{self.base_url}/api/v2", timeout=30)

    def _environment(self, connections: Mapping[str, Mapping[str, Any]], extra: Mapping[str, str]) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith(("AIRFLOW", "_AIRFLOW"))}
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                "AIRFLOW__CORE__PARALLELISM": "8",
                # psycopg 3 for both: Airflow would derive asyncpg for the async one.
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.metadata_server.url(self.database),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": self.metadata_server.url(self.database),
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API_AUTH__JWT_SECRET": "flink-runtime-e2e-tests-only",
                # New DAG files are seen within seconds, not the default minutes.
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
                "PYTHONUNBUFFERED": "1",
            }
        )
        for conn_id, fields in connections.items():
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(dict(fields))
        env.update(extra)
        return env

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> AirflowDeployment:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self, timeout: float = 180) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        migrated = self._migrated_schema(timeout)
        self.metadata_server.create_database(self.database)
        self.metadata_server.restore(self.database, migrated)
        for component in COMPONENTS:
            self.start_component(component)
        self._wait(lambda: self._healthy(), timeout, "the api-server to answer /api/v2/monitor/health")

    def _migrated_schema(self, timeout: float) -> Path:
        """The SQL of a freshly migrated, empty metadata database for this Airflow, made once
        per machine and restored into each deployment's database (well under a second):
        `airflow db migrate` takes 8 s on a quiet machine and far longer on a loaded one
        (94 s once), and what the tests hold Airflow to starts after it."""
        key = hashlib.sha256(f"{sys.executable}\n{metadata.version('apache-airflow')}".encode()).hexdigest()[:16]
        schema = cache_root() / "airflow-db" / f"airflow-{metadata.version('apache-airflow')}-{key}.postgresql.sql"
        if schema.is_file():
            return schema
        schema.parent.mkdir(parents=True, exist_ok=True)
        with open(schema.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another pytest process may be migrating now
            if schema.is_file():
                return schema
            scratch = f"airflow_migrate_{uuid.uuid4().hex[:12]}"
            self.metadata_server.create_database(scratch)
            url = self.metadata_server.url(scratch)
            env = {
                **self.env,
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url,
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": url,
            }
            migrated = subprocess.run(
                [sys.executable, "-m", "airflow", "db", "migrate"],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            if migrated.returncode != 0:
                raise AirflowDeploymentError(
                    f"airflow db migrate failed:\n{migrated.stdout[-3000:]}{migrated.stderr[-3000:]}"
                )
            partial = schema.with_suffix(".partial")
            self.metadata_server.dump(scratch, partial)
            partial.rename(schema)  # complete dumps only
        return schema

    def start_component(self, component: str) -> None:
        with open(self.home / f"{component}.out", "ab") as output:
            self.processes[component] = subprocess.Popen(
                [sys.executable, "-m", "airflow", component],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=self.home,
                start_new_session=True,  # so stop() can end each component with its children
            )

    def restart(self, components: Iterable[str], env: Mapping[str, str] = {}) -> None:
        """Stop ``components`` (SIGTERM, as a deployment's restart would) and start them
        again with ``env`` added to their environment."""
        self.env.update(env)
        components = list(components)
        # All signalled at once, then waited for: their shutdowns overlap (the triggerer's
        # alone took 11 s on a loaded machine) instead of adding up.
        for component in components:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.processes[component].pid, signal.SIGTERM)
        for component in components:
            process = self.processes[component]
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        for component in components:
            self.start_component(component)

    def stop(self) -> None:
        self.client.close()
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        # A throw-away deployment: 5 s lets an idle component end by itself; one that does
        # not (after the OpenLineage tests none ends even within 20 s of SIGTERM) gains
        # nothing from a longer wait, so it is SIGKILLed then.
        deadline = time.monotonic() + 5
        for process in self.processes.values():
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)

    def _healthy(self) -> bool:
        try:
            return self.client.get("/monitor/health").status_code == 200
        except httpx.HTTPError:
            return False

    # -- the REST API --------------------------------------------------------------------------------

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.client.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise AirflowDeploymentError(f"{method} {path} answered {response.status_code}: {response.text[:2000]}")
        return response.json()

    def wait_for_dag(self, dag_id: str, timeout: float = 90) -> None:
        """Until the dag-processor has parsed the DAG (and it has no import error)."""

        def parsed() -> bool:
            errors = self._json("GET", "/importErrors")["import_errors"]
            if errors:
                raise AirflowDeploymentError(f"DAG import errors: {errors}")
            return self.client.get(f"/dags/{dag_id}").status_code == 200

        self._wait(parsed, timeout, f"DAG {dag_id} to be parsed")

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, logical_date: str | None = None) -> str:
        """A manual run; returns its run id. No logical date unless given (ISO 8601), as the
        UI's trigger button makes it; with one, ``{{ ds }}`` is defined as in a scheduled run."""
        body = {"logical_date": logical_date, "conf": dict(conf or {})}
        run = self._json("POST", f"/dags/{dag_id}/dagRuns", json=body)
        return str(run["dag_run_id"])

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return self._json("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")

    def wait_for_task(
        self, dag_id: str, run_id: str, task_id: str, states: Iterable[str], timeout: float = 90
    ) -> dict[str, Any]:
        """The task instance once it is in one of ``states``; fails early on another terminal state."""
        wanted = set(states)
        seen: dict[str, Any] = {}

        def reached() -> bool:
            try:
                seen.update(self.task_instance(dag_id, run_id, task_id))
            except httpx.TimeoutException:  # a busy api-server (SQLite locked by a restart): ask again
                return False
            if seen["state"] in wanted:
                return True
            if seen["state"] in TERMINAL_TI_STATES:
                log = self.task_log(dag_id, run_id, task_id, seen)
                raise AirflowDeploymentError(
                    f"task {task_id} of {run_id} ended {seen['state']}, not {sorted(wanted)}:\n{log}"
                )
            return False

        self._wait(reached, timeout, f"task {task_id} of {run_id} to be {sorted(wanted)} (last: {seen.get('state')})")
        return seen

    def wait_for_deferral(self, dag_id: str, run_id: str, task_id: str, timeout: float = 120) -> None:
        """Until the scheduler has handled the exit of the task's process on deferral.

        Ending the deferred work before that races Airflow 3.3's scheduler: when the
        trigger fires first, the resumed try is queued under the same executor key, the
        LocalExecutor's success event for the first process removes that key from its
        running set, and the scheduler, finding the task instance queued but unknown to
        the executor, fails it as killed externally ("finished with state success, but
        the task instance's state attribute is queued"). Nothing in the REST API tells
        that the event was handled; the scheduler's "TaskInstance Finished" line does.
        """
        finished = f"TaskInstance Finished: dag_id={dag_id}, task_id={task_id}, run_id={run_id},"

        def handled() -> bool:
            output = (self.home / "scheduler.out").read_text(errors="replace")
            return any(finished in line and "state=deferred" in line for line in output.splitlines())

        self._wait(handled, timeout, f"the scheduler to handle the deferral of {task_id} of {run_id}")

    def mark_task(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        """What a user's "mark failed/success" in the UI does."""
        self._json("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}", json={"new_state": state})

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        entry = self._json("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}")
        return entry["value"]

    def task_log(self, dag_id: str, run_id: str, task_id: str, ti: Mapping[str, Any] | None = None) -> str:
        """The task's log of its latest try, as the UI shows it (trigger lines included)."""
        try_number = (ti or self.task_instance(dag_id, run_id, task_id))["try_number"] or 1
        response = self.client.get(
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            headers={"Accept": "application/json"},
        )
        if response.status_code != 200:
            return f"(log unavailable: {response.status_code})"
        content = response.json().get("content", [])
        lines = [item.get("event", "") if isinstance(item, dict) else str(item) for item in content]
        return "\n".join(str(line) for line in lines)

    # -- diagnostics -----------------------------------------------------------------------------------

    def output_tails(self, lines: int = 40) -> str:
        """The last lines of each component's output, without the api-server's access log
        (a waiting test's own polling would fill its tail)."""
        tails = []
        for component in COMPONENTS:
            path = self.home / f"{component}.out"
            text = path.read_text(errors="replace").splitlines() if path.exists() else []
            text = [line for line in text if "[http.access]" not in line][-lines:]
            tails.append(f"--- airflow {component} ---\n" + "\n".join(text))
        return "\n".join(tails)

    def _check_components(self) -> None:
        """Fail at once when a component died: nothing restarts it here, so waiting on would
        only time out later without saying why."""
        for component, process in self.processes.items():
            if process.poll() is not None:
                raise AirflowDeploymentError(
                    f"airflow {component} exited with code {process.returncode}\n{self.output_tails()}"
                )

    def _wait(self, condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            self._check_components()
            if time.monotonic() > deadline:
                raise AirflowDeploymentError(f"timed out after {timeout:g} s waiting for {what}\n{self.output_tails()}")
            time.sleep(0.2)
