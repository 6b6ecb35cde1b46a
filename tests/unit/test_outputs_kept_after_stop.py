"""Which producers' output a stop's savepoint keeps is read from the vertices' preparation
(Prepared), never from their operators' configs."""

from __future__ import annotations

from flink_runtime.invokable import Prepared
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.jobmanager.job_checkpoints import outputs_kept_after_stop


def _graph() -> JobGraph:
    graph = JobGraph(
        name="join",
        job_id="00000000000000000000000000000001",
        vertices=[JobVertex(id=v, name=v, invokable="spark") for v in ("orders", "totals", "join", "sink")],
    )
    graph.connect("orders", "join")
    graph.connect("totals", "join")
    graph.connect("join", "sink")
    return graph


def test_a_join_keeps_the_output_of_producers_that_do_not_reemit_everything() -> None:
    prepared = {
        "orders": Prepared(),
        "totals": Prepared(reemits_all_it_read=True),  # a keyed final aggregate
        "join": Prepared(rereads_inputs_after_stop=True),
        "sink": Prepared(),
    }
    assert outputs_kept_after_stop(_graph(), prepared) == {"orders"}


def test_without_a_vertex_that_rereads_its_inputs_nothing_is_kept() -> None:
    prepared = {vertex: Prepared() for vertex in ("orders", "totals", "join", "sink")}
    assert outputs_kept_after_stop(_graph(), prepared) == set()


def test_an_unprepared_job_keeps_nothing() -> None:
    # A job whose preparation failed ends without running anything.
    assert outputs_kept_after_stop(_graph(), {}) == set()
