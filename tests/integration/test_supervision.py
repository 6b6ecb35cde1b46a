"""Supervision of JobMasters on a real MiniCluster: an exception injected into
a JobMaster's handler, callback or slot event fails that job globally with that
exception, never leaves it stuck, and the cluster goes on running other jobs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.client import JobClient
from flink_runtime.jobmanager.jobmaster import JobMaster
from flink_runtime.minicluster import MiniCluster
from tests.helpers.jobs import modulo_sum_job

pytestmark = pytest.mark.integration

DOOMED = "doomed"


class InjectedFault(RuntimeError):
    pass


# JobMaster methods a fault goes into: one a TaskManager's message reaches (supervised by
# the JobManager's mailbox), one callback the job scheduled itself (the result of its
# preparation in a worker thread), and the slot pool handing over a slot that was not
# free at first (a slot pool event: with 6 source subtasks on 4 slots, the first 4 are
# deployed at once and the 5th when a slot comes back).
INJECTION_POINTS = {"schedule_or_update_consumers": 1, "_on_prepared": 1, "on_slot_allocated": 1}


@pytest.fixture
def inject(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    def into(method_name: str) -> None:
        original = getattr(JobMaster, method_name)
        calls = 0

        def faulty(self: JobMaster, *args: Any) -> Any:
            nonlocal calls
            if self.name == DOOMED:
                calls += 1
                if calls >= INJECTION_POINTS[method_name]:
                    raise InjectedFault(f"injected into {method_name}")
            return original(self, *args)

        monkeypatch.setattr(JobMaster, method_name, faulty)

    yield into


@pytest.mark.parametrize("method_name", INJECTION_POINTS)
def test_a_jobmaster_that_raises_fails_its_job_and_the_cluster_goes_on(
    minicluster: MiniCluster, tmp_path: Path, inject: Callable[[str], None], method_name: str
) -> None:
    inject(method_name)
    with JobClient(minicluster.rest_url) as client:
        graph = modulo_sum_job(tmp_path / "doomed", name=DOOMED)
        graph.vertices[0].parallelism = 6  # more source subtasks than the cluster's 4 slots
        doomed = client.submit(graph)
        assert client.wait(doomed, timeout=60).value == "FAILED"
        root = client.exceptions(doomed)["root-exception"]
        assert "InjectedFault" in root and method_name in root
        # Its slots went back: the next job gets them and finishes.
        fine = client.submit(modulo_sum_job(tmp_path / "fine", name="fine"))
        assert client.wait(fine, timeout=60).value == "FINISHED"
    assert (tmp_path / "fine").exists(), "the job after the failed one wrote nothing"
