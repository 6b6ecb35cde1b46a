"""The JobManager's blob store: job libraries kept by content hash.

A blob is one uploaded file, stored as `<blob dir>/<sha256>/<file name>` and named
by its key `blob:<sha256>/<file name>`. The hash makes uploads idempotent (the same
bytes always get the same key, and a second upload writes nothing) and lets every
downloader verify what it got; the file name is kept because it decides how Python
imports the file (.py from its directory, .zip/.whl/.egg through zipimport).

Files appear by rename from a temporary name in the same directory, so a reader
never sees half a blob, and two uploads of the same bytes race harmlessly.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
import zipfile
from dataclasses import dataclass

KEY_PREFIX = "blob:"
LIBRARY_SUFFIXES = (".py", ".zip", ".whl", ".egg")
ARCHIVE_SUFFIXES = (".zip", ".whl", ".egg")
MAX_BLOB_BYTES = 256 << 20
MAX_NAME_LENGTH = 200

# A plain file name: no directories, no hidden files, nothing a shell or URL must escape.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class InvalidBlob(ValueError):
    """An upload the store refuses: a bad file name or content that cannot be a library."""


@dataclass(frozen=True)
class BlobKey:
    sha256: str
    name: str

    def __str__(self) -> str:
        return f"{KEY_PREFIX}{self.sha256}/{self.name}"

    @property
    def relative_path(self) -> str:
        return os.path.join(self.sha256, self.name)

    @property
    def url_path(self) -> str:
        return f"/blobs/{self.sha256}/{self.name}"


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a library blob, or None when it can."""
    if not name:
        return "the file name is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"the file name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
    if not _NAME.match(name) or name in (".", ".."):
        return (
            f"{name!r} is not a plain file name (letters, digits and . _ + - only, "
            "no directories, not starting with a dot)"
        )
    if not name.lower().endswith(LIBRARY_SUFFIXES):
        return f"{name!r} is not a library: the name must end with {', '.join(LIBRARY_SUFFIXES)}"
    return None


def is_blob_key(entry: str) -> bool:
    return entry.startswith(KEY_PREFIX)


def parse_blob_key(key: str) -> BlobKey:
    """`blob:<sha256>/<name>` -> BlobKey; ValueError saying what is wrong otherwise."""
    if not key.startswith(KEY_PREFIX):
        raise ValueError(f"{key!r} is not a blob key: it must start with {KEY_PREFIX!r}")
    sha, _, name = key[len(KEY_PREFIX) :].partition("/")
    if not _SHA256.match(sha):
        raise ValueError(f"{key!r} is not a valid blob key: expected blob:<64 lower-case hex digits>/<file name>")
    problem = name_problem(name)
    if problem:
        raise ValueError(f"{key!r} is not a valid blob key: {problem}")
    return BlobKey(sha, name)


def sha256_of_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class BlobStoreFull(InvalidBlob):
    """Storing the blob would take the store past its quota (blob.storage.max-size)."""


class BlobStore:
    """Blobs under one directory (the JobManager's `blob.storage.directory`).

    `max_total_bytes`: the quota of all blobs together; 0 means none.
    """

    def __init__(self, directory: str, max_total_bytes: int = 0) -> None:
        self.directory = directory
        self.max_total_bytes = max_total_bytes
        self._lock = threading.Lock()  # commits check the quota one at a time

    def upload(self, name: str) -> BlobUpload:
        """Start receiving a blob in chunks (a REST upload): nothing is held in memory."""
        problem = name_problem(name)
        if problem:
            raise InvalidBlob(problem)
        return BlobUpload(self, name)

    def total_bytes(self) -> int:
        return sum(size for _, size, _ in self._stored())

    def remove_unreferenced(self, referenced: set[str], uploaded_before: float) -> list[str]:
        """Delete blobs whose key (`blob:<sha>/<name>`) is not in `referenced` and that
        were last uploaded before the time; returns the deleted keys."""
        removed = []
        for key, _, uploaded_at in self._stored():
            if str(key) not in referenced and uploaded_at < uploaded_before:
                remove_quietly(self.path(key))
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.dirname(self.path(key)))
                removed.append(str(key))
        return removed

    def _stored(self) -> list[tuple[BlobKey, int, float]]:
        """(key, size, last upload time) of every stored blob."""
        stored = []
        if not os.path.isdir(self.directory):
            return stored
        for folder in os.scandir(self.directory):
            if not folder.is_dir() or len(folder.name) != 64:
                continue
            for entry in os.scandir(folder.path):
                if entry.is_file() and not entry.name.startswith("."):
                    info = entry.stat()
                    stored.append((BlobKey(folder.name, entry.name), info.st_size, info.st_mtime))
        return stored

    def _commit(self, temporary: str, key: BlobKey, size: int) -> None:
        target = self.path(key)
        with self._lock:
            if os.path.isfile(target):
                remove_quietly(temporary)
                os.utime(target)  # uploaded again: its expiry starts again
                return
            if self.max_total_bytes and self.total_bytes() + size > self.max_total_bytes:
                remove_quietly(temporary)
                raise BlobStoreFull(
                    f"the blob store holds {self.total_bytes():,} bytes and {key.name!r} ({size:,} bytes) would take "
                    f"it past blob.storage.max-size ({self.max_total_bytes:,} bytes); libraries no job refers "
                    "to are deleted after blob.expiration-time"
                )
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide it from other local users
            os.replace(temporary, target)

    def path(self, key: BlobKey) -> str:
        return os.path.join(self.directory, key.relative_path)

    def put(self, name: str, data: bytes) -> BlobKey:
        """Store `data` as `name`; returns its key. Storing the same bytes again is a no-op."""
        upload = self.upload(name)
        upload.write(data)
        return upload.commit()

    def get(self, key: BlobKey) -> str | None:
        """The local path of a stored blob, or None when it is not here."""
        path = self.path(key)
        return path if os.path.isfile(path) else None


class BlobUpload:
    """A blob arriving in chunks: written to a temporary file beside the store and hashed
    on the way, then renamed into place by `commit` (or discarded by `abort`)."""

    def __init__(self, store: BlobStore, name: str) -> None:
        self._store = store
        self.name = name
        self.size = 0
        self._digest = hashlib.sha256()
        incoming = os.path.join(store.directory, ".incoming")
        os.makedirs(incoming, exist_ok=True)
        fd, self._temporary = tempfile.mkstemp(dir=incoming, suffix=".part")
        self._file = os.fdopen(fd, "wb")

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > MAX_BLOB_BYTES:
            self.abort()
            raise InvalidBlob(f"{self.name!r} is larger than the {MAX_BLOB_BYTES} bytes a library may have")
        self._digest.update(chunk)
        self._file.write(chunk)

    def commit(self) -> BlobKey:
        self._file.close()
        if self.name.lower().endswith(ARCHIVE_SUFFIXES) and not zipfile.is_zipfile(self._temporary):
            self.abort()
            raise InvalidBlob(
                f"{self.name!r} is not a zip archive (a .zip, .whl or .egg must be one, to be importable)"
            )
        key = BlobKey(self._digest.hexdigest(), self.name)
        self._store._commit(self._temporary, key, self.size)  # noqa: SLF001 - the store's own helper
        return key

    def abort(self) -> None:
        """Discard what arrived (a no-op after commit, which moved the file away)."""
        self._file.close()
        remove_quietly(self._temporary)


def remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
