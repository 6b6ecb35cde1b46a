"""Shared fixtures: one MiniCluster for the tests that only need a working cluster."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.minicluster import MiniCluster
from flink_runtime.rpc import supervision
from flink_runtime.taskmanager.taskexecutor import TaskExecutor
from tests import spark_cds
from tests.helpers import leftovers
from tests.helpers.postgres import PostgresServer, PostgresUnavailable, postgres_server
from tests.helpers.xdist_scheduling import DIST_MODE, ModuleOrGroupScheduling

logging.getLogger("flink_runtime").setLevel(logging.INFO)
# py4j's gateway objects log from __del__ at interpreter exit, after pytest closed the
# streams; without this each prints a "Logging error" traceback after the summary.
logging.raiseExceptions = False
# JobManager processes the tests start (StandaloneCluster, the CLI, Airflow) start their
# planner's SparkSession on first use: most test jobs never need it, and a JVM per
# JobManager start is minutes of CPU over the suite on 2 cores. The user-code isolation
# tests set warm-up back on, as a deployment runs it.
# Their JVMs start with the quick-start flags fast_config gives the MiniCluster's (test
# jobs are small; a cluster process starts a JVM per SparkSession), and map Spark's
# classes from a class-data-sharing archive (tests/spark_cds.py: made once per machine).
SPARK_JAVA_OPTIONS = f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 {spark_cds.java_options()}".strip()
# Test jobs name their functions by module path (tests.helpers.transforms:...). A process
# the tests start finds `tests` through its working directory when that is the project
# root; one started elsewhere (a "host" of the multi-host test runs in a directory of its
# own) finds it only through PYTHONPATH, which `make test` does not set.
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if PROJECT_ROOT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [PROJECT_ROOT, os.environ.get("PYTHONPATH")]))
os.environ.setdefault(
    "FLINK_PROPERTIES",
    f"jobmanager.planner.warm-up: false\ntaskmanager.spark.warm-up: false\n"
    f'spark.driver.extraJavaOptions: "{SPARK_JAVA_OPTIONS}"\n',
)

# TaskManagers built in this process from their own configuration (the docs' samples, unit
# tests, MiniClusters without fast_config) start no Spark ahead either: the tests that check
# the warm-up (and the shared `minicluster`) ask for it by its key.
_task_executor_init = TaskExecutor.__init__


def _cold_unless_asked(self: TaskExecutor, config: Configuration, *args: Any, **kwargs: Any) -> None:
    if cfg.SPARK_WARM_UP.key not in config:
        config = config.copy({cfg.SPARK_WARM_UP.key: "false"})
    _task_executor_init(self, config, *args, **kwargs)


TaskExecutor.__init__ = _cold_unless_asked  # type: ignore[method-assign]

# Before any process starts: every process of this run carries the run's id (leftovers.py).
# Under pytest-xdist each worker imports this anew and gets an id of its own, so each
# worker's no_process_left_behind looks at its own processes only, never the other's.
RUN_ID = leftovers.mark_run()


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`make test`'s `-n 2 --dist loadgroup`: by xdist_group, else by module, the simulation
    module on gw0 (tests/helpers/xdist_scheduling.py). Other --dist modes are xdist's own."""
    if config.getoption("dist") == DIST_MODE:
        return ModuleOrGroupScheduling(config, log)
    return None


# An endpoint a test builds in this process has the top of the process as its parent
# (rpc/supervision.py): a failure nothing above it handles would end pytest itself, with
# exit code 70 and the reason lost in the capture. In the test process that failure is
# recorded instead, and fails the test it happened in, named (processes the tests start
# still end on it: their escalation is what several tests prove).
_hard_failures: list[str] = []


def _record_hard_failure(reason: str, error: BaseException) -> None:
    logging.getLogger(__name__).critical("%s: %s: %s", reason, type(error).__name__, error, exc_info=error)
    _hard_failures.append(f"{reason}: {type(error).__name__}: {error}")


supervision.fail_hard = _record_hard_failure


@pytest.fixture(autouse=True)
def no_endpoint_failed_hard() -> Iterator[None]:
    """Fails a test during which an endpoint of the test process escalated a failure to
    the top of the process (in a real process: exit 70)."""
    yield
    if _hard_failures:
        failures = list(_hard_failures)
        _hard_failures.clear()
        pytest.fail("an endpoint escalated to the top of the test process:\n  " + "\n  ".join(failures), pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Fails the run naming every process it started that outlived it (a planner, a Spark
    JVM, a cluster process a test did not stop), then kills them. Autouse and session-wide:
    set up first, so torn down after every other fixture has stopped what it started."""
    yield
    left = leftovers.survivors(RUN_ID)
    if left:
        described = [leftovers.describe(process) for process in left]
        leftovers.kill(left)
        pytest.fail(
            f"{len(left)} process(es) started by this test run outlived it (killed now):\n  " + "\n  ".join(described),
            pytrace=False,
        )


def fast_config(**overrides: object) -> Configuration:
    """Short heartbeats and back-offs so failure paths finish within seconds."""
    values: dict[str, object] = {
        "heartbeat.interval": "500 ms",
        "heartbeat.timeout": "3 s",
        "cluster.registration.refused-registration-delay": "500 ms",
        "cluster.registration.error-delay": "500 ms",
        "slot.request.timeout": "5 s",
        "task.cancellation.interval": "500 ms",
        "task.cancellation.timeout": "5 s",
        "execution.checkpointing.min-interval": "100 ms",
        "metrics.system-resource-probing-interval": "500 ms",
        # Faster JVM start for short test jobs (slower for big ones, so not a runtime default).
        "spark.driver.extraJavaOptions": SPARK_JAVA_OPTIONS,
        # Most test clusters run no Spark job: a JVM per cluster start would be minutes of
        # CPU over the suite. The shared `minicluster` warms up, as a deployment does.
        "taskmanager.spark.warm-up": "false",
    }
    values.update(overrides)
    return Configuration(values)


@pytest.fixture(scope="session")
def minicluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    """A MiniCluster with 2 TaskManagers x 2 slots, shared by the whole session."""
    data_dir = tmp_path_factory.mktemp("minicluster-data")
    # Warmed at start: its Spark tests would start the session anyway, this moves it here.
    # No test of it loses a TaskManager, so a heartbeat timeout far above a loaded machine's
    # stalls: at 3 s its in-process TaskManagers were declared lost at loads of 13-16 (4.9 s
    # without a heartbeat), failing whichever jobs ran then.
    overrides = {"io.tmp.dirs": str(data_dir), "taskmanager.spark.warm-up": "true", "heartbeat.timeout": "30 s"}
    config = fast_config(**overrides)
    with MiniCluster(config, num_taskmanagers=2, slots_per_taskmanager=2) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server (tests/helpers/postgres.py) for the whole session, started
    on first use; the test FAILS with the reason when it cannot start, it never skips."""
    try:
        server = postgres_server()
        running = server.__enter__()
    except PostgresUnavailable as exc:
        pytest.fail(f"cannot start PostgreSQL: {exc}")
    try:
        yield running
    finally:
        server.__exit__(None, None, None)
