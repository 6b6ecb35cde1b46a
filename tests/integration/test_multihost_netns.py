"""Several hosts: the JobManager and two TaskManagers, each in a Linux network namespace
of its own, with a private address it binds and nothing shared but the filesystem.

Each TaskManager has a data directory of its own, as on separate hosts: namespaces
share the filesystem, so every TaskManager runs in a working directory of its own with
the relative `io.tmp.dirs: data`, and the path a producer reports names a different
(empty) folder on any other TaskManager. Every partition that crosses TaskManagers
therefore travels over the network from the TaskManager that produced it
(taskmanager.network.partition-serving: network, the default for local paths). The
test process stays in the root namespace and reaches the JobManager's REST API through
the bridge, as a client on another host would.

Flink's region failover answers a lost partition by running its producer again: here
a TaskManager is killed (SIGKILL) after its source finished and before any consumer
fetched the source's partition, and the job still finishes with the exact counts.

Skipped, with the reason, only where namespaces cannot be made (not root).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flink_runtime.client import JobClient
from flink_runtime.client.local_cluster import ClusterProcess, StandaloneCluster
from flink_runtime.pipeline import Pipeline
from tests.helpers import netns
from tests.helpers.jobs import modulo_sum_job
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("netns")]  # one netns network at a time

WORDS = [f"w{n}" for n in range(23)]
# The JVM flags (quick start, class-data sharing) come from tests/conftest.py's FLINK_PROPERTIES.
PROPERTIES = {
    "spark.master": "local[1]",
    "heartbeat.interval": "1 s",
    "heartbeat.timeout": "8 s",
}
# Off loopback the REST API needs a token and the RPC a secret (CURVE between all processes).
TOKEN = "multihost-test-token"
SECURITY = {"security.rest.token": TOKEN, "security.cluster.secret": "multihost-test-secret"}
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 6}


@pytest.fixture(scope="module")
def network() -> Iterator[netns.Network]:
    try:
        netns.check_available()
    except netns.NamespacesUnavailable as exc:
        pytest.skip(str(exc))
    with netns.network(("jm", "tm1", "tm2")) as net:
        yield net


@pytest.fixture(scope="module")
def hosts(network: netns.Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A JobManager and two one-slot TaskManagers, each in its own namespace, binding its
    own address; every process with a data directory of its own."""
    work = tmp_path_factory.mktemp("multihost")
    markers = work / "markers"
    os.environ["FLINK_RUNTIME_TEST_MARKERS"] = str(markers)  # for wait_for_release, in every process
    jm = network.addresses["jm"]
    properties = {
        **PROPERTIES,
        **SECURITY,
        "jobmanager.rpc.address": jm,
        "rest.bind-address": jm,
        "rest.address": jm,
        "io.tmp.dirs": str(work / "jm-data"),
    }
    cluster = StandaloneCluster(work / "cluster", properties=properties, rest_host=jm)
    try:
        cluster.start_jobmanager(prefix=network.prefix("jm"))
        taskmanagers = {name: start_taskmanager(cluster, network, work, name) for name in ("tm1", "tm2")}
        cluster.wait_for_taskmanagers(lambda ids: {"tm1", "tm2"} <= ids, timeout=60)
        yield {"cluster": cluster, "network": network, "work": work, "markers": markers, "tms": taskmanagers}
    finally:
        cluster.stop()
        os.environ.pop("FLINK_RUNTIME_TEST_MARKERS", None)


def start_taskmanager(cluster: StandaloneCluster, network: netns.Network, work: Path, name: str) -> ClusterProcess:
    home = work / name
    home.mkdir(exist_ok=True)
    return cluster.start_taskmanager(
        name,
        wait=False,
        cwd=home,
        prefix=network.prefix(name),
        **{"taskmanager.host": network.addresses[name], "taskmanager.numberOfTaskSlots": 1, "io.tmp.dirs": "data"},
    )


def write_corpus(directory: Path, files: int, lines: int, offset: int = 0) -> collections.Counter[str]:
    directory.mkdir(parents=True)
    counts: collections.Counter[str] = collections.Counter()
    for index in range(files):
        words = [WORDS[(n * 7 + index + offset) % len(WORDS)] for n in range(lines)]
        (directory / f"{index}.csv").write_text("".join(f"{word}\n" for word in words))
        counts.update(words)
    return counts


def read_counts(output: Path) -> dict[str, int]:
    rows = [json.loads(line) for path in sorted(output.glob("*.json")) for line in path.read_text().splitlines()]
    counts = {row["word"]: row["n"] for row in rows}
    assert len(counts) == len(rows), "a word was counted in two rows"
    return counts


def finished(client: JobClient, job_id: str) -> None:
    status = client.wait(job_id, timeout=240)
    assert status.value == "FINISHED", f"{status.value}: {client.exceptions(job_id).get('root-exception')}"


def test_each_process_binds_its_own_address(hosts) -> None:
    cluster, network = hosts["cluster"], hosts["network"]
    registered = {tm["id"]: tm["path"] for tm in cluster.wait_for_taskmanagers(lambda ids: len(ids) == 2)}
    hosts_seen = {name: address.split("//")[1].rsplit(":", 1)[0] for name, address in registered.items()}
    assert hosts_seen == {"tm1": network.addresses["tm1"], "tm2": network.addresses["tm2"]}
    # Nothing listens on the test's own loopback: the REST API is reachable only through
    # the bridge, at the JobManager's private address.
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{cluster.rest_port}/overview", timeout=2, **cluster.http_options())


def test_word_count_across_taskmanagers_without_a_shared_data_dir(hosts) -> None:
    cluster, work = hosts["cluster"], hosts["work"]
    expected = write_corpus(work / "corpus", files=4, lines=2_000)
    output = work / "counts"

    def word_count(config: dict[str, str]) -> Pipeline:
        pipeline = Pipeline("word count on two hosts", parallelism=2, config={**RESTARTS, **config})
        (
            pipeline.read_csv(str(work / "corpus" / "*.csv"), schema="word STRING", header=False, split_size=1)
            .key_by("word")
            .agg("count(*) AS n")
            .write_json(str(output), mode="overwrite")
        )
        return pipeline

    def fetched() -> list[int]:
        return [tm.log().count("Fetched partition") for tm in hosts["tms"].values()]

    def run(config: dict[str, str], parallelism: tuple[int, int]) -> dict[str, list[str]]:
        """Run the count to the expected output with (sources, final) of that parallelism;
        the TaskManager of each subtask, by vertex: "sources" and "final"."""
        with JobClient(cluster.rest_url, timeout=60, token=TOKEN) as client:
            job_id = client.submit(word_count(config).job_graph())
            finished(client, job_id)
            details = client.details(job_id)
        assert read_counts(output) == dict(expected)
        vertices = sorted(details["vertices"], key=lambda v: not v["name"].startswith("Read CSV"))
        assert tuple(vertex["parallelism"] for vertex in vertices) == parallelism
        with httpx.Client(timeout=10, **cluster.http_options()) as http:
            return {
                name: [
                    subtask["taskmanager-id"]
                    for subtask in http.get(f"{cluster.rest_url}/jobs/{job_id}/vertices/{vertex['id']}").json()[
                        "subtasks"
                    ]
                ]
                for name, vertex in zip(("sources", "final"), vertices, strict=True)
            }

    # A final aggregate of two subtasks (1 KiB of input each is plenty for this corpus).
    placed = run({"execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "1 kb"}, (2, 2))
    # Both TaskManagers ran subtasks, and partitions crossed between them over the network.
    assert set(placed["sources"]) == {"tm1", "tm2"}
    before = fetched()
    assert all(count > 0 for count in before), f"partitions fetched per TaskManager: {before}"

    # Left to the scheduler, this corpus needs one final subtask: it reads both
    # subpartitions of the other TaskManager's source partition over the network.
    placed = run({}, (2, 1))
    (reader,) = placed["final"]
    remote = sum(tm != reader for tm in placed["sources"])
    added = {name: now - then for name, now, then in zip(hosts["tms"], fetched(), before, strict=True)}
    # Two subpartitions of each source partition produced on the other TaskManager.
    assert added == {name: 2 * remote if name == reader else 0 for name in hosts["tms"]}, (placed, added)
    assert not (work / "jm-data").exists() or not any((work / "jm-data").rglob("_COMMITTED.json"))


def test_builtin_invokables_fetch_json_lines_partitions(hosts) -> None:
    """The runtime's own invokables write JSON-lines partitions: they travel the same way."""
    cluster, work = hosts["cluster"], hosts["work"]
    graph = modulo_sum_job(work / "sums", count=20_000, modulo=7)
    graph.config.update(RESTARTS)
    with JobClient(cluster.rest_url, timeout=60, token=TOKEN) as client:
        finished(client, client.submit(graph))
    records = [r for path in (work / "sums").glob("part-*.json") for r in json.loads(path.read_text())]
    expected = {k: sum(n for n in range(20_000) if n % 7 == k) for k in range(7)}
    assert {r["key"]: r["sum"] for r in records} == expected and len(records) == 7


def two_sources_one_held(work: Path, name: str, output: Path) -> Any:
    """Source A (two files) and source B (one file, held by wait_for_release until the
    marker `release` exists), unioned and counted; each vertex in a slot of its own, so
    with one slot per TaskManager A and B run on different hosts."""
    pipeline = Pipeline(name, parallelism=1, config=dict(RESTARTS))
    a = pipeline.read_csv(str(work / "corpus-a" / "*.csv"), schema="word STRING", header=False)
    b = pipeline.read_csv(str(work / "corpus-b" / "*.csv"), schema="word STRING", header=False).transform(
        "tests.helpers.transforms:wait_for_release"
    )
    a.union(b).key_by("word").agg("count(*) AS n").write_json(str(output), mode="overwrite")
    graph = pipeline.job_graph()
    for vertex in graph.vertices:
        vertex.slot_sharing_group = None
    return graph


def write_two_corpora(work: Path) -> collections.Counter[str]:
    """corpus-a (two files) and corpus-b (one file) under `work`: what two_sources_one_held reads."""
    expected = write_corpus(work / "corpus-a", files=2, lines=1_500)
    return expected + write_corpus(work / "corpus-b", files=1, lines=1_000, offset=5)


def submit_until_source_a_finished(
    cluster: StandaloneCluster, client: JobClient, http: httpx.Client, graph: Any
) -> tuple[str, Any]:
    """Submit a two_sources_one_held job and wait until source A finished; returns its id
    and a function reading source A's subtask (REST)."""
    source_a = graph.vertices[0].id
    job_id = client.submit(graph)

    def source_a_subtask() -> dict[str, Any]:
        return http.get(f"{cluster.rest_url}/jobs/{job_id}/vertices/{source_a}").json()["subtasks"][0]

    eventually(lambda: source_a_subtask()["status"] == "FINISHED", timeout=120, what="source A to finish")
    return job_id, source_a_subtask


def test_a_partition_lost_with_its_taskmanager_is_recomputed(hosts) -> None:
    """Source A finishes on one TaskManager, which is killed before the consumer (which
    waits for the slower source B) fetches A's partition: A runs again elsewhere."""
    cluster, network, work, markers = hosts["cluster"], hosts["network"], hosts["work"], hosts["markers"]
    expected = write_two_corpora(work)
    output = work / "counts-after-loss"
    graph = two_sources_one_held(work, "word count losing a host", output)
    with (
        JobClient(cluster.rest_url, timeout=60, token=TOKEN) as client,
        httpx.Client(timeout=10, **cluster.http_options()) as http,
    ):
        job_id, source_a_subtask = submit_until_source_a_finished(cluster, client, http, graph)
        first = source_a_subtask()
        producer_tm = first["taskmanager-id"]
        survivor = "tm2" if producer_tm == "tm1" else "tm1"
        hosts["tms"][producer_tm].kill()
        cluster.wait_for_taskmanagers(lambda ids: producer_tm not in ids, timeout=60)
        markers.mkdir(parents=True, exist_ok=True)
        (markers / "release").touch()
        finished(client, job_id)
        history = client.exceptions(job_id)
        rerun = source_a_subtask()
    assert read_counts(output) == dict(expected)
    assert rerun["taskmanager-id"] == survivor and rerun["attempt-id"] != first["attempt-id"], rerun
    causes = json.dumps(history)
    assert "PartitionUnreachableError" in causes and "Its producer runs again" in causes, causes[:2000]
    # The host comes back for whatever runs after.
    hosts["tms"][producer_tm] = start_taskmanager(cluster, network, work, producer_tm)


def test_a_savepoint_holds_the_partitions_taskmanagers_serve(hosts) -> None:
    """A savepoint taken after source A finished, while B still runs: A's partition is
    on A's TaskManager only (the JobManager cannot see that data directory), so the
    JobManager fetches it from there into the savepoint. The job resumed from the
    savepoint does not run A again, and counts exactly."""
    cluster, work, markers = hosts["cluster"], hosts["work"] / "savepoint", hosts["markers"]
    (markers / "release").unlink(missing_ok=True)  # an earlier test released its source
    expected = write_two_corpora(work)
    output = work / "counts"
    graph = two_sources_one_held(work, "word count saved mid-way", output)
    with (
        JobClient(cluster.rest_url, timeout=60, token=TOKEN) as client,
        httpx.Client(timeout=10, **cluster.http_options()) as http,
    ):
        job_id, _ = submit_until_source_a_finished(cluster, client, http, graph)
        location = client.savepoint(job_id, str(work / "savepoints"), cancel_job=True, timeout=120)
        assert client.wait(job_id, timeout=60).value == "CANCELED"
        markers.mkdir(parents=True, exist_ok=True)
        (markers / "release").touch()

        resumed = two_sources_one_held(work, "word count resumed", output)
        resumed.config["execution.savepoint.path"] = location
        resumed_id = client.submit(resumed)
        finished(client, resumed_id)
    assert read_counts(output) == dict(expected)
    # A's partition is inside the savepoint, not only on the TaskManager that served it.
    assert list((Path(location) / "data").rglob("_chunk.json")), sorted(Path(location).rglob("*"))[:20]
    jobmanager_log = cluster.jobmanager.log()
    assert "1 finished subtasks not run again" in jobmanager_log, jobmanager_log[-3000:]


def test_a_recovery_from_a_checkpoint_redoes_work_whose_chunks_a_taskmanager_held(hosts) -> None:
    """Checkpoints copy nothing, and the JobManager cannot see a TaskManager's data
    directory: a checkpoint taken after source A finished must not record A as done.
    The JobManager is killed (SIGKILL) and started again in its namespace; the job it
    recovers from that checkpoint runs A again and counts exactly."""
    cluster, network, work, markers = hosts["cluster"], hosts["network"], hosts["work"] / "recovery", hosts["markers"]
    (markers / "release").unlink(missing_ok=True)
    expected = write_two_corpora(work)
    output = work / "counts"
    graph = two_sources_one_held(work, "word count recovered from a checkpoint", output)
    graph.config.update({"execution.checkpointing.interval": "1 s", "state.checkpoints.dir": str(work / "chk")})
    with (
        JobClient(cluster.rest_url, timeout=60, token=TOKEN) as client,
        httpx.Client(timeout=10, **cluster.http_options()) as http,
    ):
        job_id, _ = submit_until_source_a_finished(cluster, client, http, graph)
        taken = client.checkpoints(job_id)["counts"]["completed"]
        eventually(
            lambda: client.checkpoints(job_id)["counts"]["completed"] >= taken + 2,
            timeout=60,
            what="two checkpoints after source A finished",
        )
    cluster.jobmanager.kill()
    cluster.start_jobmanager(prefix=network.prefix("jm"))
    markers.mkdir(parents=True, exist_ok=True)
    (markers / "release").touch()
    with JobClient(cluster.rest_url, timeout=60, token=TOKEN) as client:
        finished(client, job_id)
    assert read_counts(output) == dict(expected)
    jobmanager_log = cluster.jobmanager.log()
    assert "0 finished subtasks not run again" in jobmanager_log, jobmanager_log[-3000:]


def test_namespaces_left_by_a_killed_run_are_cleaned_up(network: netns.Network) -> None:
    """A run killed before its clean-up must not break the next: its namespaces (named
    after a process that is gone) are removed when the next network comes up."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = f"frt-{gone.pid}-jm"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        assert stale in netns.clean_stale()
        assert stale not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        # The live network of this module is left alone.
        assert all(ns not in netns.clean_stale() for ns in network.namespaces.values())
    finally:
        subprocess.run(["ip", "netns", "delete", stale], capture_output=True)
