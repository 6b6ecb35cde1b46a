"""The TaskExecutor's smaller components alone: LogService (log_service.py), TaskChannels
(task_channels.py: a task thread's blocking asks through the event loop) and
TaskManagerSpark (spark_session.py), with a fake reader, transport and Spark."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.io.splits import InputSplit
from flink_runtime.rpc.messages import (
    Acknowledge,
    LogFileChunk,
    LogFileInfo,
    LogFiles,
    Message,
    NextInputSplit,
    RequestLogFile,
    RequestNextInputSplit,
    RequestTaskLog,
    ScheduleOrUpdateConsumers,
    TaskLogLines,
)
from flink_runtime.taskmanager import spark_session
from flink_runtime.taskmanager.log_service import LogService
from flink_runtime.taskmanager.shared_data_folder import DataFolderNotShared
from flink_runtime.taskmanager.spark_session import TaskManagerSpark
from flink_runtime.taskmanager.task_channels import TaskChannels
from tests.unit.taskexecutor_fakes import FakeTransport, descriptor


class Reader:
    def __init__(self) -> None:
        self.threads: list[int] = []

    def log_files(self) -> LogFiles:
        self.threads.append(threading.get_ident())
        return LogFiles(files=[LogFileInfo(name="taskexecutor.log", size=3, mtime=0)])

    def log_file(self, request: RequestLogFile) -> LogFileChunk:
        self.threads.append(threading.get_ident())
        return LogFileChunk(name=request.name, offset=0, file_size=3, partial=False, data=b"abc")

    def task_log(self, request: RequestTaskLog) -> TaskLogLines:
        self.threads.append(threading.get_ident())
        return TaskLogLines(records=[f"line of {request.job_id}"])


async def test_the_log_service_reads_off_the_event_loop() -> None:
    reader = Reader()
    logs = LogService(reader)
    assert (await logs.log_files()).files[0].name == "taskexecutor.log"
    assert (await logs.log_file(RequestLogFile(name="taskexecutor.log"))).data == b"abc"
    assert (await logs.task_log(RequestTaskLog(job_id="j-1"))).records == ["line of j-1"]
    assert len(reader.threads) == 3 and threading.get_ident() not in reader.threads


async def test_a_task_thread_asks_the_current_jobmanager_through_the_event_loop() -> None:
    def answer(address: str, message: Message) -> Message:
        assert threading.current_thread() is threading.main_thread(), "asked on the event loop"
        if isinstance(message, RequestNextInputSplit):
            return NextInputSplit(split=InputSplit(split_number=7, payload="/in/part-7"))
        assert isinstance(message, ScheduleOrUpdateConsumers)
        return Acknowledge(ok=message.partition_id != "p-refused", reason="no such attempt")

    transport = FakeTransport(answer)
    jobmanager = ["tcp://jm-1:1"]
    channels = TaskChannels(transport, lambda: "tcp://tm:1", "tm-host", lambda: jobmanager[0], 1.0)
    task = descriptor("e-1")
    next_split = channels.split_requester(task, channels.blocking_ask())
    notify = channels.partition_notifier(task, channels.blocking_ask())

    def task_thread() -> tuple[Any, ...]:
        split = next_split(6)
        jobmanager[0] = "tcp://jm-2:1"  # a new leader: the next ask goes there
        notify("p-1", "/data/p-1")
        with pytest.raises(RuntimeError, match="JobManager refused partition p-refused: no such attempt"):
            notify("p-refused", "/data/p-2")
        return (split,)

    (split,) = await asyncio.to_thread(task_thread)
    assert split == InputSplit(split_number=7, payload="/in/part-7")
    (first, request), (second, ready), _ = transport.asked
    assert first == "tcp://jm-1:1" and second == "tcp://jm-2:1"
    assert isinstance(request, RequestNextInputSplit)
    assert (request.execution_id, request.jobmanager_id, request.host, request.completed_split) == (
        "e-1",
        "jm-1",
        "tm-host",
        6,
    )
    assert isinstance(ready, ScheduleOrUpdateConsumers)
    assert (ready.partition_id, ready.location, ready.data_address) == ("p-1", "/data/p-1", "tcp://tm:1")


class FakeSpark:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, shared: bool) -> None:
        self.acquired: list[dict[str, Any]] = []
        self.checks = 0
        self.released = 0
        self.session = object()
        self.shared = shared
        monkeypatch.setattr(spark_session, "acquire_session", self.acquire)
        monkeypatch.setattr(spark_session, "check_data_folder_shared", self.check)
        monkeypatch.setattr(spark_session, "release_session", self.release)

    def acquire(self, properties: dict[str, Any], **options: Any) -> object:
        self.acquired.append(options)
        return self.session

    def check(self, session: object, folder: str, remote: str | None) -> None:
        self.checks += 1
        if not self.shared:
            raise DataFolderNotShared(f"{folder} is not seen by the cluster")

    def release(self) -> None:
        self.released += 1


def test_the_session_is_started_once_and_the_data_folder_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSpark(monkeypatch, shared=True)
    spark = TaskManagerSpark(Configuration({}), 3, "/data")
    assert spark.session is None
    spark.release()
    assert fake.released == 0, "nothing to give back"
    assert spark.get() is fake.session and spark.get() is fake.session
    assert len(fake.acquired) == 1 and fake.acquired[0]["default_cores"] == 3
    assert fake.checks == 1
    spark.release()
    assert spark.session is None and fake.released == 1


def test_a_data_folder_the_cluster_does_not_see_fails_every_task(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSpark(monkeypatch, shared=False)
    spark = TaskManagerSpark(Configuration({}), 1, "/hidden")
    for _ in range(2):
        with pytest.raises(DataFolderNotShared, match="/hidden is not seen by the cluster"):
            spark.get()
    assert fake.checks == 1, "the verdict is kept"
