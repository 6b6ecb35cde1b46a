"""Libraries attached to a job (.py, .zip, .whl, .egg), shipped to where its code runs.

As Flink's BlobServer does for jars: the client uploads each local library file to
the JobManager (`POST /blobs`), which keeps it by content hash (`store`), and the
JobGraph lists it by key (`blob:<sha256>/<name>`). Before a task resolves its code,
the TaskManager downloads the job's blobs once into its cache (`GET /blobs/...`) and
makes them importable (`libraries`); the JobManager does the same from its own store
before it checks the job's plan.
"""

from __future__ import annotations

from flink_runtime.blob.libraries import BlobServer, LibraryError, activate_libraries, activate_libraries_lazily
from flink_runtime.blob.store import (
    KEY_PREFIX,
    LIBRARY_SUFFIXES,
    MAX_BLOB_BYTES,
    BlobKey,
    BlobStore,
    InvalidBlob,
    is_blob_key,
    name_problem,
    parse_blob_key,
)

__all__ = [
    "KEY_PREFIX",
    "LIBRARY_SUFFIXES",
    "MAX_BLOB_BYTES",
    "BlobKey",
    "BlobServer",
    "BlobStore",
    "InvalidBlob",
    "LibraryError",
    "activate_libraries",
    "activate_libraries_lazily",
    "is_blob_key",
    "name_problem",
    "parse_blob_key",
]
