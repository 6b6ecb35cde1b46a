"""How `make test` shares the suite between its pytest-xdist workers (`-n 2 --dist loadgroup`).

xdist's own loadgroup sends every test without an ``xdist_group`` mark on its own, so two
workers would each set up a module's module-scoped fixtures (a Spark standalone cluster,
a netns network, Flink's CLI cluster, the real Airflow deployment). Here the unit of work
is the ``xdist_group`` when a test has one, else the test's module: a module's fixtures
are made once, on one worker, and modules that share something expensive or exclusive
name one group (see the ``pytestmark`` lines). Units go out in collection order (the
heavy airflow/ and integration/ modules first, the short unit tests last to fill the gaps).

One unit is pinned: tests/simulation/test_simulation.py runs on worker gw0, after
everything else gw0 gets, because gw0 is where tests/simulation/conftest.py starts the
simulator's background run (once per `make test`, not once per worker) whose result
`test_schedules` collects in the same process.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

# The mode whose scheduler this is: `--dist loadgroup`, by module unless a group says otherwise.
DIST_MODE = "loadgroup"
SIMULATION_WORKER = "gw0"
SIMULATION_MODULE = "tests/simulation/test_simulation.py"


def runs_simulation_background(config: pytest.Config) -> bool:
    """Whether this pytest process is the one that runs test_schedules when it is collected:
    a run without xdist, or worker gw0 of a run with this scheduler (another --dist mode
    may send test_schedules anywhere: then no worker starts it early, and it runs itself)."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None:
        return True
    # A worker's --dist reads "no" (xdist resets it there); xdist keeps whether it was loadgroup.
    return workerinput.get("workerid") == SIMULATION_WORKER and bool(getattr(config.option, "loadgroup", False))


class ModuleOrGroupScheduling(LoadScopeScheduling):
    """xdist's loadscope, a unit being a test's xdist_group or else its module."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        # Collection order (see the module's comment), not loadscope's "most tests first".
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):  # loadgroup's `nodeid@group` (an @ in a param id is not one)
            return nodeid.split("@")[-1]
        return nodeid.split("::", 1)[0]

    def _pinned_worker_alive(self) -> bool:
        return any(node.gateway.id == SIMULATION_WORKER for node in self.nodes)

    def _reschedule(self, node: Any) -> None:
        # Another worker never takes the pinned unit: with only it left, it is done.
        if (
            not node.shutting_down
            and list(self.workqueue) == [SIMULATION_MODULE]
            and node.gateway.id != SIMULATION_WORKER
            and self._pinned_worker_alive()
        ):
            node.shutdown()
            return
        super()._reschedule(node)

    def _assign_work_unit(self, node: Any) -> None:
        scopes = list(self.workqueue)
        if SIMULATION_MODULE in scopes and len(scopes) > 1:
            # Anything else first; gw0 takes the pinned unit last, no other worker takes it.
            self.workqueue.move_to_end(SIMULATION_MODULE)
        elif SIMULATION_MODULE in scopes and node.gateway.id != SIMULATION_WORKER and self._pinned_worker_alive():
            node.shutdown()  # nothing left for it (the first distribution of a run of 2 units)
            return
        super()._assign_work_unit(node)
