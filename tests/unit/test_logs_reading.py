"""Reading a process's log files for others: only its own files, bounded, a job's records."""

from __future__ import annotations

import logging
import logging.handlers
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime.logs import service
from flink_runtime.logs.files import ProcessLogs
from flink_runtime.logs.ranges import ByteRange, RangeNotSatisfiable
from flink_runtime.logs.reading import LogFileError, check_name, list_files, read_chunk, task_records
from flink_runtime.rpc.messages import LogFileChunk, LogFileRefused, RequestLogFile, RequestTaskLog

JOB = "0123456789abcdef0123456789abcdef"
OTHER_JOB = "fedcba9876543210fedcba9876543210"
PREFIX = "flink-runtime-taskexecutor-tm-1-host"


def line(stamp: str, message: str, job: str | None = JOB, vertex: str = "sum", subtask: int = 0) -> str:
    tag = f"[job={job} vertex={vertex} subtask={subtask} attempt=0] " if job else ""
    return f"2026-11-23 10:31:{stamp} INFO  flink_runtime.taskmanager.task {tag}{message}\n"


@pytest.fixture
def process_logs(tmp_path: Path) -> Iterator[ProcessLogs]:
    """A process's files without a real handler on the root logger (written by the tests)."""
    directory = tmp_path / "log"
    directory.mkdir()
    handler = logging.handlers.RotatingFileHandler(directory / f"{PREFIX}.log", delay=True)
    yield ProcessLogs(directory, PREFIX, max_bytes=1 << 20, max_files=3, handler=handler)
    handler.close()


def write(process_logs: ProcessLogs, name: str, text: str) -> None:
    (process_logs.directory / name).write_text(text)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "..",
        "../etc/passwd",
        "..%2f..%2fetc%2fpasswd".replace("%2f", "/"),
        "/etc/passwd",
        "a\\..\\b",
        "log\x00.txt",
        ".hidden",
        "x" * 300,
    ],
)
def test_names_that_could_leave_the_directory_are_refused(name: str) -> None:
    with pytest.raises(LogFileError, match="is not a log file name") as refused:
        check_name(name)
    assert refused.value.kind == "invalid-name"


def test_only_the_listed_files_are_read(process_logs: ProcessLogs, tmp_path: Path) -> None:
    write(process_logs, f"{PREFIX}.log", "current\n")
    write(process_logs, f"{PREFIX}.log.1", "older\n")
    write(process_logs, f"{PREFIX}.out", "ready\n")
    write(process_logs, "flink-runtime-jobmanager-8081-host.log", "another process's\n")
    (tmp_path / "secret").write_text("secret\n")
    assert [info.name for info in list_files(process_logs)] == [f"{PREFIX}.log", f"{PREFIX}.log.1", f"{PREFIX}.out"]
    assert read_chunk(process_logs, f"{PREFIX}.log.1", None).data == b"older\n"
    for name in ("flink-runtime-jobmanager-8081-host.log", "secret", f"{PREFIX}.log.7"):
        with pytest.raises(LogFileError, match="not one of this process's log files") as refused:
            read_chunk(process_logs, name, None)
        assert refused.value.kind == "not-found"
    with pytest.raises(LogFileError, match="not a log file name"):
        read_chunk(process_logs, "../secret", None)
    with pytest.raises(LogFileError, match="not one of"):
        read_chunk(None, f"{PREFIX}.log", None)  # a process that writes no files


def test_a_symlink_out_of_the_directory_is_never_followed(process_logs: ProcessLogs, tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("secret\n")
    write(process_logs, f"{PREFIX}.log", "current\n")
    os.symlink(tmp_path / "secret", process_logs.directory / f"{PREFIX}.log.1")
    assert f"{PREFIX}.log.1" not in [info.name for info in list_files(process_logs)]
    with pytest.raises(LogFileError, match="never followed"):
        read_chunk(process_logs, f"{PREFIX}.log.1", None)
    # Nor a directory that poses as a log file.
    (process_logs.directory / f"{PREFIX}.out").mkdir()
    with pytest.raises(LogFileError):
        read_chunk(process_logs, f"{PREFIX}.out", None)


def test_ranges_and_bounds_of_a_file(process_logs: ProcessLogs) -> None:
    write(process_logs, f"{PREFIX}.log", "0123456789" * 10)
    name = f"{PREFIX}.log"
    chunk = read_chunk(process_logs, name, ByteRange(10, 19))
    assert (chunk.data, chunk.slice.content_range) == (b"0123456789", "bytes 10-19/100")
    assert read_chunk(process_logs, name, ByteRange(None, 3)).data == b"789"
    assert read_chunk(process_logs, name, None, bound=5).data == b"56789"  # the tail
    with pytest.raises(RangeNotSatisfiable):
        read_chunk(process_logs, name, ByteRange(100, None))


def test_the_rpc_answers_carry_the_refusal_kind(process_logs: ProcessLogs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "active", lambda: process_logs)
    write(process_logs, f"{PREFIX}.log", "abc\n")
    answer = service.log_file(RequestLogFile(name=f"{PREFIX}.log", first=1, last=2))
    assert answer == LogFileChunk(name=f"{PREFIX}.log", offset=1, file_size=4, partial=True, data=b"bc")
    kinds = {
        "../x": service.log_file(RequestLogFile(name="../x")),
        "missing": service.log_file(RequestLogFile(name="missing")),
        "range": service.log_file(RequestLogFile(name=f"{PREFIX}.log", first=10)),
        "negative": service.log_file(RequestLogFile(name=f"{PREFIX}.log", first=-1)),
    }
    assert all(isinstance(answer, LogFileRefused) for answer in kinds.values())
    assert [answer.kind for answer in kinds.values()] == ["invalid-name", "not-found", "range", "range"]
    assert kinds["range"].file_size == 4
    assert service.log_files().log_name == f"{PREFIX}.log"


def test_a_jobs_records_oldest_first_across_rotated_files(process_logs: ProcessLogs) -> None:
    write(process_logs, f"{PREFIX}.log.2", line("01,000", "a", subtask=0) + line("01,500", "untagged", job=None))
    write(
        process_logs,
        f"{PREFIX}.log.1",
        "end of a record rotated from .log.3\n"
        + line("02,000", "other job", job=OTHER_JOB)
        + line("02,100", "b failed", subtask=1)
        + "Traceback (most recent call last):\n  boom\n",
    )
    write(process_logs, f"{PREFIX}.log", line("03,000", "c", vertex="src") + line("03,001", "d", subtask=0))
    records, truncated = task_records(process_logs, JOB)
    assert not truncated
    assert [record.split("] ", 1)[1] for record in records] == [
        "a",
        "b failed\nTraceback (most recent call last):\n  boom",
        "c",
        "d",
    ]
    just = task_records(process_logs, JOB, vertex_id="sum", subtask_index=0)[0]
    assert [record.split("] ", 1)[1] for record in just] == ["a", "d"]
    assert [r.split("] ", 1)[1] for r in task_records(process_logs, JOB, "sum", 1)[0]] == [
        "b failed\nTraceback (most recent call last):\n  boom"
    ]
    assert task_records(process_logs, "00000000000000000000000000000000")[0] == []
    assert task_records(None, JOB) == ([], False)


def test_since_and_the_bound_keep_the_newest(process_logs: ProcessLogs) -> None:
    lines = [line(f"{second:02d},000", f"n{second}") for second in range(10, 30)]
    write(process_logs, f"{PREFIX}.log.1", "".join(lines[:10]))
    write(process_logs, f"{PREFIX}.log", "".join(lines[10:]))
    since = task_records(process_logs, JOB, since="2026-11-23 10:31:27,000")[0]
    assert [record.rsplit(" ", 1)[1] for record in since] == ["n27", "n28", "n29"]
    bounded, truncated = task_records(process_logs, JOB, max_bytes=len(lines[0]) * 3)
    assert truncated and [record.rsplit(" ", 1)[1] for record in bounded] == ["n27", "n28", "n29"]
    answer = service.task_log(RequestTaskLog(job_id=JOB))  # this process writes no files
    assert answer.records == [] and not answer.truncated
