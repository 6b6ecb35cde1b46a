"""security.allowed-directories and '..': which paths a job may name, links resolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.operators.spark import io
from flink_runtime.security.paths import (
    AllowedDirectories,
    PathNotAllowedError,
    allowed_directories,
    job_path_problems,
    path_problem,
)

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


# -- symbolic links: real folders and links in a temporary directory ----------------------------


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """allowed/ (configured through the link allowed-link, as /tmp is a link on some systems),
    outside/secret.txt, and inside allowed/: link_out -> outside, data/real.txt."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "data").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n")
    (allowed / "data" / "real.txt").write_text("fine\n")
    (allowed / "link_out").symlink_to(outside)
    (tmp_path / "allowed-link").symlink_to(allowed)
    return {"root": tmp_path, "allowed": allowed, "outside": outside}


def listed(tree: dict[str, Path]) -> list[str]:
    return allowed_directories(Configuration({"security.allowed-directories": str(tree["root"] / "allowed-link")}))


def test_an_allowed_directory_that_is_a_link_allows_what_lies_in_its_target(tree: dict[str, Path]) -> None:
    allowed = listed(tree)
    for path in (tree["allowed"] / "data" / "real.txt", tree["root"] / "allowed-link" / "data" / "new"):
        assert path_problem(str(path), allowed) is None
    assert path_problem(f"file://{tree['allowed']}/data/*.txt", allowed) is None


@pytest.mark.parametrize(
    "path", ["{allowed}/link_out/secret.txt", "file://{allowed}/link_out/new/dir", "{allowed}/link_out/*.txt"]
)
def test_a_path_through_a_link_out_is_refused_naming_where_it_leads(tree: dict[str, Path], path: str) -> None:
    path = path.format(allowed=tree["allowed"])
    problem = path_problem(path, listed(tree)) or ""
    assert f"resolves to '{tree['outside']}/" in problem and "outside security.allowed-directories" in problem


def test_every_list_must_allow_and_without_one_only_dot_dot_is_refused(tree: dict[str, Path]) -> None:
    inside = str(tree["allowed"] / "data" / "real.txt")
    assert AllowedDirectories(listed(tree), []).problem(inside) is None
    assert "outside" in (AllowedDirectories(listed(tree), [str(tree["outside"])]).problem(inside) or "")
    assert not AllowedDirectories([], []) and AllowedDirectories().problem(str(tree["outside"])) is None
    with pytest.raises(PathNotAllowedError, match="sink: '/a/../b' has a '..' segment"):
        AllowedDirectories().check("/a/../b", "sink")


def test_listed_source_files_are_resolved_and_a_link_out_among_them_is_refused(tree: dict[str, Path]) -> None:
    allowed = AllowedDirectories(listed(tree))
    source = tree["allowed"] / "in"
    source.mkdir()
    (source / "a.txt").write_text("a\n")
    (source / "b.txt").symlink_to(tree["allowed"] / "data" / "real.txt")  # a link that stays inside
    files = io.confined_source_files(io.list_source_files({"paths": [str(source)]}), allowed)
    assert [f.path for f in files] == [str(source / "a.txt"), str(tree["allowed"] / "data" / "real.txt")]
    (source / "c.txt").symlink_to(tree["outside"] / "secret.txt")
    for paths in ([str(source)], [f"{source}/*.txt"]):  # a directory, a glob
        with pytest.raises(PathNotAllowedError, match=f"resolves to '{tree['outside']}/secret.txt'"):
            io.confined_source_files(io.list_source_files({"paths": paths}), allowed)
    # Without a list nothing changes: the paths as listed.
    assert [
        f.path for f in io.confined_source_files(io.list_source_files({"paths": [str(source)]}), AllowedDirectories())
    ][1] == str(source / "b.txt")


def test_publishing_refuses_a_staged_link_out_and_moves_nothing(tree: dict[str, Path]) -> None:
    """A job's code may put a link to a secret file into its own staged output while it
    runs; publishing (on the JobManager) must not move the secret into the sink."""
    sink = {"path": str(tree["allowed"] / "out"), "mode": "overwrite", "format": "text"}
    chunk = Path(io.sink_staging_root(sink, "job-1")) / "split-0"
    chunk.mkdir(parents=True)
    (chunk / "part-0.txt").write_text("row\n")
    (chunk / "part-1.txt").symlink_to(tree["outside"] / "secret.txt")
    with pytest.raises(PathNotAllowedError, match="staged sink file"):
        io.publish_sink(sink, "job-1", allowed=AllowedDirectories(listed(tree)))
    assert (tree["outside"] / "secret.txt").read_text() == "SECRET\n"
    assert sorted(p.name for p in (tree["allowed"] / "out").iterdir()) == ["_flink_staging"]  # nothing published


def test_discarding_staged_output_removes_nothing_through_a_link_out(tree: dict[str, Path]) -> None:
    victim = tree["outside"] / "_flink_staging" / "job-1"
    victim.mkdir(parents=True)
    (victim / "keep.txt").write_text("theirs\n")
    sink = {"path": str(tree["allowed"] / "link_out"), "mode": "overwrite", "format": "text"}
    io.discard_sink_staging(sink, "job-1", AllowedDirectories(listed(tree)))
    assert (victim / "keep.txt").read_text() == "theirs\n"
