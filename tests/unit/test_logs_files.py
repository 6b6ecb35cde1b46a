"""A process's log files: Flink's names, size rotation, the stdout copy, the task tag."""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime import logs
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.logs.files import file_prefix
from flink_runtime.rpc.messages import TaskDeploymentDescriptor

log = logging.getLogger("tests.logs")
log.setLevel(logging.INFO)


def config(directory: Path, **values: object) -> Configuration:
    return Configuration({"env.log.dir": str(directory), **values})


@pytest.fixture
def opened() -> Iterator[list[logs.ProcessLogs]]:
    """Process logs a test acquires, released after it even when it fails."""
    acquired: list[logs.ProcessLogs] = []
    yield acquired
    for process_logs in acquired:
        while logs.active() is process_logs:
            logs.release(process_logs)


def descriptor(vertex_id: str = "sum", subtask: int = 1, attempt: int = 2) -> TaskDeploymentDescriptor:
    return TaskDeploymentDescriptor(
        job_id="0123456789abcdef0123456789abcdef", job_name="j", execution_id="e", jobmanager_id="jm",
        allocation_id="a", slot_index=0, data_namespace="n", vertex_id=vertex_id, task_name=f"{vertex_id} (2/2)",
        subtask_index=subtask, parallelism=2, attempt_number=attempt, invokable="sleep",
    )  # fmt: skip


def test_file_names_are_flinks_with_role_id_and_host() -> None:
    assert file_prefix("taskexecutor", "tm-1", "host-a") == "flink-runtime-taskexecutor-tm-1-host-a"
    # Whatever a resource id holds, the name stays one plain file name.
    assert file_prefix("jobmanager", "../x/y z", "h") == "flink-runtime-jobmanager-.._x_y_z-h"
    with pytest.raises(ValueError, match="unknown process role"):
        file_prefix("worker", "1", "h")


def test_rotation_by_size_keeps_env_log_max_numbered_files(tmp_path: Path, opened: list) -> None:
    process_logs = logs.acquire(
        config(tmp_path, **{"env.log.max-file-size": "1 kb", "env.log.max": 3}), "taskexecutor", "tm-1"
    )
    opened.append(process_logs)
    for number in range(200):  # ~20 KB: many more rotations than files kept
        log.info("line %04d %s", number, "x" * 60)
    prefix = process_logs.prefix
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == sorted([f"{prefix}.log", f"{prefix}.log.1", f"{prefix}.log.2", f"{prefix}.log.3"])
    for path in tmp_path.iterdir():
        assert path.stat().st_size <= 1024
    # The newest line is in the current file, older ones in .1, .2, .3 in that order.
    assert "line 0199" in (tmp_path / f"{prefix}.log").read_text()
    assert process_logs.log_names_oldest_first() == [f"{prefix}.log.{n}" for n in (3, 2, 1)] + [f"{prefix}.log"]
    first_numbers = [
        int(re.search(r"line (\d{4})", (tmp_path / name).read_text()).group(1))  # type: ignore[union-attr]
        for name in process_logs.log_names_oldest_first()
    ]
    assert first_numbers == sorted(first_numbers) and len(set(first_numbers)) == 4


def test_the_handler_leaves_the_root_logger_when_the_last_user_releases(tmp_path: Path, opened: list) -> None:
    before = list(logging.getLogger().handlers)
    first = logs.acquire(config(tmp_path), "minicluster", "pid1")
    opened.append(first)
    second = logs.acquire(config(tmp_path / "other"), "minicluster", "pid2")
    assert second is first  # one set of files per process
    assert logs.active() is first and len(logging.getLogger().handlers) == len(before) + 1
    logs.release(second)
    assert logs.active() is first
    logs.release(first)
    assert logs.active() is None
    assert logging.getLogger().handlers == before
    log.info("after release")  # no error from a closed handler, nothing written
    assert "after release" not in (tmp_path / f"{first.prefix}.log").read_text()


def test_stdout_is_copied_to_the_out_file_and_still_printed(
    tmp_path: Path, opened: list, capsys: pytest.CaptureFixture[str]
) -> None:
    process_logs = logs.acquire(config(tmp_path), "jobmanager", "8081", capture_stdout=True)
    opened.append(process_logs)
    print("JobManager ready rpc=tcp://x rest=http://y", flush=True)
    print("unflushed line")
    assert (tmp_path / f"{process_logs.prefix}.out").read_text() == (
        "JobManager ready rpc=tcp://x rest=http://y\nunflushed line\n"
    )
    logs.release(process_logs)
    assert not isinstance(sys.stdout, type(process_logs.stdout))
    assert capsys.readouterr().out.startswith("JobManager ready")
    assert process_logs.out_name in [path.name for path in tmp_path.iterdir()]


def test_the_stdout_copy_stops_at_the_size_limit(tmp_path: Path, opened: list) -> None:
    process_logs = logs.acquire(
        config(tmp_path, **{"env.log.max-file-size": "1 kb"}), "jobmanager", "1", capture_stdout=True
    )
    opened.append(process_logs)
    for _ in range(100):
        print("y" * 50)
    text = (tmp_path / process_logs.out_name).read_text()
    assert len(text) < 1200 and text.rstrip().endswith("(env.log.max-file-size)]")


def test_a_bad_setting_is_a_configuration_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="env.log.max"):
        logs.acquire(config(tmp_path, **{"env.log.max": 0}), "jobmanager", "1")
    with pytest.raises(ConfigurationError, match="env.log.max-file-size"):
        logs.acquire(config(tmp_path, **{"env.log.max-file-size": "lots"}), "jobmanager", "1")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigurationError, match="env.log.dir: cannot create"):
        logs.acquire(config(tmp_path / "file" / "logs"), "jobmanager", "1")
    assert logs.active() is None


def test_only_lines_of_a_task_thread_carry_its_tag(tmp_path: Path, opened: list) -> None:
    process_logs = logs.acquire(config(tmp_path), "taskexecutor", "tm-1")
    opened.append(process_logs)

    def task() -> None:
        logs.bind_task(descriptor())
        log.info("inside the task")
        log.warning("failed\nTraceback (most recent call last):\n  boom")

    log.info("before the task")
    thread = threading.Thread(target=task)
    thread.start()
    thread.join()
    log.info("after the task")
    other = threading.Thread(target=lambda: log.info("another thread"))
    other.start()
    other.join()
    assert logs.current_task() is None  # the binding never left the task's thread

    lines = (tmp_path / process_logs.log_name).read_text().splitlines()
    tag = "[job=0123456789abcdef0123456789abcdef vertex=sum subtask=1 attempt=2] "
    tagged = [line for line in lines if tag in line]
    assert [line.split(tag)[1] for line in tagged] == ["inside the task", "failed"]
    assert tagged[0].split(" ", 3)[2:] == ["INFO", f" tests.logs {tag}inside the task"]
    for message in ("before the task", "after the task", "another thread"):
        (line,) = [line for line in lines if line.endswith(message)]
        assert "[job=" not in line
        assert line.split(" ", 3)[3] == f" tests.logs {message}"
