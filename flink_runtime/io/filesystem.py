"""The few file operations the runtime does itself: list, rename, delete, small files.

Spark reads and writes the data; the runtime lists input files (to build splits),
commits by rename and publishes sink output. Local paths (and file:// URIs) use the
os module; any other URI (hdfs://, s3a://, gs://, ...) goes through Hadoop's
FileSystem in the process's classic SparkSession, so every scheme Spark can read is
one the runtime can commit on.
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse


@dataclass(frozen=True)
class FileStatus:
    path: str
    size: int
    is_dir: bool


class FileSystem(Protocol):
    def glob(self, pattern: str) -> list[FileStatus]: ...
    def list_files(self, path: str) -> list[FileStatus]: ...
    def exists(self, path: str) -> bool: ...
    def makedirs(self, path: str) -> None: ...
    def rename(self, source: str, target: str) -> None: ...
    def delete(self, path: str) -> None: ...
    def write_text(self, path: str, text: str) -> None: ...
    def read_text(self, path: str) -> str: ...
    def copy_tree(self, source: str, target: str) -> None: ...
    def parquet_rows(self, path: str) -> int: ...


def is_local(path: str) -> bool:
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(path: str) -> str:
    """A local path or file: URI as the operating system names it."""
    return urlparse(path).path if path.startswith("file:") else path


def _hidden(name: str) -> bool:
    # Spark's and Hadoop's convention: _SUCCESS, _temporary, .crc files are not data.
    return name.startswith(("_", "."))


class LocalFileSystem:
    def glob(self, pattern: str) -> list[FileStatus]:
        return [self._status(path) for path in sorted(glob.glob(local_path(pattern)))]

    def list_files(self, path: str) -> list[FileStatus]:
        """Data files under `path` (recursively), hidden files skipped."""
        local = local_path(path)
        if os.path.isfile(local):
            return [self._status(local)]
        found = []
        for root, dirs, files in os.walk(local):
            dirs[:] = sorted(d for d in dirs if not _hidden(d))
            found.extend(self._status(os.path.join(root, f)) for f in sorted(files) if not _hidden(f))
        return found

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def makedirs(self, path: str) -> None:
        os.makedirs(local_path(path), exist_ok=True)

    def rename(self, source: str, target: str) -> None:
        os.makedirs(os.path.dirname(local_path(target)) or ".", exist_ok=True)
        os.replace(local_path(source), local_path(target))

    def delete(self, path: str) -> None:
        local = local_path(path)
        if os.path.isdir(local):
            shutil.rmtree(local, ignore_errors=True)
        elif os.path.exists(local):
            os.remove(local)

    def write_text(self, path: str, text: str) -> None:
        target = Path(local_path(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f".{target.name}.tmp")
        staging.write_text(text)
        os.replace(staging, target)

    def read_text(self, path: str) -> str:
        return Path(local_path(path)).read_text()

    def copy_tree(self, source: str, target: str) -> None:
        source, target = local_path(source), local_path(target)
        if os.path.isdir(source):
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            shutil.copy2(source, target)

    def parquet_rows(self, path: str) -> int:
        """The rows of a Parquet file, from its footer (NotParquet when it has none).
        Imported here: pyarrow is ~38 MB and 0.2 s that the processes which count no
        Parquet rows (the JobManager, the planner) never pay."""
        import pyarrow
        import pyarrow.parquet as pq

        try:
            return int(pq.read_metadata(local_path(path)).num_rows)
        except pyarrow.ArrowException as error:
            raise NotParquet(path, error) from error

    @staticmethod
    def _status(path: str) -> FileStatus:
        is_dir = os.path.isdir(path)
        return FileStatus(path, 0 if is_dir else os.path.getsize(path), is_dir)


# The Hadoop connectors PySpark does not ship, by scheme: (Maven artifact, its docs).
# Their version must match PySpark's Hadoop (hadoop-client-api-<version>.jar).
_CONNECTORS = {
    "s3a": ("org.apache.hadoop:hadoop-aws:{hadoop}", "spark.hadoop.fs.s3a.access.key / secret.key or an IAM role"),
    "abfs": ("org.apache.hadoop:hadoop-azure:{hadoop}", "spark.hadoop.fs.azure.account.key.<account>..."),
    "abfss": ("org.apache.hadoop:hadoop-azure:{hadoop}", "spark.hadoop.fs.azure.account.key.<account>..."),
    "gs": ("com.google.cloud.bigdataoss:gcs-connector:hadoop3-2.2.22", "spark.hadoop.google.cloud.auth..."),
}


class NotParquet(OSError):
    """A file that should be Parquet (a chunk of an exchange, a Parquet sink's output) has
    no Parquet footer: written by something else, or cut short."""

    def __init__(self, path: str, reason: object) -> None:
        super().__init__(f"{path} is not a readable Parquet file: {reason}")


class MissingFileSystemConnector(OSError):
    """Spark's Hadoop has no FileSystem for a path's scheme: a connector jar is missing."""


class HadoopFileSystem:
    """Hadoop's FileSystem through the JVM of a classic SparkSession."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, path: str) -> tuple[Any, Any]:
        jpath = self._jvm.org.apache.hadoop.fs.Path(path)
        try:
            return jpath.getFileSystem(self._conf), jpath
        except Exception as error:  # py4j's Py4JJavaError, from Hadoop's FileSystem lookup
            missing = self._missing_connector(path, error)
            if missing is None:
                raise
            raise missing from error

    def _missing_connector(self, path: str, error: Exception) -> MissingFileSystemConnector | None:
        """A clear error when `error` says the scheme's FileSystem class is not there."""
        java = getattr(error, "java_exception", None)
        text = str(java.toString()) if java is not None else str(error)
        if "ClassNotFoundException" not in text and "No FileSystem for scheme" not in text:
            return None
        scheme = urlparse(path).scheme
        hadoop = str(self._jvm.org.apache.hadoop.util.VersionInfo.getVersion())
        artifact, credentials = _CONNECTORS.get(scheme, (None, None))
        if artifact is None:
            advice = "add the jar of a Hadoop FileSystem for it to spark.jars.packages or spark.jars"
        else:
            advice = (
                f"PySpark does not ship it: add spark.jars.packages: {artifact.format(hadoop=hadoop)} to the "
                f"configuration of the JobManager and every TaskManager (it must match PySpark's Hadoop "
                f"{hadoop}), with credentials in {credentials}"
            )
        return MissingFileSystemConnector(
            f"{path}: Spark's Hadoop {hadoop} cannot open {scheme}:// paths ({text}); {advice}"
        )

    def glob(self, pattern: str) -> list[FileStatus]:
        fs, jpath = self._fs(pattern)
        statuses = fs.globStatus(jpath) or []
        return sorted((self._status(s) for s in statuses), key=lambda s: s.path)

    def list_files(self, path: str) -> list[FileStatus]:
        fs, jpath = self._fs(path)
        if fs.isFile(jpath):
            return [self._status(fs.getFileStatus(jpath))]
        found: list[FileStatus] = []
        for status in fs.listStatus(jpath):
            if _hidden(status.getPath().getName()):
                continue
            if status.isDirectory():
                found.extend(self.list_files(status.getPath().toString()))
            else:
                found.append(self._status(status))
        return sorted(found, key=lambda s: s.path)

    def exists(self, path: str) -> bool:
        fs, jpath = self._fs(path)
        return bool(fs.exists(jpath))

    def makedirs(self, path: str) -> None:
        fs, jpath = self._fs(path)
        fs.mkdirs(jpath)

    def rename(self, source: str, target: str) -> None:
        fs, jsource = self._fs(source)
        _, jtarget = self._fs(target)
        fs.mkdirs(jtarget.getParent())
        if not fs.rename(jsource, jtarget):
            raise OSError(f"could not rename {source} to {target}")

    def delete(self, path: str) -> None:
        fs, jpath = self._fs(path)
        fs.delete(jpath, True)

    def write_text(self, path: str, text: str) -> None:
        fs, jpath = self._fs(path)
        stream = fs.create(jpath, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()

    def read_text(self, path: str) -> str:
        fs, jpath = self._fs(path)
        stream = fs.open(jpath)
        try:
            reader = self._jvm.java.io.BufferedReader(self._jvm.java.io.InputStreamReader(stream, "UTF-8"))
            lines = []
            while (line := reader.readLine()) is not None:
                lines.append(line)
            return "\n".join(lines)
        finally:
            stream.close()

    def copy_tree(self, source: str, target: str) -> None:
        fs, jsource = self._fs(source)
        target_fs, jtarget = self._fs(target)
        util = self._jvm.org.apache.hadoop.fs.FileUtil
        if not util.copy(fs, jsource, target_fs, jtarget, False, self._conf):
            raise OSError(f"could not copy {source} to {target}")

    def parquet_rows(self, path: str) -> int:
        """The rows of a Parquet file, from its footer, read by Spark's Parquet library
        (NotParquet when it has none)."""
        _, jpath = self._fs(path)
        parquet = self._jvm.org.apache.parquet.hadoop
        try:
            reader = parquet.ParquetFileReader.open(parquet.util.HadoopInputFile.fromPath(jpath, self._conf))
        except Exception as error:  # py4j's Py4JJavaError: Parquet's RuntimeException
            java = getattr(error, "java_exception", None)
            raise NotParquet(path, java.toString() if java is not None else error) from error
        try:
            return int(reader.getRecordCount())
        finally:
            reader.close()

    @staticmethod
    def _status(status: Any) -> FileStatus:
        return FileStatus(status.getPath().toString(), int(status.getLen()), bool(status.isDirectory()))


def filesystem_for(path: str, spark: Any | None = None) -> FileSystem:
    if is_local(path):
        return LocalFileSystem()
    if spark is None:
        from flink_runtime.spark.session import current_session

        spark = current_session()
    if spark is None:
        raise OSError(f"{path}: a non-local path needs Hadoop's FileSystem, and this process has no SparkSession yet")
    if not hasattr(spark, "sparkContext"):
        raise OSError(
            f"{path}: with Spark Connect (spark.remote) the runtime cannot list, commit or publish files on "
            "non-local paths (a Connect client has no Hadoop FileSystem); use a folder shared by the TaskManagers "
            "and the Connect server, or a classic Spark session (spark.master) for hdfs://, s3a://, ..."
        )
    return HadoopFileSystem(spark)


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts]) if not is_local(base) else os.path.join(local_path(base), *parts)
