"""Making a job's libraries importable where its code runs.

A library entry of a JobGraph is either a blob key (`blob:<sha256>/<name>`, uploaded
to the JobManager by the client) or a path readable on every host (a shared
filesystem). Activation resolves each entry to a local file - the JobManager finds
blobs in its own store, a TaskManager downloads them once into its blob cache -
and puts it on sys.path: a .py file's directory, or the .zip/.whl/.egg itself for
zipimport. When the job's code runs in Spark, the file is also registered with the
SparkSession, so Python on the executors (UDFs) can import it too.

All of it happens once per file per process (and once per file per SparkSession),
under a lock, because every task of every job activates its libraries when it starts.
Python has no per-job class loader: a module imported from one library stays
imported, so two jobs shipping different versions of one module name in one process
see whichever was imported first. Name library files with their version.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from flink_runtime.blob.store import (
    LIBRARY_SUFFIXES,
    MAX_BLOB_BYTES,
    BlobKey,
    is_blob_key,
    parse_blob_key,
    remove_quietly,
    sha256_of_file,
)

log = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT = httpx.Timeout(30.0, read=120.0)
DOWNLOAD_ATTEMPTS = 3


class LibraryError(RuntimeError):
    """A job library could not be made importable; the message says which, why and what to do."""


@dataclass(frozen=True)
class BlobServer:
    """Where a TaskManager downloads blobs from: the JobManager's REST API, with the
    headers (its bearer token) and the TLS verification the REST API asks for."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    verify: Any = True  # bool or ssl.SSLContext, as httpx takes it


_lock = threading.Lock()
_on_sys_path: set[str] = set()
# Per SparkSession: registered file name -> sha256 of its content (Spark knows files by name).
_registered: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
_download_locks: dict[str, threading.Lock] = {}
# (path, mtime, size) -> sha256, for library files given by path.
_file_hashes: dict[tuple[str, int, int], str] = {}


def activate_libraries(
    libraries: list[str],
    *,
    cache_dir: str,
    blob_server: BlobServer | None = None,
    spark: Callable[[], Any] | None = None,
) -> list[str]:
    """Make a job's libraries importable in this process; returns their local paths.

    cache_dir: where blobs are looked up first (on the JobManager: its blob store) and
        downloaded to (on a TaskManager: its blob cache).
    blob_server: the JobManager's REST API, to download blobs not in cache_dir.
    spark: returns the SparkSession the job's code runs in; each library is
        registered with it once, so executor-side Python can import it as well.
    Raises LibraryError naming the library that failed.
    """
    if not libraries:
        return []
    resolved = [_resolve(entry, cache_dir, blob_server) for entry in libraries]
    paths = [path for path, _ in resolved]
    _add_to_sys_path(paths)
    if spark is not None:
        session = spark()
        if session is not None:
            for entry, (path, sha) in zip(libraries, resolved, strict=True):
                _register_with_spark(session, entry, path, sha)
    return paths


def activate_libraries_lazily(
    libraries: list[str],
    *,
    cache_dir: str,
    blob_server: BlobServer | None = None,
    spark: Callable[[], Any],
) -> Callable[[], Any]:
    """activate_libraries for code that may never use Spark: the libraries are made
    importable in this process now, and the returned getter hands out ``spark()``'s
    session with them registered (each once per session) when the job's code asks for it.

    A job whose code never asks (a plain invokable shipped as a library) starts no
    SparkSession for its libraries: that is a JVM start, 10-20 s on a loaded machine, in
    the JobManager's planner and in every TaskManager the job runs on.
    Raises LibraryError naming a library that cannot be fetched (now) or registered
    (when the session is first asked for).
    """
    if not libraries:
        return spark
    resolved = [_resolve(entry, cache_dir, blob_server) for entry in libraries]
    _add_to_sys_path([path for path, _ in resolved])

    def session() -> Any:
        current = spark()
        if current is not None:
            for entry, (path, sha) in zip(libraries, resolved, strict=True):
                _register_with_spark(current, entry, path, sha)
        return current

    return session


# -- resolving entries to local files ----------------------------------------------------------


def _resolve(entry: str, cache_dir: str, blob_server: BlobServer | None) -> tuple[str, str]:
    """(local path, sha256 of its content)."""
    if is_blob_key(entry):
        try:
            key = parse_blob_key(entry)
        except ValueError as exc:
            raise LibraryError(f"job library {exc}; list a file path or a key answered by POST /blobs.") from None
        return _fetch_blob(entry, key, cache_dir, blob_server), key.sha256
    path = os.path.abspath(os.path.expanduser(entry))
    if not os.path.isfile(path):
        what = "is a directory, not a file" if os.path.isdir(path) else "does not exist"
        raise LibraryError(
            f"job library {entry!r} {what} on host {socket.gethostname()}. A library is a .py, .zip, .whl "
            "or .egg file: submit the job with JobClient from where the file is (it uploads local files "
            "to the JobManager), or put it on a filesystem the JobManager and every TaskManager share."
        )
    if not path.lower().endswith(LIBRARY_SUFFIXES):
        raise LibraryError(
            f"job library {entry!r} is not importable: the file name must end with {', '.join(LIBRARY_SUFFIXES)}."
        )
    return path, _file_sha256(path)


def _file_sha256(path: str) -> str:
    stat = os.stat(path)
    signature = (path, stat.st_mtime_ns, stat.st_size)
    sha = _file_hashes.get(signature)
    if sha is None:
        sha = _file_hashes[signature] = sha256_of_file(path)
    return sha


def _fetch_blob(entry: str, key: BlobKey, cache_dir: str, blob_server: BlobServer | None) -> str:
    target = os.path.abspath(os.path.join(cache_dir, key.relative_path))
    if os.path.isfile(target):
        return target
    if blob_server is None or not blob_server.url:
        raise LibraryError(
            f"job library {entry} is not in the blob store {cache_dir} and there is no blob server to "
            "fetch it from; upload it again (JobClient.submit uploads local library files) and resubmit the job."
        )
    with _lock:
        download_lock = _download_locks.setdefault(target, threading.Lock())
    with download_lock:  # one download per file; the others wait for it
        if not os.path.isfile(target):
            _download(entry, key, target, blob_server)
    return target


def _download(entry: str, key: BlobKey, target: str, blob_server: BlobServer) -> None:
    url = blob_server.url.rstrip("/") + key.url_path
    for attempt in range(1, DOWNLOAD_ATTEMPTS + 1):
        try:
            _download_once(entry, key, target, url, blob_server)
            log.info("downloaded job library %s to %s", entry, target)
            return
        except (httpx.TransportError, _ServerError) as exc:
            if attempt == DOWNLOAD_ATTEMPTS:
                raise LibraryError(
                    f"cannot download job library {entry} from {url} ({type(exc).__name__}: {exc}); check that "
                    "the JobManager's REST API is reachable from this TaskManager (rest.address)."
                ) from exc
            time.sleep(0.2 * 2**attempt)


class _ServerError(Exception):
    """A 5xx answer: worth another attempt."""


def _download_once(entry: str, key: BlobKey, target: str, url: str, blob_server: BlobServer) -> None:
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".", suffix=".part")
    try:
        digest = hashlib.sha256()
        size = 0
        with (
            os.fdopen(fd, "wb") as file,
            httpx.stream(
                "GET", url, headers=dict(blob_server.headers), verify=blob_server.verify, timeout=DOWNLOAD_TIMEOUT
            ) as response,
        ):
            if response.status_code == 404:
                raise LibraryError(
                    f"job library {entry} is unknown to the blob server at {url} (the JobManager's blob "
                    "storage directory was emptied, or it is another JobManager); resubmit the job with "
                    "JobClient so the file is uploaded again."
                )
            if response.status_code == 401:
                raise LibraryError(
                    f"the blob server at {url} refused this TaskManager's credentials (HTTP 401): give the "
                    "TaskManager the JobManager's security.rest.token (or security.rest.token-file)."
                )
            if response.status_code >= 500:
                raise _ServerError(f"HTTP {response.status_code}")
            if response.status_code != 200:
                raise LibraryError(f"cannot download job library {entry} from {url}: HTTP {response.status_code}.")
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_BLOB_BYTES:
                    raise LibraryError(
                        f"job library {entry} from {url} is larger than the {MAX_BLOB_BYTES} bytes a blob may have."
                    )
                digest.update(chunk)
                file.write(chunk)
        if digest.hexdigest() != key.sha256:
            raise LibraryError(
                f"job library {entry} downloaded from {url} has sha256 {digest.hexdigest()}, not the "
                f"{key.sha256} its key promises: the blob server's copy is corrupt or another file; "
                "delete it from the JobManager's blob storage directory and resubmit the job."
            )
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)  # atomic: a reader sees the whole file or none
    except BaseException:
        remove_quietly(temporary)
        raise


# -- making them importable ----------------------------------------------------------------------


def _add_to_sys_path(paths: list[str]) -> None:
    with _lock:
        changed = False
        # Inserted in reverse, so the job's first library comes first on sys.path.
        for path in reversed(paths):
            entry = os.path.dirname(path) if path.lower().endswith(".py") else path
            if entry in _on_sys_path:
                continue
            _on_sys_path.add(entry)
            if entry not in sys.path:
                sys.path.insert(0, entry)
                changed = True
        if changed:
            importlib.invalidate_caches()


def _register_with_spark(session: Any, entry: str, path: str, sha: str) -> None:
    from flink_runtime.spark.session import is_connect

    spark_path = _spark_path(path)
    name = os.path.basename(spark_path)
    with _lock:
        registered = _registered.setdefault(session, {})
        known = registered.get(name)
        if known == sha:
            return
        if known is not None:
            raise LibraryError(
                f"job library {entry}: the SparkSession already has a different library file named {name!r} "
                "(from another job); Spark knows files by name only. Rename the file, e.g. with its version."
            )
        try:
            if is_connect(session):
                session.addArtifacts(spark_path, pyfile=True)
            else:
                session.sparkContext.addPyFile(spark_path)
        except Exception as exc:
            raise LibraryError(
                f"job library {entry}: Spark refused to ship {spark_path} to its executors "
                f"({type(exc).__name__}: {exc})."
            ) from exc
        registered[name] = sha


def _spark_path(path: str) -> str:
    """The file to hand to Spark: executors put only .zip/.egg/.jar on sys.path (and .py
    files' directory), so a wheel goes as a .zip alias of itself (a wheel is a zip)."""
    if not path.lower().endswith(".whl"):
        return path
    alias = path + ".zip"
    if not os.path.isfile(alias):
        directory = os.path.dirname(path)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".", suffix=".part")
        os.close(fd)
        try:
            os.remove(temporary)
            try:
                os.link(path, temporary)
            except OSError:  # no hard links here (another filesystem, Windows share)
                shutil.copyfile(path, temporary)
            os.replace(temporary, alias)
        except BaseException:
            remove_quietly(temporary)
            raise
    return alias
