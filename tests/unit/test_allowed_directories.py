"""security.allowed-directories and '..': which paths a job may name (issue 9)."""

from __future__ import annotations

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.security.paths import allowed_directories, job_path_problems, path_problem

ALLOWED = allowed_directories(Configuration({"security.allowed-directories": "/data, s3a://bucket/jobs"}))


def test_the_list_takes_yaml_lists_and_separated_text() -> None:
    assert ALLOWED == ["file:///data", "s3a://bucket/jobs"]
    listed = Configuration({"security.allowed-directories": ["/data", "/scratch/"]})
    assert allowed_directories(listed) == ["file:///data", "file:///scratch"]
    assert allowed_directories(Configuration()) == []


@pytest.mark.parametrize("path", ["/data", "/data/in/*.csv", "file:///data/out", "s3a://bucket/jobs/x", "/data/./x"])
def test_paths_inside_are_accepted(path: str) -> None:
    assert path_problem(path, ALLOWED) is None


@pytest.mark.parametrize(
    "path", ["/etc", "/database", "/", "s3a://bucket/other", "s3a://other/jobs", "hdfs:///data", "relative/dir"]
)
def test_paths_outside_are_refused(path: str) -> None:
    assert "outside security.allowed-directories" in (path_problem(path, ALLOWED) or "")


@pytest.mark.parametrize("path", ["/data/../etc", "../x", "s3a://bucket/jobs/../../x", "C:\\\\data\\\\..\\\\x"])
def test_dot_dot_is_refused_with_or_without_a_list(path: str) -> None:
    for allowed in (ALLOWED, []):
        assert "'..'" in (path_problem(path, allowed) or "")


def test_every_path_of_a_job_graph_is_checked() -> None:
    graph = JobGraph(
        name="paths",
        vertices=[
            JobVertex(id="read", name="R", invokable="spark", config={"source": {"paths": ["/data/in", "/etc/x"]}}),
            JobVertex(id="write", name="W", invokable="spark", config={"sink": {"path": "/tmp/out"}}),
            JobVertex(id="collect", name="C", invokable="collect-sink", config={"path": "/data/../root"}),
        ],
        config={"state.savepoints.dir": "/var/sp", "state.checkpoints.dir": "/data/chk"},
    )
    problems = job_path_problems(graph.config, graph.vertices, ALLOWED)
    assert len(problems) == 4
    assert any("vertex 'read': config source.paths[1]" in problem for problem in problems)
    assert any("vertex 'write': config sink.path" in problem for problem in problems)
    assert any("vertex 'collect': config path" in problem and "'..'" in problem for problem in problems)
    assert any("state.savepoints.dir" in problem for problem in problems)
