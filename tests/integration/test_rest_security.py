"""The REST API with a token and TLS, as a deployment runs it: a JobManager that listens
on every interface, TaskManagers that download a job's library over HTTPS with the
token, and the outside clients (JobClient, the CLI, raw httpx) with and without it.
And the Host check (no DNS rebinding) on the default cluster, a MiniCluster on loopback
without a token, driven as a rebound web page would drive it."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.client.job_client import ClusterUnreachable
from flink_runtime.client.local_cluster import StandaloneCluster, free_ports
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.minicluster import MiniCluster
from flink_runtime.security import trust
from tests.conftest import fast_config
from tests.helpers.jobs import sleep_job
from tests.helpers.tls import self_signed_certificate

pytestmark = pytest.mark.integration

TOKEN = "integration-t0ken"
S3_SECRET = "s3-secret-value"

TOUCH = """\
from flink_runtime.invokable import AbstractInvokable


class Touch(AbstractInvokable):
    def invoke(self):
        with open(self.environment.config["path"], "w") as marker:
            marker.write("ran")
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    work = tmp_path_factory.mktemp("rest-security")
    certificate, key = self_signed_certificate(work / "tls")
    token_file = work / "token"
    token_file.write_text(TOKEN + "\n")
    properties = {
        "rest.bind-address": "0.0.0.0",
        "security.rest.token-file": str(token_file),
        "security.ssl.rest.enabled": "true",
        "security.ssl.rest.certificate": str(certificate),
        "security.ssl.rest.key": str(key),
        "security.ssl.rest.truststore": str(certificate),
        "heartbeat.interval": "500 ms",
        "heartbeat.timeout": "5 s",
        "spark.hadoop.fs.s3a.secret.key": S3_SECRET,
    }
    with StandaloneCluster(work / "cluster", properties=properties) as standalone:
        standalone.start(taskmanagers=1, slots=2)
        yield standalone


@pytest.fixture
def client(cluster: StandaloneCluster) -> Iterator[JobClient]:
    with JobClient(
        cluster.rest_url, token=TOKEN, verify=trust(cluster.properties["security.ssl.rest.truststore"])
    ) as c:
        yield c


def test_the_rest_api_is_https(cluster: StandaloneCluster) -> None:
    assert cluster.rest_url.startswith("https://")
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{cluster.rest_url}/overview", headers={"Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(cluster.rest_url.replace("https://", "http://") + "/overview")


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}"], ids=["none", "wrong", "basic"])
def test_without_the_token_nothing_is_answered_or_changed(
    cluster: StandaloneCluster, client: JobClient, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    verify = trust(cluster.properties["security.ssl.rest.truststore"])
    for method, path, body in (
        ("GET", "/overview", None),
        ("GET", "/jobmanager/config", None),
        ("POST", "/jobs", sleep_job(0.1).to_json()),
    ):
        answer = httpx.request(
            method,
            f"{cluster.rest_url}{path}",
            content=body,
            headers={**headers, "Content-Type": "application/json"},
            verify=verify,
        )
        assert answer.status_code == 401, (method, path, answer.text)
        assert answer.json()["errors"]
    assert all(job["name"] != "sleeper" for job in client.list_jobs())  # the refused submission created nothing


def is_spark_jvm(process: psutil.Process) -> bool:
    try:
        return "SparkSubmit" in " ".join(process.cmdline())
    except psutil.NoSuchProcess:
        return False


def test_a_job_library_reaches_the_taskmanager_over_https_with_the_token(
    cluster: StandaloneCluster, client: JobClient, tmp_path: Path
) -> None:
    library = tmp_path / "secured_touch.py"
    library.write_text(TOUCH)
    marker = tmp_path / "ran"
    graph = JobGraph(
        name="library over https",
        vertices=[JobVertex(id="t", name="Touch", invokable="secured_touch:Touch", config={"path": str(marker)})],
        libraries=[str(library)],
    )
    job_id = client.submit(graph)
    assert client.wait(job_id, timeout=180) is JobStatus.FINISHED, client.exceptions(job_id)
    assert marker.read_text() == "ran"
    # A library reaches Spark's executors only when a task asks for its SparkSession: this
    # job's plain invokable started no Spark JVM in the planner or the TaskManager.
    for process in (cluster.jobmanager, *cluster.taskmanagers):
        jvms = [p.pid for p in psutil.Process(process.pid).children(recursive=True) if is_spark_jvm(p)]
        assert jvms == [], f"{process.name} started a Spark JVM for a job that uses none: {jvms}"


def test_cross_site_requests_are_refused_even_with_the_token(cluster: StandaloneCluster, client: JobClient) -> None:
    jobs_before = {job["jid"] for job in client.list_jobs()}
    verify = trust(cluster.properties["security.ssl.rest.truststore"])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = sleep_job(0.1).to_json()
    foreign = httpx.post(
        f"{cluster.rest_url}/jobs",
        content=body,
        headers={**auth, "Content-Type": "application/json", "Origin": "https://evil.example"},
        verify=verify,
    )
    assert foreign.status_code == 403
    plain_text = httpx.post(
        f"{cluster.rest_url}/jobs", content=body, headers={**auth, "Content-Type": "text/plain"}, verify=verify
    )
    assert plain_text.status_code == 415
    assert "access-control-allow-origin" not in {name.lower() for name in foreign.headers}
    assert {job["jid"] for job in client.list_jobs()} == jobs_before


def test_secrets_are_masked_in_the_configuration(cluster: StandaloneCluster, client: JobClient) -> None:
    answer = httpx.get(f"{cluster.rest_url}/jobmanager/config", **cluster.http_options())
    shown = {entry["key"]: entry["value"] for entry in answer.json()}
    assert shown["spark.hadoop.fs.s3a.secret.key"] == "******"
    assert S3_SECRET not in answer.text
    assert shown["rest.bind-address"] == "0.0.0.0"  # ordinary settings stay readable


def test_the_cli_sends_the_token(cluster: StandaloneCluster, tmp_path: Path) -> None:
    truststore = cluster.properties["security.ssl.rest.truststore"]
    command = [sys.executable, "-m", "flink_runtime.client.cli", "list", "-a", "-m", cluster.rest_url]
    trusted = ["-D", f"security.ssl.rest.truststore={truststore}"]

    refused = subprocess.run([*command, *trusted], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert "Authentication required" in refused.stderr and "security.rest.token" in refused.stderr

    listed = subprocess.run([*command, *trusted, "--token", TOKEN], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr

    from_config = subprocess.run(
        [*command, *trusted, "-D", f"security.rest.token-file={cluster.properties['security.rest.token-file']}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert from_config.returncode == 0, from_config.stderr


def test_a_client_that_does_not_trust_the_certificate_is_told_why(cluster: StandaloneCluster) -> None:
    with JobClient(cluster.rest_url, token=TOKEN, retries=0) as untrusting, pytest.raises(ClusterUnreachable) as caught:
        untrusting.list_jobs()
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)


def test_a_wrong_token_is_a_client_error_not_a_retry(cluster: StandaloneCluster) -> None:
    verify = trust(cluster.properties["security.ssl.rest.truststore"])
    with JobClient(cluster.rest_url, token="wrong", verify=verify) as wrong, pytest.raises(RestClientError) as caught:
        wrong.list_jobs()
    assert caught.value.status_code == 401


def test_a_jobmanager_on_every_interface_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    rest_port, rpc_port = free_ports(2)
    command = [
        sys.executable,
        "-m",
        "flink_runtime.client.cli",
        "jobmanager",
        "-D",
        "rest.bind-address=0.0.0.0",
        "-D",
        f"rest.port={rest_port}",
        "-D",
        f"jobmanager.rpc.port={rpc_port}",
        "-D",
        f"jobstore.url=sqlite:///{tmp_path / 'jobstore.db'}",
    ]
    started = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert started.returncode == 2, started.stdout + started.stderr
    assert "security.rest.token" in started.stderr
    assert "security.rest.allow-unauthenticated" in started.stderr
    assert "ready" not in started.stdout


# -- Host: no DNS rebinding --------------------------------------------------------------------------


def test_a_rebound_page_can_neither_submit_nor_read(minicluster: MiniCluster) -> None:
    # What a page at http://evil.example:PORT sends once evil.example resolves to 127.0.0.1:
    # its own name as Host and Origin, a valid JobGraph as JSON.
    url = minicluster.rest_url
    port = url.rsplit(":", 1)[1]
    rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    graph = sleep_job(0.1, name="rebound-submission").to_json()
    answer = httpx.post(f"{url}/jobs", content=graph, headers={**rebound, "Content-Type": "application/json"})
    assert answer.status_code == 403, answer.text
    assert "rest.allowed-hosts" in answer.json()["errors"][0]
    for path in ("/jobs/overview", "/v1/jobmanager/config", "/", "/web/js/app.js"):
        read = httpx.get(f"{url}{path}", headers=rebound)
        assert read.status_code == 403, (path, read.text)
        assert read.json()["errors"]
    with JobClient(url) as client:
        assert all(job["name"] != "rebound-submission" for job in client.list_jobs())
        # The same request from the cluster's own page is accepted: the graph was valid.
        own = {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}", "Content-Type": "application/json"}
        accepted = httpx.post(f"{url}/jobs", content=graph, headers=own)
        assert accepted.status_code == 202, accepted.text
        assert client.wait(accepted.json()["jobid"], timeout=60) is JobStatus.FINISHED


def http10_get(port: int, path: str) -> tuple[int, bytes]:
    """An HTTP/1.0 request with no Host header, as old tools send it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def test_the_names_a_local_cluster_is_reachable_as_are_answered(minicluster: MiniCluster) -> None:
    url = minicluster.rest_url
    port = int(url.rsplit(":", 1)[1])
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", f"127.0.1.1:{port}"):
        answer = httpx.get(f"{url}/overview", headers={"Host": host})
        assert answer.status_code == 200, (host, answer.text)
    status, body = http10_get(port, "/overview")  # no Host at all: not a browser
    assert status == 200 and b"taskmanagers" in body


def test_rest_allowed_hosts_lets_a_load_balancers_name_in(tmp_path: Path) -> None:
    # As an operator sets it: -D with a comma-separated list.
    config = Configuration.load(
        dynamic_properties=["rest.allowed-hosts=flink.lb.example:443, *.svc.example"], environ={}
    )
    with MiniCluster(fast_config(**config.to_dict()), num_taskmanagers=0) as cluster:
        url = cluster.rest_url
        for host, status in (
            ("flink.lb.example:443", 200),
            ("jobmanager.flink.svc.example", 200),
            ("flink.lb.example:8443", 403),  # listed with a port: that port only
            ("evil.example", 403),
        ):
            answer = httpx.get(f"{url}/overview", headers={"Host": host})
            assert answer.status_code == status, (host, answer.text)
        # A load balancer passes the client's Host and Origin on: its page is same-origin.
        lb = {"Host": "flink.lb.example:443", "Origin": "http://flink.lb.example:443"}
        cancel = httpx.patch(f"{url}/jobs/{'0' * 32}?mode=cancel", headers=lb)
        assert cancel.status_code == 404, cancel.text  # past the guard, to the route


def test_a_jobmanager_on_every_interface_answers_its_own_host_name(cluster: StandaloneCluster) -> None:
    # rest.bind-address 0.0.0.0: reached by the machine's name (`jobmanager:8081` from
    # another container), not by any name.
    verify = trust(cluster.properties["security.ssl.rest.truststore"])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    port = cluster.rest_port
    own = httpx.get(
        f"{cluster.rest_url}/overview", headers={**auth, "Host": f"{socket.gethostname()}:{port}"}, verify=verify
    )
    assert own.status_code == 200, own.text
    foreign = httpx.get(f"{cluster.rest_url}/overview", headers={**auth, "Host": f"evil.example:{port}"}, verify=verify)
    assert foreign.status_code == 403 and "rest.allowed-hosts" in foreign.json()["errors"][0]
