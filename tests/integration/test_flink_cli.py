"""Apache Flink's own CLI (`bin/flink` of the apache-flink 2.3 wheel) against a MiniCluster.

The proof that our REST API follows Flink's: its real client lists, savepoints, stops,
cancels and checkpoints our jobs, and says why when it cannot. What each verb prints on
success is taken from tests/flink_reference/recorded/cli_requests.json, a recording of
the same commands against a real Flink 2.3 cluster.

The wheel is installed once per machine into a cached virtualenv (tests/flink_tools.py);
if that fails, the tests fail with the reason: they never skip. Each CLI call starts a
JVM (~3-4 s), so the module shares one cluster and one long-running job where a verb
does not end it.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from flink_runtime.client import JobClient
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline
from tests.conftest import fast_config
from tests.flink_tools import FlinkToolError, flink_cli, flink_home, flink_python, java_home, private_conf_dir
from tests.helpers.jobs import sleep_job
from tests.integration.test_continuous_sources import wait_for_counts
from tests.integration.test_savepoints import write_corpus

pytestmark = pytest.mark.integration

UNKNOWN_JOB = "0123456789abcdef0123456789abcdef"
TOKEN = "flink-cli-test-token"
# A refusal must come back as fast as the JVM starts, not after the CLI's 60 s client timeout.
QUICK = 20.0
# What `flink list` prints per job: "23.11.2026 07:05:57 : <jid> : <name> (<STATE>)".
LIST_LINE = r"^(\d\d\.\d\d\.\d{{4}} \d\d:\d\d:\d\d) : {jid} : {name} \({state}\)$"


@dataclass
class Cli:
    home: Path
    conf: Path
    address: str  # host:port for -m

    def __call__(self, *args: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> Run:
        began = time.monotonic()
        done = flink_cli(self.home, list(args), self.address, timeout=timeout, conf_dir=self.conf, env=env)
        return Run(done, time.monotonic() - began)


@dataclass
class Run:
    done: subprocess.CompletedProcess[str]
    seconds: float

    @property
    def code(self) -> int:
        return self.done.returncode

    @property
    def output(self) -> str:
        return self.done.stdout + self.done.stderr

    @property
    def why(self) -> str:
        """For a failing assertion: the command, its exit, and its output without stack frames."""
        lines = [line for line in self.output.splitlines() if not line.startswith(("\tat ", "\t... "))]
        text = "\n".join(lines)
        return f"`{' '.join(self.done.args)}` exited {self.code} after {self.seconds:.1f} s:\n{text}"


def host_port(rest_url: str) -> str:
    return rest_url.split("://", 1)[1].rstrip("/")


def local_path(location: str) -> Path:
    """A path as the CLI prints it (`file:/tmp/x`, `file:///tmp/x` or `/tmp/x`)."""
    return Path(re.sub(r"^file:(//)?", "", location))


@pytest.fixture(scope="module")
def home() -> Path:
    try:
        java_home()
        return flink_home()
    except FlinkToolError as exc:
        pytest.fail(f"Flink's CLI is not available: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flink-cli")
    return {name: root / name for name in ("data", "savepoints", "checkpoints", "in", "out", "conf")}


@pytest.fixture(scope="module")
def cluster(dirs: dict[str, Path]) -> Iterator[MiniCluster]:
    config = fast_config(
        **{
            "io.tmp.dirs": str(dirs["data"]),
            "state.savepoints.dir": str(dirs["savepoints"]),
            "state.checkpoints.dir": str(dirs["checkpoints"]),
        }
    )
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=4) as minicluster:
        yield minicluster


@pytest.fixture(scope="module")
def client(cluster: MiniCluster) -> Iterator[JobClient]:
    with JobClient(cluster.rest_url, timeout=30) as job_client:
        yield job_client


@pytest.fixture(scope="module")
def flink(home: Path, cluster: MiniCluster, dirs: dict[str, Path]) -> Cli:
    return Cli(home, private_conf_dir(home, into=dirs["conf"]), host_port(cluster.rest_url))


def continuous_job(input_dir: Path, output: Path, name: str) -> JobGraph:
    """A continuous word count: it keeps RUNNING, in rounds, until stopped or cancelled."""
    pipeline = Pipeline(name, parallelism=1)
    (
        pipeline.read_text(str(input_dir / "*.txt"), split_size=1, monitor_interval=0.3)
        .select("explode(split(value, ' ')) AS word")
        .key_by("word")
        .agg("count(*) AS n")
        .write_parquet(str(output), mode="overwrite")
    )
    return pipeline.job_graph()


def start_continuous(client: JobClient, root: Path, name: str) -> str:
    """Submit a continuous job and wait until it processed its first file."""
    counts = write_corpus(root / "in", files=1)
    job_id = client.submit(continuous_job(root / "in", root / "out", name))
    wait_for_counts(root / "out", dict(counts))
    assert client.status(job_id).value == "RUNNING"
    return job_id


@pytest.fixture(scope="module")
def streaming(client: JobClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(job id, name) of a continuous job that the module's read-only verbs share."""
    name = "cli streaming"
    job_id = start_continuous(client, tmp_path_factory.mktemp("streaming"), name)
    yield job_id, name
    if not client.status(job_id).is_terminal:
        client.cancel(job_id)


def wait_for(client: JobClient, job_id: str, state: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while (now := client.status(job_id).value) != state and time.monotonic() < deadline:
        time.sleep(0.1)
    return now


# -- list ------------------------------------------------------------------------------------------


def test_list_shows_the_running_job(flink: Cli, streaming: tuple[str, str]) -> None:
    job_id, name = streaming
    run = flink("list")
    assert run.code == 0, run.why
    assert "------------------ Running/Restarting Jobs -------------------" in run.output, run.why
    line = re.search(LIST_LINE.format(jid=job_id, name=re.escape(name), state="RUNNING"), run.output, re.M)
    assert line, run.why
    # The start time is Flink's epoch milliseconds: seconds would print a date in 1970.
    started = datetime.strptime(line.group(1), "%d.%m.%Y %H:%M:%S")
    assert abs((datetime.now() - started).total_seconds()) < 24 * 3600, run.why
    assert "No scheduled jobs." in run.output, run.why


def test_list_running_only(flink: Cli, streaming: tuple[str, str]) -> None:
    job_id, name = streaming
    run = flink("list", "-r")
    assert run.code == 0, run.why
    assert re.search(LIST_LINE.format(jid=job_id, name=re.escape(name), state="RUNNING"), run.output, re.M), run.why
    assert "Scheduled Jobs" not in run.output and "Terminated Jobs" not in run.output, run.why


def test_list_scheduled_only(flink: Cli, streaming: tuple[str, str]) -> None:
    run = flink("list", "-s")
    assert run.code == 0, run.why
    assert "No scheduled jobs." in run.output, run.why
    assert streaming[0] not in run.output, run.why


# -- savepoint, checkpoint -------------------------------------------------------------------------


def test_savepoint_prints_its_path_and_writes_it(flink: Cli, streaming: tuple[str, str], tmp_path: Path) -> None:
    job_id, _ = streaming
    run = flink("savepoint", job_id, str(tmp_path / "savepoints"))
    assert run.code == 0, run.why
    assert f"Triggering savepoint for job {job_id}." in run.output, run.why
    path = re.search(r"^Savepoint completed\. Path: (\S+)$", run.output, re.M)
    assert path, run.why
    assert local_path(path.group(1)).parent == tmp_path / "savepoints", run.why
    assert (local_path(path.group(1)) / "_metadata").is_file(), run.why
    assert "You can resume your program from this savepoint with the run command." in run.output, run.why


def test_savepoint_to_the_clusters_default_directory(
    flink: Cli, streaming: tuple[str, str], dirs: dict[str, Path]
) -> None:
    job_id, _ = streaming
    run = flink("savepoint", job_id)
    assert run.code == 0, run.why
    path = re.search(r"^Savepoint completed\. Path: (\S+)$", run.output, re.M)
    assert path, run.why
    assert local_path(path.group(1)).parent == dirs["savepoints"], run.why
    assert (local_path(path.group(1)) / "_metadata").is_file(), run.why


def test_a_savepoint_that_cannot_be_written_fails_quickly_with_the_reason(
    flink: Cli, client: JobClient, streaming: tuple[str, str]
) -> None:
    job_id, _ = streaming
    run = flink("savepoint", job_id, "file:///proc/nope", timeout=90)
    assert run.code != 0, run.why
    assert f"Failed to trigger a savepoint for the job {job_id}." in run.output, run.why
    assert "/proc/nope" in run.output, run  # the reason: where it could not write
    assert run.seconds < QUICK, run.why
    assert client.status(job_id).value == "RUNNING"


def writable_but_too_deep(root: Path) -> Path:
    """A directory that takes the JobManager's write probe (`<dir>/.probe-xxxxxxxx`) but not
    a savepoint (`<dir>/.savepoint-<6>-<12>.inprogress/...`): its path is 4070 of the 4095
    bytes Linux allows, so the savepoint fails after its trigger was accepted, as a full
    disk or a lost mount would, and even for root (who may write anywhere)."""
    deep = root / "deep"
    while len(str(deep)) < 4070 - 201:
        deep = deep / ("d" * 200)
    deep = deep / ("e" * (4070 - len(str(deep)) - 1))
    deep.mkdir(parents=True)
    return deep


@pytest.mark.parametrize("verb", ["savepoint", "stop"])
def test_a_savepoint_that_fails_after_its_trigger_fails_quickly_with_the_reason(
    flink: Cli, client: JobClient, streaming: tuple[str, str], tmp_path: Path, verb: str
) -> None:
    """Accepted (202), then failed: the CLI reads the reason from the operation's
    `failure-cause`, which it decodes from its `serialized-throwable` only."""
    job_id, _ = streaming
    target = str(writable_but_too_deep(tmp_path))
    args = ["savepoint", job_id, target] if verb == "savepoint" else ["stop", "--savepointPath", target, job_id]
    run = flink(*args, timeout=120)
    assert run.code != 0, run.why
    headline = {
        "savepoint": f"Failed to trigger a savepoint for the job {job_id}.",
        "stop": f'Could not stop with a savepoint job "{job_id}".',
    }[verb]
    assert headline in run.output, run.why
    assert "File name too long" in run.output, run.why  # the reason, not the CLI's timeout
    assert run.seconds < QUICK, run.why
    assert client.status(job_id).value == "RUNNING"  # as in Flink, a failed stop leaves it running


@pytest.mark.parametrize("full", [False, True], ids=["configured", "full"])
def test_checkpoint_prints_the_completed_checkpoint(
    flink: Cli, client: JobClient, streaming: tuple[str, str], full: bool
) -> None:
    job_id, _ = streaming
    run = flink("checkpoint", *(["--full"] if full else []), job_id)
    assert run.code == 0, run.why
    assert f"Triggering checkpoint for job {job_id}." in run.output, run.why
    kind = r"Checkpoint\(FULL\)" if full else "Checkpoint"
    done = re.search(rf"^{kind} (\d+) for job {job_id} completed\.$", run.output, re.M)
    assert done, run.why
    completed = {c["id"] for c in client.checkpoints(job_id)["history"] if c["status"] == "COMPLETED"}
    assert int(done.group(1)) in completed, (run.why, completed)


# -- stop, cancel ----------------------------------------------------------------------------------


@pytest.mark.parametrize("drain", [False, True], ids=["suspend", "drain"])
def test_stop_with_a_savepoint_path_finishes_the_job(
    flink: Cli, client: JobClient, tmp_path: Path, drain: bool
) -> None:
    job_id = start_continuous(client, tmp_path, f"cli stop {'drain' if drain else 'suspend'}")
    target = f"file://{tmp_path / 'savepoints'}"
    run = flink("stop", *(["--drain"] if drain else []), "--savepointPath", target, job_id)
    assert run.code == 0, run.why
    verb = "Draining" if drain else "Suspending"
    assert f'{verb} job "{job_id}" with a CANONICAL savepoint.' in run.output, run.why
    path = re.search(r"^Savepoint completed\. Path: (\S+)$", run.output, re.M)
    assert path, run.why
    assert local_path(path.group(1)).parent == tmp_path / "savepoints", run.why
    assert (local_path(path.group(1)) / "_metadata").is_file(), run.why
    assert wait_for(client, job_id, "FINISHED") == "FINISHED"
    # The stopped job's vertices keep the records they read and wrote (issue 27).
    metrics = [vertex["metrics"] for vertex in client.details(job_id)["vertices"]]
    assert sum(m["write-records"] for m in metrics) > 0 and sum(m["read-records"] for m in metrics) > 0, metrics


def test_cancel_cancels_the_job(flink: Cli, client: JobClient) -> None:
    job_id = client.submit(sleep_job(600, name="cli cancel"))
    assert wait_for(client, job_id, "RUNNING") == "RUNNING"
    run = flink("cancel", job_id)
    assert run.code == 0, run.why
    assert f"Cancelling job {job_id}." in run.output and f"Cancelled job {job_id}." in run.output, run.why
    assert wait_for(client, job_id, "CANCELED") == "CANCELED"


def test_list_all_shows_terminated_jobs(flink: Cli, client: JobClient, streaming: tuple[str, str]) -> None:
    graph = JobGraph(name="cli finished", vertices=[JobVertex(id="n", name="Noop", invokable="noop")])
    finished = client.submit(graph)
    assert client.wait(finished, timeout=60).value == "FINISHED"
    run = flink("list", "-a")
    assert run.code == 0, run.why
    running, _, terminated = run.output.partition("---------------------- Terminated Jobs -----------------------")
    assert terminated, run.why
    job_id, name = streaming
    assert re.search(LIST_LINE.format(jid=job_id, name=re.escape(name), state="RUNNING"), running, re.M), run.why
    assert re.search(LIST_LINE.format(jid=finished, name="cli finished", state="FINISHED"), terminated, re.M), run.why


# -- refusals --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verb", "headline"),
    [
        ("savepoint", f"Failed to trigger a savepoint for the job {UNKNOWN_JOB}."),
        ("cancel", f"Could not cancel job {UNKNOWN_JOB}."),
        ("stop", f'Could not stop with a savepoint job "{UNKNOWN_JOB}".'),
    ],
)
def test_an_unknown_job_fails_quickly_and_says_so(flink: Cli, verb: str, headline: str) -> None:
    run = flink(verb, UNKNOWN_JOB, timeout=90)
    assert run.code != 0, run.why
    assert headline in run.output, run.why
    # The cause the server gave, not a timeout or a parse error of its answer.
    assert re.search(r"not (be )?found", run.output, re.I), run.why
    assert "TimeoutException" not in run.output, run.why
    assert run.seconds < QUICK, run.why


# -- flink run: a Java program cannot run here, and the CLI is told why ----------------------------

PYFLINK_JOB = """\
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).print()
env.execute("pyflink job")
"""
# `flink run -py` starts Python, a JVM gateway for it and the CLI's own JVM before it submits
# anything (17-23 s on a loaded 2-core machine, 45.5 s once at a load of 13); what it must not
# do is retry its upload for 96 s and end in "Channel became inactive", as it did when the
# answer came before the body.
RUN_PY_BUDGET = 75.0


def test_run_py_prints_why_a_java_job_graph_cannot_run(flink: Cli, tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(PYFLINK_JOB)
    python = str(flink_python())
    run = flink("run", "-py", str(job), "-pyexec", python, "-pyclientexec", python, timeout=180)
    assert run.code != 0, run.why
    assert "cannot run a Java-serialized JobGraph or JARs" in run.output, run.why
    assert "flink-runtime run job.json" in run.output, run.why  # what to use instead
    assert "Channel became inactive" not in run.output, run.why
    assert run.seconds < RUN_PY_BUDGET, run.why


# -- a cluster with a REST token -------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(home: Path, dirs: dict[str, Path]) -> Iterator[Cli]:
    """Flink's CLI for a second MiniCluster, one whose REST API takes a bearer token."""
    config = fast_config(**{"io.tmp.dirs": str(dirs["data"] / "guarded"), "security.rest.token": TOKEN})
    with MiniCluster(config, num_taskmanagers=1, slots_per_taskmanager=1) as minicluster:
        yield Cli(home, private_conf_dir(home, into=dirs["conf"] / "guarded"), host_port(minicluster.rest_url))


def test_without_the_token_the_cli_is_told_authentication_is_required(guarded: Cli) -> None:
    run = guarded("list", timeout=90)
    assert run.code != 0, run.why
    assert "401" in run.output or "Authentication required" in run.output, run.why
    assert "security.rest.token" in run.output, run.why
    assert run.seconds < QUICK, run.why


def test_the_cli_sends_the_token_from_flink_rest_client_headers(guarded: Cli) -> None:
    """Flink's RestClusterClient adds the headers of $FLINK_REST_CLIENT_HEADERS (one
    `Name:value` a line) to every request (ClientUtils.readHeadersFromEnvironmentVariable);
    there is no configuration key for them."""
    run = guarded("list", "-a", env={"FLINK_REST_CLIENT_HEADERS": f"Authorization:Bearer {TOKEN}"})
    assert run.code == 0, run.why
    assert "No running jobs." in run.output, run.why
