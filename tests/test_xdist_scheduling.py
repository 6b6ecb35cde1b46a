"""How `make test` splits the suite between its 2 xdist workers (tests/helpers/xdist_scheduling.py):
a module, or an xdist_group, runs whole on one worker (its module-scoped fixtures are made
once), and the simulation module runs on gw0, last there, where its background run started.

The scheduler is driven as xdist's controller drives it (add nodes, their collections,
schedule, one report per finished test), with workers that finish tests in turn."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.helpers.xdist_scheduling import SIMULATION_MODULE, ModuleOrGroupScheduling

ROOT = Path(__file__).resolve().parent.parent
COLLECTION = [
    "tests/airflow/test_dags.py::test_a@airflow-db",
    "tests/airflow/test_dags.py::test_b@airflow-db",
    "tests/airflow/test_real_airflow.py::test_c",
    "tests/airflow/test_real_airflow.py::test_d",
    "tests/integration/test_multihost_netns.py::test_e@netns",
    "tests/integration/test_chaos.py::test_f[a@b]",  # an @ in a parameter is no group
    "tests/integration/test_chaos.py::test_f[c]",
    "tests/integration/test_unshared_data_dirs.py::test_g@netns",
    "tests/airflow/test_plugin.py::test_h@airflow-db",
    f"{SIMULATION_MODULE}::test_i",
    f"{SIMULATION_MODULE}::test_schedules",
    "tests/unit/test_rpc.py::test_j",
    "tests/unit/test_rpc.py::test_k",
    "tests/unit/test_states.py::test_l",
]


class FakeWorker:
    """What the scheduler sees of xdist's WorkerController."""

    def __init__(self, worker_id: str) -> None:
        self.gateway = SimpleNamespace(id=worker_id)
        self.shutting_down = False
        self.pending: list[int] = []
        self.ran: list[str] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.pending.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def run(worker_ids: list[str]) -> dict[str, FakeWorker]:
    config = SimpleNamespace(getvalue=lambda name: [f"{len(worker_ids)}*popen"], option=SimpleNamespace())
    scheduler = ModuleOrGroupScheduling(config)  # type: ignore[arg-type]
    workers = {worker_id: FakeWorker(worker_id) for worker_id in worker_ids}
    for worker in workers.values():
        scheduler.add_node(worker)  # type: ignore[arg-type]
    for worker in workers.values():
        scheduler.add_node_collection(worker, COLLECTION)  # type: ignore[arg-type]
    scheduler.schedule()
    while any(worker.pending for worker in workers.values()):
        for worker in workers.values():  # each finishes one test in turn
            if worker.pending:
                index = worker.pending.pop(0)
                worker.ran.append(COLLECTION[index])
                scheduler.mark_test_complete(worker, index)  # type: ignore[arg-type]
    assert scheduler.tests_finished and not scheduler.has_pending
    return workers


def module(nodeid: str) -> str:
    return nodeid.split("::")[0]


def test_modules_and_groups_stay_whole_and_the_simulation_runs_last_on_gw0() -> None:
    workers = run(["gw0", "gw1"])
    ran = [nodeid for worker in workers.values() for nodeid in worker.ran]
    assert sorted(ran) == sorted(COLLECTION)  # every test once
    assert all(worker.shutting_down for worker in workers.values())
    worker_of = {nodeid: worker_id for worker_id, worker in workers.items() for nodeid in worker.ran}
    for nodeid in COLLECTION:
        same_unit = [other for other in COLLECTION if module(other) == module(nodeid)]
        assert {worker_of[other] for other in same_unit} == {worker_of[nodeid]}, nodeid
    for group in ("@airflow-db", "@netns"):
        assert len({worker_of[nodeid] for nodeid in COLLECTION if nodeid.endswith(group)}) == 1, group
    simulation = [nodeid for nodeid in COLLECTION if module(nodeid) == SIMULATION_MODULE]
    assert workers["gw0"].ran[-len(simulation) :] == simulation
    assert workers["gw1"].ran  # both worked


def test_without_gw0_another_worker_runs_the_simulation() -> None:
    workers = run(["gw1", "gw2"])
    ran = [nodeid for worker in workers.values() for nodeid in worker.ran]
    assert sorted(ran) == sorted(COLLECTION)


INNER_CONFTEST = """
import os
from pathlib import Path

from tests.helpers.xdist_scheduling import runs_simulation_background


def pytest_collection_finish(session):
    worker = getattr(session.config, "workerinput", {}).get("workerid", "serial")
    Path(os.environ["DECISIONS"], worker).write_text(str(runs_simulation_background(session.config)))
"""


def decisions(tmp_path: Path, *options: str) -> dict[str, str]:
    """Each process's answer, from a real pytest run (over real xdist workers with -n)."""
    (tmp_path / "tests").mkdir(parents=True)
    (tmp_path / "tests" / "conftest.py").write_text(INNER_CONFTEST)
    (tmp_path / "tests" / "test_inner.py").write_text("def test_nothing():\n    pass\n")
    out = tmp_path / "decisions"
    out.mkdir()
    # Only xdist among the installed plugins: the decision reads nothing of the others, and
    # hypothesis's alone took ~2 s of each of the 7 processes' start-up (~15 s of this test).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DECISIONS": str(out), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-p", "no:cacheprovider", *options]
    command.append(str(tmp_path / "tests"))
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return {path.name: path.read_text() for path in out.iterdir()}


def test_only_gw0_or_a_run_without_xdist_starts_the_simulation_in_the_background(tmp_path: Path) -> None:
    assert decisions(tmp_path / "serial") == {"serial": "True"}
    assert decisions(tmp_path / "loadgroup", "-n", "2", "--dist", "loadgroup") == {"gw0": "True", "gw1": "False"}
    # xdist's own modes may send test_schedules anywhere: no worker starts it early.
    assert decisions(tmp_path / "load", "-n", "2", "--dist", "load") == {"gw0": "False", "gw1": "False"}


def test_make_test_runs_the_suite_over_two_workers_and_a_serial_run_stays_possible() -> None:
    commands = subprocess.run(["make", "-n", "-C", str(ROOT), "test"], capture_output=True, text=True, timeout=60)
    assert "-m pytest -n 2 --dist loadgroup" in commands.stdout
    serial = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "test", "TEST_WORKERS=0"], capture_output=True, text=True, timeout=60
    )
    assert "-m pytest -n 0 --dist loadgroup" in serial.stdout
