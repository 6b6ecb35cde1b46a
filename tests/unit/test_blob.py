"""Job libraries: the JobManager's blob store, its REST endpoints, the client's uploads,
downloading and activating libraries where tasks run."""

from __future__ import annotations

import hashlib
import http.server
import importlib
import io
import json
import os
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from flink_runtime.blob import (
    BlobKey,
    BlobServer,
    BlobStore,
    InvalidBlob,
    LibraryError,
    activate_libraries,
    activate_libraries_lazily,
    parse_blob_key,
)
from flink_runtime.blob import libraries as libraries_module
from flink_runtime.blob.store import BlobStoreFull
from flink_runtime.client import JobClient
from flink_runtime.configuration import Configuration
from flink_runtime.executiongraph.states import ExecutionState
from flink_runtime.jobgraph import JobGraph, JobVertex
from flink_runtime.rest.app import create_app
from flink_runtime.rpc.messages import AcknowledgeRegistration, AlreadyRegistered, TaskDeploymentDescriptor
from flink_runtime.taskmanager.task import Task, blob_cache_dir_for

# -- helpers -------------------------------------------------------------------------------------


_unique_names: set[str] = set()


def unique(prefix: str) -> str:
    """A module name no other test (or earlier run in this process) has imported."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _unique_names.add(name)
    return name


def write_module(directory: Path, module: str, body: str = "VALUE = 42\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{module}.py"
    path.write_text(body)
    return path


def write_zip(path: Path, package: str, body: str = "VALUE = 'zipped'\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "")
        archive.writestr(f"{package}/core.py", body)
    return path


def zip_bytes(package: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "VALUE = 1\n")
    return buffer.getvalue()


@pytest.fixture(autouse=True)
def clean_import_state() -> Iterator[None]:
    """Each test leaves sys.path and the activation memo as it found them, and forgets the
    modules it imported from its libraries (only those: re-importing e.g. httpcore would
    give its exceptions new classes)."""
    path = list(sys.path)
    on_sys_path = set(libraries_module._on_sys_path)
    yield
    sys.path[:] = path
    for name in [name for name in sys.modules if name.split(".")[0] in _unique_names]:
        del sys.modules[name]
    libraries_module._on_sys_path.clear()
    libraries_module._on_sys_path.update(on_sys_path)
    importlib.invalidate_caches()


class PlainBlobServer:
    """A plain HTTP server answering GET /blobs/<sha>/<name> from a directory, counting requests."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[str] = []
        self.authorizations: list[str | None] = []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self) -> None:  # noqa: N802
                server.requests.append(self.path)
                server.authorizations.append(self.headers.get("Authorization"))
                super().do_GET()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, key: BlobKey, data: bytes) -> None:
        path = self.root / "blobs" / key.sha256 / key.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def blob_server(tmp_path: Path) -> Iterator[PlainBlobServer]:
    server = PlainBlobServer(tmp_path / "served")
    yield server
    server.close()


# -- the store and its keys ------------------------------------------------------------------------


def test_put_stores_by_content_hash_and_answers_the_key(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path))
    data = b"def f():\n    return 1\n"
    key = store.put("udfs.py", data)
    sha = hashlib.sha256(data).hexdigest()
    assert str(key) == f"blob:{sha}/udfs.py"
    assert (tmp_path / sha / "udfs.py").read_bytes() == data
    assert store.get(key) == str(tmp_path / sha / "udfs.py")
    assert parse_blob_key(str(key)) == key
    assert key.url_path == f"/blobs/{sha}/udfs.py"


def test_put_is_idempotent(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path))
    first = store.put("udfs.py", b"X = 1\n")
    stored = tmp_path / first.sha256 / "udfs.py"
    before = stored.stat().st_ino
    second = store.put("udfs.py", b"X = 1\n")
    assert second == first
    assert stored.stat().st_ino == before  # not written again (only its upload time renewed)
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".incoming", first.sha256, "udfs.py"]  # no temp files


def test_same_name_different_content_gets_another_key(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path))
    assert store.put("udfs.py", b"X = 1\n") != store.put("udfs.py", b"X = 2\n")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "empty"),
        ("../evil.py", "plain file name"),
        ("dir/udfs.py", "plain file name"),
        (".hidden.py", "plain file name"),
        ("my udfs.py", "plain file name"),
        ("udfs.txt", "must end with .py, .zip, .whl, .egg"),
        ("udfs", "must end with"),
        ("x" * 300 + ".py", "limit is 200"),
    ],
)
def test_bad_names_are_refused(tmp_path: Path, name: str, message: str) -> None:
    with pytest.raises(InvalidBlob, match=message):
        BlobStore(str(tmp_path)).put(name, b"X = 1\n")
    assert list(tmp_path.iterdir()) == []


def test_an_archive_must_be_a_zip(tmp_path: Path) -> None:
    with pytest.raises(InvalidBlob, match="not a zip archive"):
        BlobStore(str(tmp_path)).put("lib.zip", b"not a zip")
    BlobStore(str(tmp_path)).put("lib.whl", zip_bytes("pkg"))  # a wheel is a zip


@pytest.mark.parametrize(
    "key",
    ["blob:", "blob:abc/udfs.py", "blob:" + "A" * 64 + "/udfs.py", "blob:" + "a" * 64, "blob:" + "a" * 64 + "/x.txt"],
)
def test_malformed_keys_are_refused(key: str) -> None:
    with pytest.raises(ValueError, match="not a valid blob key"):
        parse_blob_key(key)


# -- REST: POST /blobs, GET /blobs/<sha>/<name> -------------------------------------------------


@pytest.fixture
def rest(tmp_path: Path) -> Iterator[TestClient]:
    jobmanager = SimpleNamespace(blob_dir=str(tmp_path / "blobs"), blob_store=BlobStore(str(tmp_path / "blobs")))
    with TestClient(create_app(jobmanager, Configuration()), raise_server_exceptions=False) as client:  # type: ignore[arg-type]
        yield client


def test_rest_upload_then_download(rest: TestClient, tmp_path: Path) -> None:
    data = b"X = 1\n"
    answer = rest.post("/blobs", params={"name": "udfs.py"}, content=data)
    assert answer.status_code == 201
    sha = hashlib.sha256(data).hexdigest()
    assert answer.json() == {"key": f"blob:{sha}/udfs.py"}
    assert (tmp_path / "blobs" / sha / "udfs.py").read_bytes() == data

    again = rest.post("/blobs", params={"name": "udfs.py"}, content=data)
    assert (again.status_code, again.json()) == (201, answer.json())

    download = rest.get(f"/blobs/{sha}/udfs.py")
    assert download.status_code == 200
    assert download.content == data


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"name": "../udfs.py"}, "plain file name"),
        ({"name": "udfs.exe"}, "must end with .py, .zip, .whl, .egg"),
        ({}, "name"),
    ],
)
def test_rest_upload_refuses_bad_names(rest: TestClient, params: dict[str, str], message: str) -> None:
    answer = rest.post("/blobs", params=params, content=b"X = 1\n")
    assert answer.status_code == 400
    assert message in " ".join(answer.json()["errors"])


def test_rest_upload_refuses_a_broken_archive_and_an_oversized_body(
    rest: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = rest.post("/blobs", params={"name": "lib.zip"}, content=b"nope")
    assert answer.status_code == 400
    assert "not a zip archive" in answer.json()["errors"][0]

    monkeypatch.setattr("flink_runtime.rest.blob_routes.MAX_BLOB_BYTES", 10)
    answer = rest.post("/blobs", params={"name": "udfs.py"}, content=b"X = 1234567890\n")
    assert answer.status_code == 413
    assert "at most 10 bytes" in answer.json()["errors"][0]


@pytest.mark.parametrize(
    "path", ["/blobs/" + "a" * 64 + "/udfs.py", "/blobs/abc/udfs.py", "/blobs/" + "a" * 64 + "/x.sh"]
)
def test_rest_download_of_an_unknown_blob_is_404(rest: TestClient, path: str) -> None:
    answer = rest.get(path)
    assert answer.status_code == 404
    assert "upload it with POST /blobs" in answer.json()["errors"][0]


# -- activation ------------------------------------------------------------------------------------


def test_a_py_library_is_importable_from_its_directory(tmp_path: Path) -> None:
    module = unique("udfs")
    path = write_module(tmp_path / "libs", module)
    assert activate_libraries([str(path)], cache_dir=str(tmp_path / "cache")) == [str(path)]
    assert str(tmp_path / "libs") in sys.path
    assert importlib.import_module(module).VALUE == 42
    activate_libraries([str(path)], cache_dir=str(tmp_path / "cache"))
    assert sys.path.count(str(tmp_path / "libs")) == 1  # once per path


def test_a_zip_library_is_on_sys_path_itself(tmp_path: Path) -> None:
    package = unique("ziplib")
    path = write_zip(tmp_path / "lib.zip", package)
    activate_libraries([str(path)], cache_dir=str(tmp_path / "cache"))
    assert sys.path[0] == str(path)
    assert importlib.import_module(f"{package}.core").VALUE == "zipped"


def test_a_blob_key_is_found_in_the_jobmanagers_store(tmp_path: Path) -> None:
    package = unique("stored")
    store = BlobStore(str(tmp_path / "store"))
    key = store.put("lib.zip", write_zip(tmp_path / "lib.zip", package).read_bytes())
    paths = activate_libraries([str(key)], cache_dir=store.directory)
    assert paths == [store.path(key)]
    assert importlib.import_module(f"{package}.core").VALUE == "zipped"


def test_a_blob_key_is_downloaded_into_the_cache_and_verified(tmp_path: Path, blob_server: PlainBlobServer) -> None:
    module = unique("remote")
    data = f"def hello():\n    return 'hi from {module}'\n".encode()
    key = BlobKey(hashlib.sha256(data).hexdigest(), f"{module}.py")
    blob_server.serve(key, data)
    cache = tmp_path / "cache"

    paths = activate_libraries([str(key)], cache_dir=str(cache), blob_server=BlobServer(blob_server.url))
    assert paths == [str(cache / key.sha256 / key.name)]
    assert Path(paths[0]).read_bytes() == data
    assert importlib.import_module(module).hello() == f"hi from {module}"
    assert [p.name for p in (cache / key.sha256).iterdir()] == [key.name]  # no temp file left

    activate_libraries([str(key)], cache_dir=str(cache), blob_server=BlobServer(blob_server.url))
    assert blob_server.requests == [key.url_path]  # cached: downloaded once
    assert blob_server.authorizations == [None]


def test_a_download_carries_the_rest_token(tmp_path: Path, blob_server: PlainBlobServer) -> None:
    data = b"X = 1\n"
    key = BlobKey(hashlib.sha256(data).hexdigest(), f"{unique('tokened')}.py")
    blob_server.serve(key, data)
    source = BlobServer(blob_server.url, headers={"Authorization": "Bearer t0ken"})
    activate_libraries([str(key)], cache_dir=str(tmp_path / "cache"), blob_server=source)
    assert blob_server.authorizations == ["Bearer t0ken"]


def test_a_download_with_the_wrong_hash_is_an_error(tmp_path: Path, blob_server: PlainBlobServer) -> None:
    key = BlobKey(hashlib.sha256(b"X = 1\n").hexdigest(), "udfs.py")
    blob_server.serve(key, b"X = 666  # tampered\n")
    cache = tmp_path / "cache"
    with pytest.raises(LibraryError, match=f"{key}.* has sha256 [0-9a-f]{{64}}, not the {key.sha256}"):
        activate_libraries([str(key)], cache_dir=str(cache), blob_server=BlobServer(blob_server.url))
    assert list((cache / key.sha256).iterdir()) == []  # nothing kept, not even a temp file


def test_an_unknown_blob_is_an_error(tmp_path: Path, blob_server: PlainBlobServer) -> None:
    key = f"blob:{'0' * 64}/udfs.py"
    with pytest.raises(LibraryError, match=f"{key} is unknown to the blob server.*resubmit"):
        activate_libraries([key], cache_dir=str(tmp_path), blob_server=BlobServer(blob_server.url))
    with pytest.raises(LibraryError, match=f"{key} is not in the blob store {tmp_path}"):
        activate_libraries([key], cache_dir=str(tmp_path))


def test_an_unreachable_blob_server_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(libraries_module, "DOWNLOAD_ATTEMPTS", 1)
    key = f"blob:{'0' * 64}/udfs.py"
    with pytest.raises(LibraryError, match="cannot download job library .* reachable from this TaskManager"):
        activate_libraries([key], cache_dir=str(tmp_path), blob_server=BlobServer("http://127.0.0.1:1"))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("missing.zip", "does not exist on host"),
        ("libs", "is a directory, not a file"),
        ("notes.txt", "must end with .py, .zip, .whl, .egg"),
        ("blob:nothex/udfs.py", "not a valid blob key"),
    ],
)
def test_bad_entries_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str, message: str
) -> None:
    (tmp_path / "libs").mkdir()
    (tmp_path / "notes.txt").write_text("hello")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LibraryError, match=message) as failure:
        activate_libraries([entry], cache_dir=str(tmp_path / "cache"))
    assert entry in str(failure.value)


def test_concurrent_activation_downloads_once_and_adds_each_path_once(
    tmp_path: Path, blob_server: PlainBlobServer
) -> None:
    package = unique("shared")
    data = write_zip(tmp_path / "src.zip", package).read_bytes()
    key = BlobKey(hashlib.sha256(data).hexdigest(), "shared.zip")
    blob_server.serve(key, data)
    cache = tmp_path / "cache"
    threads = 16
    barrier = threading.Barrier(threads)
    results: list[Any] = []

    def activate() -> None:
        barrier.wait()
        try:
            results.append(
                activate_libraries([str(key)], cache_dir=str(cache), blob_server=BlobServer(blob_server.url))
            )
            results.append(importlib.import_module(f"{package}.core").VALUE)
        except BaseException as exc:  # noqa: BLE001 - reported below
            results.append(exc)

    workers = [threading.Thread(target=activate) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    expected = str(cache / key.sha256 / key.name)
    assert results.count([expected]) == threads and results.count("zipped") == threads, results
    assert blob_server.requests == [key.url_path]
    assert sys.path.count(expected) == 1


# -- registration with Spark -----------------------------------------------------------------------


class FakeContext:
    def __init__(self) -> None:
        self.py_files: list[str] = []

    def addPyFile(self, path: str) -> None:  # noqa: N802 - Spark's name
        self.py_files.append(path)


class FakeClassicSession:
    def __init__(self) -> None:
        self.sparkContext = FakeContext()  # noqa: N815 - Spark's name


class FakeConnectSession:
    __module__ = "pyspark.sql.connect.session"

    def __init__(self) -> None:
        self.artifacts: list[tuple[str, bool]] = []

    def addArtifacts(self, path: str, pyfile: bool = False) -> None:  # noqa: N802 - Spark's name
        self.artifacts.append((path, pyfile))


class CountingSpark:
    """A `spark` callable handing out one session, counting how often it was asked."""

    def __init__(self, session: FakeClassicSession) -> None:
        self.session = session
        self.calls = 0

    def __call__(self) -> FakeClassicSession:
        self.calls += 1
        return self.session


def test_each_library_is_registered_once_with_a_classic_session(tmp_path: Path) -> None:
    module = unique("udfs")
    data = f"NAME = '{module}'\n".encode()
    on_jobmanager = BlobStore(str(tmp_path / "jm"))
    key = on_jobmanager.put(f"{module}.py", data)
    # The same file in a TaskManager's cache (another path, same content) is not added twice:
    # Spark knows files by name and refuses one name from two paths.
    on_taskmanager = BlobStore(str(tmp_path / "tm"))
    on_taskmanager.put(f"{module}.py", data)
    session = FakeClassicSession()
    spark = CountingSpark(session)

    activate_libraries([str(key)], cache_dir=on_jobmanager.directory, spark=spark)
    activate_libraries([str(key)], cache_dir=on_taskmanager.directory, spark=spark)
    assert session.sparkContext.py_files == [on_jobmanager.path(key)]
    assert spark.calls == 2

    other = BlobStore(str(tmp_path / "other")).put(f"{module}.py", b"NAME = 'another version'\n")
    with pytest.raises(LibraryError, match=f"different library file named '{module}.py'.*Rename the file"):
        activate_libraries([str(other)], cache_dir=str(tmp_path / "other"), spark=spark)


def test_a_connect_session_gets_artifacts_and_a_wheel_goes_as_a_zip(tmp_path: Path) -> None:
    package = unique("wheeled")
    wheel = write_zip(tmp_path / f"{package}-1.0-py3-none-any.whl", package)
    session = FakeConnectSession()
    activate_libraries([str(wheel)], cache_dir=str(tmp_path / "cache"), spark=lambda: session)
    assert session.artifacts == [(f"{wheel}.zip", True)]
    assert Path(f"{wheel}.zip").read_bytes() == wheel.read_bytes()
    assert importlib.import_module(f"{package}.core").VALUE == "zipped"  # the wheel itself, by zipimport


def test_lazily_activated_libraries_start_spark_only_when_the_code_asks_for_it(tmp_path: Path) -> None:
    module = unique("lazy")
    key = BlobStore(str(tmp_path / "jm")).put(f"{module}.py", f"NAME = '{module}'\n".encode())
    session = FakeClassicSession()
    spark = CountingSpark(session)

    getter = activate_libraries_lazily([str(key)], cache_dir=str(tmp_path / "jm"), spark=spark)
    imported = importlib.import_module(module)  # importable at once, in this process
    assert vars(imported)["NAME"] == module
    assert spark.calls == 0 and session.sparkContext.py_files == []  # no SparkSession started for it
    assert getter() is session and getter() is session
    assert spark.calls == 2 and session.sparkContext.py_files == [BlobStore(str(tmp_path / "jm")).path(key)]  # once

    other = BlobStore(str(tmp_path / "other")).put(f"{module}.py", b"NAME = 'another version'\n")
    conflicting = activate_libraries_lazily([str(other)], cache_dir=str(tmp_path / "other"), spark=spark)
    with pytest.raises(LibraryError, match=f"different library file named '{module}.py'"):
        conflicting()


def test_no_libraries_never_start_spark(tmp_path: Path) -> None:
    def spark() -> None:
        raise AssertionError("spark() called for a job without libraries")

    assert activate_libraries([], cache_dir=str(tmp_path), spark=spark) == []


# -- the client uploads local files ----------------------------------------------------------------


def graph_with(*libraries: str) -> JobGraph:
    return JobGraph(
        name="with libraries",
        vertices=[JobVertex(id="n", name="N", invokable="noop")],
        libraries=list(libraries),
    )


def test_submit_uploads_local_libraries_and_sends_their_keys(tmp_path: Path) -> None:
    zipped = write_zip(tmp_path / "deps.zip", "deps")
    script = write_module(tmp_path, "udfs")
    shared_key = f"blob:{'a' * 64}/already.py"
    graph = graph_with(str(zipped), shared_key, str(script), str(zipped))
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.url.path == "/blobs":
            name = request.url.params["name"]
            return httpx.Response(201, json={"key": f"blob:{hashlib.sha256(request.content).hexdigest()}/{name}"})
        return httpx.Response(202, json={"jobid": json.loads(request.content)["job_id"]})

    with JobClient("http://jm:8081", transport=httpx.MockTransport(handler)) as client:
        client.submit(graph)

    uploads = [r for r in requests if r.url.path == "/blobs"]
    assert sorted(r.url.params["name"] for r in uploads) == ["deps.zip", "udfs.py"]  # each file once
    assert all(r.headers["content-type"] == "application/octet-stream" for r in uploads)
    submitted = json.loads(requests[-1].content)
    zip_key = f"blob:{hashlib.sha256(zipped.read_bytes()).hexdigest()}/deps.zip"
    py_key = f"blob:{hashlib.sha256(script.read_bytes()).hexdigest()}/udfs.py"
    assert submitted["libraries"] == [zip_key, shared_key, py_key, zip_key]
    assert graph.libraries == [str(zipped), shared_key, str(script), str(zipped)]  # the caller's graph is untouched


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("no/such/lib.zip", "'no/such/lib.zip' is neither an existing file nor a blob key"),
        ("blob:xyz/lib.zip", "not a valid blob key"),
        ("notes.txt", "cannot be uploaded: .*must end with"),
    ],
)
def test_submit_refuses_bad_libraries_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(500)

    client = JobClient("http://jm:8081", transport=httpx.MockTransport(handler))
    with client, pytest.raises(ValueError, match=message):
        client.submit(graph_with(entry))
    assert requests == []


# -- TaskManager side --------------------------------------------------------------------------------


def test_registration_answers_carry_the_rest_url() -> None:
    assert AcknowledgeRegistration(registration_id="r", jobmanager_id="j", rest_url="http://jm:8081").rest_url
    assert AlreadyRegistered(registration_id="r", jobmanager_id="j").rest_url == ""


def test_blob_cache_lives_under_a_local_data_dir(tmp_path: Path) -> None:
    assert blob_cache_dir_for(str(tmp_path)) == str(tmp_path / "blobs")
    assert blob_cache_dir_for(f"file://{tmp_path}") == str(tmp_path / "blobs")
    assert not blob_cache_dir_for("s3a://bucket/data").startswith("s3a:")


def run_task(tmp_path: Path, invokable: str, libraries: list[str], blob_server: BlobServer | None = None) -> list[Any]:
    descriptor = TaskDeploymentDescriptor(
        job_id="0123456789abcdef0123456789abcdef",
        job_name="job",
        execution_id="exec-1",
        jobmanager_id="jm-1",
        allocation_id="alloc-1",
        slot_index=0,
        data_namespace="",
        vertex_id="v1",
        task_name="T (1/1)",
        subtask_index=0,
        parallelism=1,
        attempt_number=0,
        invokable=invokable,
        libraries=libraries,
    )
    reports: list[Any] = []
    done = threading.Event()

    def report(task: Task, state: ExecutionState, error: str | None) -> None:
        reports.append((state, error))
        if state.is_terminal:
            done.set()

    task = Task(
        descriptor,
        str(tmp_path / "data"),
        report,
        lambda: None,
        lambda partition_id, location: None,
        blob_server=blob_server,
    )
    task.start()
    assert done.wait(10)
    return reports


def test_a_task_activates_its_libraries_before_resolving_its_invokable(
    tmp_path: Path, blob_server: PlainBlobServer
) -> None:
    module = unique("invokables")
    marker = tmp_path / "ran"
    body = (
        "from flink_runtime.taskmanager.invokable import AbstractInvokable\n"
        "class Touch(AbstractInvokable):\n"
        "    def invoke(self):\n"
        f"        open({str(marker)!r}, 'w').close()\n"
    ).encode()
    key = BlobKey(hashlib.sha256(body).hexdigest(), f"{module}.py")
    blob_server.serve(key, body)
    reports = run_task(tmp_path, f"{module}:Touch", [str(key)], BlobServer(blob_server.url))
    assert [state for state, _ in reports][-1] is ExecutionState.FINISHED, reports
    assert marker.exists()
    assert (tmp_path / "data" / "blobs" / key.sha256 / key.name).read_bytes() == body


def test_a_task_whose_library_cannot_be_had_fails_saying_why(tmp_path: Path, blob_server: PlainBlobServer) -> None:
    key = f"blob:{'0' * 64}/gone.py"
    reports = run_task(tmp_path, "noop", [key], BlobServer(blob_server.url))
    state, error = reports[-1]
    assert state is ExecutionState.FAILED
    assert f"LibraryError: job library {key} is unknown to the blob server" in error


# -- quota, streaming and expiry ----------------------------------------------------------------


def test_an_upload_streams_to_disk_and_commits_by_its_hash(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path))
    upload = store.upload("big.py")
    for _ in range(4):
        upload.write(b"# padding\n" * 1000)
    key = upload.commit()
    assert key.sha256 == hashlib.sha256(b"# padding\n" * 4000).hexdigest()
    assert Path(store.path(key)).stat().st_size == 40_000
    assert list((tmp_path / ".incoming").iterdir()) == []  # nothing left half-written


def test_the_quota_refuses_what_would_not_fit(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path), max_total_bytes=100)
    store.put("a.py", b"A = 1\n" * 10)  # 60 bytes
    with pytest.raises(BlobStoreFull, match="blob.storage.max-size"):
        store.put("b.py", b"B = 2\n" * 10)
    assert store.put("a.py", b"A = 1\n" * 10)  # the same bytes again take no room
    assert store.total_bytes() == 60
    assert list((tmp_path / ".incoming").iterdir()) == []


def test_unreferenced_blobs_expire_after_their_last_upload(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path))
    kept, dropped, fresh = store.put("kept.py", b"K = 1\n"), store.put("old.py", b"O = 1\n"), None
    for key in (kept, dropped):
        os.utime(store.path(key), (time.time() - 7200, time.time() - 7200))
    fresh = store.put("fresh.py", b"F = 1\n")
    removed = store.remove_unreferenced({str(kept)}, uploaded_before=time.time() - 3600)
    assert removed == [str(dropped)]
    assert store.get(kept) and store.get(fresh) and store.get(dropped) is None
    # Uploading it again starts its time again.
    store.put("kept.py", b"K = 1\n")
    assert store.remove_unreferenced(set(), uploaded_before=time.time() - 3600) == []
