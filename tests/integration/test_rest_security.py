"""The REST API with a token and TLS, as a deployment runs it: a JobManager that listens
on every interface, TaskManagers that download a job's library over HTTPS with the
token, and the outside clients (JobClient, the CLI, raw httpx) with and without it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.client.job_client import ClusterUnreachable
from flink_runtime.client.local_cluster import StandaloneCluster, free_ports
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.security import trust
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


def test_a_job_library_reaches_the_taskmanager_over_https_with_the_token(client: JobClient, tmp_path: Path) -> None:
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
