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
import io
import os
import re
import tempfile
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


def content_problem(name: str, data: bytes) -> str | None:
    """Cheap sanity check of an upload: archives must at least be zip files."""
    if name.lower().endswith(ARCHIVE_SUFFIXES) and not zipfile.is_zipfile(io.BytesIO(data)):
        return f"{name!r} is not a zip archive (a .zip, .whl or .egg must be one, to be importable)"
    return None


def sha256_of_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class BlobStore:
    """Blobs under one directory (the JobManager's `blob.storage.directory`)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def path(self, key: BlobKey) -> str:
        return os.path.join(self.directory, key.relative_path)

    def put(self, name: str, data: bytes) -> BlobKey:
        """Store `data` as `name`; returns its key. Storing the same bytes again is a no-op."""
        problem = name_problem(name)
        if problem is None and len(data) > MAX_BLOB_BYTES:
            problem = f"{name!r} is {len(data)} bytes; the limit is {MAX_BLOB_BYTES} bytes"
        problem = problem or content_problem(name, data)
        if problem:
            raise InvalidBlob(problem)
        key = BlobKey(hashlib.sha256(data).hexdigest(), name)
        target = self.path(key)
        if not os.path.isfile(target):
            write_atomically(target, data)
        return key

    def get(self, key: BlobKey) -> str | None:
        """The local path of a stored blob, or None when it is not here."""
        path = self.path(key)
        return path if os.path.isfile(path) else None


def write_atomically(target: str, data: bytes) -> None:
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide it from other local users
        os.replace(temporary, target)
    except BaseException:
        remove_quietly(temporary)
        raise


def remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
