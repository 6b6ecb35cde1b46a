"""Job libraries end to end: the client uploads them, TaskManagers download and import them.

Every test names its library's module uniquely: the MiniCluster shares this process,
and a module once imported stays imported.
"""

from __future__ import annotations

import hashlib
import json
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flink_runtime import configuration as cfg
from flink_runtime.client import JobClient, RestClientError
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.jobgraph import JobGraph
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline

pytestmark = pytest.mark.integration

SHOUTING = """\
def shout(df):
    return df.selectExpr("upper(value) AS value")
"""

# A Python UDF: Spark pickles `_exclaim` by reference, so the executors' Python workers
# must import this module themselves (the library registered with Spark).
EXCLAIMING = """\
from pyspark.sql import functions as F


def _exclaim(text):
    return text.upper() + "!"


def exclaim(df):
    return df.select(F.udf(_exclaim, "string")("value").alias("value"))
"""


@pytest.fixture
def client(minicluster: MiniCluster) -> Iterator[JobClient]:
    # The JobManager checks a plan with Spark before it answers a submission; a cold
    # SparkSession (~10 s) would outlast rest.submit.wait-timeout and turn "refused" into
    # "accepted, failed later".
    assert minicluster.jobmanager is not None
    minicluster.jobmanager.spark()
    # Needs the JobManager to answer registrations with its REST URL (rest_url=...).
    assert all(tm.jobmanager_rest_url == minicluster.rest_url for tm in minicluster.taskmanagers), (
        "TaskManagers did not learn the JobManager's REST URL at registration"
    )
    with JobClient(minicluster.rest_url, timeout=30) as job_client:
        yield job_client


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def text_input(tmp_path: Path) -> Path:
    source = tmp_path / "in"
    source.mkdir(parents=True)
    (source / "a.txt").write_text("hello\nworld\n")
    (source / "b.txt").write_text("flink on spark\n")
    return source


def job(tmp_path: Path, function: str, libraries: list[str]) -> JobGraph:
    p = Pipeline("shout", parallelism=2, libraries=libraries)
    p.read_text(str(text_input(tmp_path))).transform(function).write_json(str(tmp_path / "out"))
    return p.job_graph()


def output_values(out: Path) -> list[str]:
    lines = [line for part in out.glob("*.json") for line in part.read_text().splitlines() if line]
    return sorted(json.loads(line)["value"] for line in lines)


def downloaded(minicluster: MiniCluster, library: Path) -> Path:
    sha = hashlib.sha256(library.read_bytes()).hexdigest()
    return Path(minicluster.config.get(cfg.IO_TMP_DIRS)) / "blobs" / sha / library.name


def test_a_zip_library_is_shipped_to_the_taskmanagers(
    client: JobClient, minicluster: MiniCluster, tmp_path: Path
) -> None:
    package = unique("mylib")
    library = tmp_path / "mylib.zip"
    with zipfile.ZipFile(library, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "")
        archive.writestr(f"{package}/shouting.py", SHOUTING)

    # Without the library the JobManager cannot import the function: refused at submit.
    with pytest.raises(RestClientError) as refused:
        client.submit(job(tmp_path / "without", f"{package}.shouting:shout", libraries=[]))
    assert refused.value.status_code == 400
    assert f"{package}.shouting" in str(refused.value)

    graph = job(tmp_path / "with", f"{package}.shouting:shout", libraries=[str(library)])
    job_id = client.submit(graph)
    assert client.wait(job_id, timeout=120) is JobStatus.FINISHED, client.exceptions(job_id)
    assert output_values(tmp_path / "with" / "out") == ["FLINK ON SPARK", "HELLO", "WORLD"]
    assert graph.libraries == [str(library)]  # the client sent a copy with the blob key
    assert downloaded(minicluster, library).read_bytes() == library.read_bytes()


def test_a_py_library_with_a_udf_is_importable_on_the_executors(
    client: JobClient, minicluster: MiniCluster, tmp_path: Path
) -> None:
    module = unique("exclaiming")
    library = tmp_path / f"{module}.py"
    library.write_text(EXCLAIMING)

    job_id = client.submit(job(tmp_path, f"{module}:exclaim", libraries=[str(library)]))
    assert client.wait(job_id, timeout=120) is JobStatus.FINISHED, client.exceptions(job_id)
    assert output_values(tmp_path / "out") == ["FLINK ON SPARK!", "HELLO!", "WORLD!"]
    assert downloaded(minicluster, library).exists()


def test_an_uploaded_library_is_served_by_its_key(client: JobClient, minicluster: MiniCluster, tmp_path: Path) -> None:
    library = tmp_path / "tiny.py"
    library.write_text("X = 1\n")
    key = client.upload_library(library)
    assert key == f"blob:{hashlib.sha256(library.read_bytes()).hexdigest()}/tiny.py"
    assert client.upload_library(library) == key  # idempotent
    answer = httpx.get(f"{minicluster.rest_url}/blobs/{key.removeprefix('blob:')}")
    assert answer.status_code == 200
    assert answer.content == library.read_bytes()
