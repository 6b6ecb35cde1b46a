"""RPC: RpcService (ZeroMQ on loopback, in-process), RpcEndpoint mailbox, message codec."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import typing
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import zmq

from flink_runtime.io.metrics import IOMetrics
from flink_runtime.io.splits import InputSplit
from flink_runtime.jobgraph.jobgraph import JobGraph, JobVertex, Partitioner
from flink_runtime.rpc.endpoint import RpcEndpoint, handles
from flink_runtime.rpc.messages import (
    PROTOCOL_VERSION,
    Acknowledge,
    AcknowledgeCheckpoint,
    AcknowledgeRegistration,
    AcknowledgeTaskExecutionStates,
    AlreadyRegistered,
    CancelJob,
    CancellationFailure,
    CancellationSuccess,
    CancelTask,
    DeclineCheckpoint,
    DisconnectTaskManager,
    Heartbeat,
    HeartbeatResponse,
    InputGateDeploymentDescriptor,
    JobStatusChanged,
    JobSubmissionFailure,
    LogFileChunk,
    LogFileInfo,
    LogFileRefused,
    LogFiles,
    Message,
    NextInputSplit,
    PartitionFileChunk,
    PartitionFiles,
    PartitionRequestRefused,
    PlanRefused,
    PlanResolved,
    RefuseRegistration,
    RegisterTaskManager,
    ReleasePartitions,
    RequestLogFile,
    RequestLogFiles,
    RequestNextInputSplit,
    RequestPartitionFile,
    RequestPartitionFiles,
    RequestSubpartitionFiles,
    RequestTaskLog,
    RequestThreadDump,
    ResolvePlan,
    ResultPartitionDeploymentDescriptor,
    RpcError,
    ScheduleOrUpdateConsumers,
    SubmitJob,
    SubmitTask,
    SubmitTasks,
    SubpartitionFiles,
    Success,
    TaskDeploymentDescriptor,
    TaskLogLines,
    TaskOperationResult,
    TaskOperationResults,
    ThreadDump,
    TriggerCheckpoint,
    UpdateTaskExecutionState,
    UpdateTaskExecutionStates,
    WireMessage,
)
from flink_runtime.rpc.service import (
    ASK,
    TELL,
    AskTimeoutError,
    Envelope,
    MessageTooLarge,
    RpcException,
    RpcService,
)
from flink_runtime.rpc.supervision import Directive
from tests.helpers.supervision import RecordingSupervisor

JOB_ID = "0123456789abcdef0123456789abcdef"


# -- a small endpoint ------------------------------------------------------------------------


class Probe(RpcEndpoint):
    """Answers Heartbeat at once, CancelJob later (until released), fails on CancelTask."""

    def __init__(self, rpc: RpcService) -> None:
        super().__init__("probe", rpc)
        # Its failures are these tests' own, known and harmless: its parent resumes them.
        self.parent = RecordingSupervisor(Directive.RESUME)
        self.received: list[Message] = []
        self.tasks_seen: list[asyncio.Task[Any] | None] = []
        self.release = asyncio.Event()
        self.told = asyncio.Event()

    def _record(self, message: Message) -> None:
        self.received.append(message)
        self.tasks_seen.append(asyncio.current_task())

    @handles(Heartbeat)
    def on_heartbeat(self, message: Heartbeat) -> HeartbeatResponse:
        self._record(message)
        return HeartbeatResponse(task_manager_id=f"echo-{message.jobmanager_id}")

    @handles(CancelTask)
    def on_cancel_task(self, message: CancelTask) -> TaskOperationResult:
        self._record(message)
        raise ValueError(f"no such execution {message.execution_id}")

    @handles(CancelJob)
    def on_cancel_job(self, message: CancelJob) -> Any:
        self._record(message)

        async def later() -> CancellationSuccess:
            await self.release.wait()
            if message.job_id == "explode":
                raise KeyError("exploded later")
            return CancellationSuccess(job_id=message.job_id)

        return later()

    @handles(DisconnectTaskManager)
    def on_disconnect(self, message: DisconnectTaskManager) -> None:
        self._record(message)
        self.told.set()

    @handles(RegisterTaskManager)
    def on_register(self, message: RegisterTaskManager) -> Message:
        self._record(message)
        if message.protocol_version != PROTOCOL_VERSION:
            return RefuseRegistration(reason=f"protocol version {message.protocol_version} not supported")
        return AcknowledgeRegistration(registration_id="reg-1", jobmanager_id="jm")


@pytest.fixture
async def probe() -> AsyncIterator[Probe]:
    endpoint = Probe(RpcService("127.0.0.1", 0))
    await endpoint.start()
    yield endpoint
    await endpoint.stop()


@pytest.fixture
async def client() -> AsyncIterator[RpcService]:
    service = RpcService("127.0.0.1", 0)
    await service.start(lambda message, reply: None)
    yield service
    await service.close()


async def wait_until(condition: typing.Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.005)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RawDealer:
    """A bare ZeroMQ DEALER, to put arbitrary bytes on the wire."""

    def __init__(self, address: str) -> None:
        self.socket = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(address)

    def send(self, payload: bytes) -> None:
        self.socket.send(payload)

    async def recv(self, timeout: float = 2.0) -> bytes | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return self.socket.recv(zmq.NOBLOCK)
            except zmq.Again:
                await asyncio.sleep(0.005)
        return None

    def close(self) -> None:
        self.socket.close(linger=0)


# -- ask / tell between two services ------------------------------------------------------------


async def test_ask_round_trip(probe: Probe, client: RpcService) -> None:
    answer = await client.ask(probe.address, Heartbeat(jobmanager_id="jm-1"), timeout=2)
    assert answer == HeartbeatResponse(task_manager_id="echo-jm-1")
    assert probe.received == [Heartbeat(jobmanager_id="jm-1")]
    assert probe.address.startswith("tcp://127.0.0.1:")


async def test_many_asks_are_matched_to_their_answers(probe: Probe, client: RpcService) -> None:
    answers = await asyncio.gather(
        *(client.ask(probe.address, Heartbeat(jobmanager_id=str(i)), timeout=2) for i in range(50))
    )
    assert [a.task_manager_id for a in answers] == [f"echo-{i}" for i in range(50)]


async def test_two_endpoints_ask_each_other() -> None:
    first, second = Probe(RpcService()), Probe(RpcService())
    await first.start()
    await second.start()
    try:
        a = await first.rpc.ask(second.address, Heartbeat(jobmanager_id="a"), timeout=2)
        b = await second.rpc.ask(first.address, Heartbeat(jobmanager_id="b"), timeout=2)
        assert a == HeartbeatResponse(task_manager_id="echo-a")
        assert b == HeartbeatResponse(task_manager_id="echo-b")
    finally:
        await first.stop()
        await second.stop()


async def test_tell(probe: Probe, client: RpcService) -> None:
    message = DisconnectTaskManager(task_manager_id="tm-1", reason="shutting down")
    client.tell(probe.address, message)
    await asyncio.wait_for(probe.told.wait(), 2)
    assert probe.received == [message]


async def test_tells_arrive_in_order(probe: Probe, client: RpcService) -> None:
    for i in range(20):
        client.tell(probe.address, Heartbeat(jobmanager_id=str(i)))
    await wait_until(lambda: len(probe.received) == 20)
    assert [m.jobmanager_id for m in probe.received] == [str(i) for i in range(20)]


async def test_ask_to_nobody_times_out(client: RpcService) -> None:
    address = f"tcp://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(AskTimeoutError, match="Heartbeat") as info:
        await client.ask(address, Heartbeat(jobmanager_id="x"), timeout=0.3)
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 1.0
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value, RpcException)
    assert client._pending == {}


async def test_close_fails_pending_asks(client: RpcService) -> None:
    address = f"tcp://127.0.0.1:{free_port()}"
    pending = asyncio.ensure_future(client.ask(address, Heartbeat(jobmanager_id="x"), timeout=5))
    await asyncio.sleep(0.02)
    await client.close()
    with pytest.raises(RpcException, match="closed"):
        await asyncio.wait_for(pending, 1)


async def test_bind_to_taken_port_raises_rpc_exception(client: RpcService) -> None:
    port = int(client.address.rsplit(":", 1)[1])
    other = RpcService("127.0.0.1", port)
    with pytest.raises(RpcException, match="cannot bind"):
        await other.start(lambda message, reply: None)


async def test_fixed_port(client: RpcService) -> None:
    port = free_port()
    service = RpcService("127.0.0.1", port)
    try:
        assert await service.start(lambda message, reply: reply and reply(Acknowledge())) == f"tcp://127.0.0.1:{port}"
        assert await client.ask(service.address, Heartbeat(jobmanager_id="x"), timeout=2) == Acknowledge()
    finally:
        await service.close()


# -- connections and their loss (the stress version is in test_rpc_stress.py) ---------------------


@pytest.fixture
async def watcher() -> AsyncIterator[tuple[RpcService, list[str]]]:
    """A service that watches its connections, as the JobManager does; with the lost addresses."""
    lost: list[str] = []
    service = RpcService("127.0.0.1", 0)
    service.on_disconnect = lost.append
    await service.start(lambda message, reply: None)
    yield service, lost
    await service.close()


async def test_closed_connection_is_reported_until_dropped(watcher: tuple[RpcService, list[str]]) -> None:
    service, lost = watcher
    peer = Probe(RpcService("127.0.0.1", 0))
    await peer.start()
    address = peer.address
    await service.ask(address, Heartbeat(jobmanager_id="x"), timeout=2)
    assert service.connections == [address]
    await peer.stop()
    await wait_until(lambda: address in lost)
    service.disconnect(address)
    assert service.connections == []


async def test_dropped_peer_is_never_reported_and_a_new_connection_is_watched_again(
    watcher: tuple[RpcService, list[str]],
) -> None:
    service, lost = watcher
    peer = Probe(RpcService("127.0.0.1", 0))
    await peer.start()
    try:
        await service.ask(peer.address, Heartbeat(jobmanager_id="x"), timeout=2)
        service.disconnect(peer.address)
        service.disconnect(peer.address)  # twice is harmless
        assert service.connections == []
        # Asking again reconnects, and that connection is watched like the first.
        await service.ask(peer.address, Heartbeat(jobmanager_id="y"), timeout=2)
        assert lost == []
    finally:
        await peer.stop()
    await wait_until(lambda: lost == [peer.address])


async def test_sockets_are_refused_to_other_threads(watcher: tuple[RpcService, list[str]], probe: Probe) -> None:
    service, _ = watcher
    await service.ask(probe.address, Heartbeat(jobmanager_id="x"), timeout=2)

    def from_a_thread(operation: typing.Callable[[], object]) -> BaseException | None:
        try:
            operation()
        except BaseException as exc:
            return exc
        return None

    for operation in (
        lambda: service.disconnect(probe.address),
        lambda: service.tell(probe.address, Heartbeat(jobmanager_id="y")),
    ):
        error = await asyncio.to_thread(from_a_thread, operation)
        assert isinstance(error, RpcException)
        assert "not the thread running the service's event loop" in str(error)
    # Nothing was closed or sent from the other thread.
    assert service.connections == [probe.address]
    assert await service.ask(probe.address, Heartbeat(jobmanager_id="z"), timeout=2)


# -- failures in handlers -----------------------------------------------------------------------


async def test_handler_error_reaches_asker_and_endpoint_keeps_serving(probe: Probe, client: RpcService) -> None:
    with pytest.raises(RpcException, match="ValueError: no such execution e-42") as info:
        await client.ask(probe.address, CancelTask(execution_id="e-42"), timeout=2)
    assert not isinstance(info.value, AskTimeoutError)
    answer = await client.ask(probe.address, Heartbeat(jobmanager_id="next"), timeout=2)
    assert answer == HeartbeatResponse(task_manager_id="echo-next")


async def test_unhandled_message_type_is_an_error_answer(probe: Probe, client: RpcService) -> None:
    with pytest.raises(RpcException, match="does not handle ReleasePartitions"):
        await client.ask(probe.address, ReleasePartitions(job_id=JOB_ID), timeout=2)
    assert await client.ask(probe.address, Heartbeat(jobmanager_id="ok"), timeout=2)


async def test_failing_tell_does_not_stop_the_endpoint(probe: Probe, client: RpcService) -> None:
    client.tell(probe.address, CancelTask(execution_id="e-1"))
    answer = await client.ask(probe.address, Heartbeat(jobmanager_id="after"), timeout=2)
    assert answer == HeartbeatResponse(task_manager_id="echo-after")
    assert probe.received[0] == CancelTask(execution_id="e-1")


async def test_service_level_handler_exception_is_answered(client: RpcService) -> None:
    def handler(message: Message, reply: Any) -> None:
        if isinstance(message, CancelJob):
            raise LookupError("bad job")
        if reply is not None:
            reply(Acknowledge(reason=type(message).__name__))

    server = RpcService()
    await server.start(handler)
    try:
        with pytest.raises(RpcException, match="LookupError: bad job"):
            await client.ask(server.address, CancelJob(job_id="j"), timeout=2)
        client.tell(server.address, CancelJob(job_id="j"))  # raising on a tell is only logged
        assert await client.ask(server.address, Heartbeat(jobmanager_id="x"), timeout=2) == Acknowledge(
            reason="Heartbeat"
        )
    finally:
        await server.close()


# -- answers that come later ------------------------------------------------------------------


async def test_awaitable_answer_does_not_block_the_mailbox(probe: Probe, client: RpcService) -> None:
    finished: list[str] = []

    async def ask(message: Message, label: str) -> Message:
        answer = await client.ask(probe.address, message, timeout=2)
        finished.append(label)
        return answer

    slow = asyncio.ensure_future(ask(CancelJob(job_id="slow-job"), "slow"))
    await wait_until(lambda: len(probe.received) == 1)
    fast = await ask(Heartbeat(jobmanager_id="fast"), "fast")
    assert fast == HeartbeatResponse(task_manager_id="echo-fast")
    assert not slow.done()
    probe.release.set()
    assert await slow == CancellationSuccess(job_id="slow-job")
    assert finished == ["fast", "slow"]


async def test_awaitable_answer_that_fails_is_an_error(probe: Probe, client: RpcService) -> None:
    probe.release.set()
    with pytest.raises(RpcException, match="KeyError"):
        await client.ask(probe.address, CancelJob(job_id="explode"), timeout=2)
    assert await client.ask(probe.address, Heartbeat(jobmanager_id="x"), timeout=2)


# -- frame size ----------------------------------------------------------------------------------


async def test_message_above_framesize_is_not_sent(probe: Probe) -> None:
    sender = RpcService(framesize=1024)
    await sender.start(lambda message, reply: None)
    try:
        big = DisconnectTaskManager(task_manager_id="tm", reason="x" * 2000)
        with pytest.raises(MessageTooLarge, match="DisconnectTaskManager.*pekko.framesize"):
            sender.tell(probe.address, big)
        with pytest.raises(MessageTooLarge):
            await sender.ask(probe.address, big, timeout=1)
        assert sender._pending == {}
        assert sender._dealers == {}  # not even a connection was opened
        # A message that fits goes through, and nothing of the big one arrived before it.
        sender.tell(probe.address, DisconnectTaskManager(task_manager_id="tm", reason="small"))
        await asyncio.wait_for(probe.told.wait(), 2)
        await asyncio.sleep(0.05)
        assert probe.received == [DisconnectTaskManager(task_manager_id="tm", reason="small")]
    finally:
        await sender.close()


async def test_message_at_framesize_limit_is_sent(probe: Probe) -> None:
    envelope_size = len(
        msgspec.msgpack.encode(
            Envelope(PROTOCOL_VERSION, TELL, 0, DisconnectTaskManager(task_manager_id="t", reason=""))
        )
    )
    sender = RpcService(framesize=envelope_size + 100)
    await sender.start(lambda message, reply: None)
    try:
        # One more byte of reason: the string header grows, so stay a little below.
        sender.tell(probe.address, DisconnectTaskManager(task_manager_id="t", reason="y" * 90))
        await asyncio.wait_for(probe.told.wait(), 2)
    finally:
        await sender.close()


# -- protocol version and garbage -----------------------------------------------------------------


async def test_other_protocol_version_is_refused(probe: Probe) -> None:
    raw = RawDealer(probe.address)
    try:
        envelope = Envelope(PROTOCOL_VERSION + 1, ASK, 7, Heartbeat(jobmanager_id="old"))
        raw.send(msgspec.msgpack.encode(envelope))
        payload = await raw.recv()
        assert payload is not None
        answer = msgspec.msgpack.decode(payload, type=Envelope)
        assert answer.correlation_id == 7
        assert isinstance(answer.body, RpcError)
        assert f"incompatible protocol version {PROTOCOL_VERSION + 1}" in answer.body.error
        assert f"speaks {PROTOCOL_VERSION}" in answer.body.error
        assert probe.received == []  # the handler never saw it
    finally:
        raw.close()


async def test_registration_from_other_protocol_version_reaches_the_handler(probe: Probe) -> None:
    raw = RawDealer(probe.address)
    try:
        register = RegisterTaskManager(
            task_manager_id="tm-old", address="tcp://127.0.0.1:1", host="h", slots=1, protocol_version=99
        )
        raw.send(msgspec.msgpack.encode(Envelope(99, ASK, 3, register)))
        payload = await raw.recv()
        assert payload is not None
        answer = msgspec.msgpack.decode(payload, type=Envelope)
        assert answer.correlation_id == 3
        assert answer.body == RefuseRegistration(reason="protocol version 99 not supported")
        assert probe.received == [register]
    finally:
        raw.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\xffnot msgpack at all",
        b"",
        msgspec.msgpack.encode([PROTOCOL_VERSION, ASK, 1, {"type": "NoSuchMessage"}]),
        msgspec.msgpack.encode({"version": 1}),
        # A batch whose entries are not SubmitTasks: refused whole by the decoder.
        msgspec.msgpack.encode(
            [PROTOCOL_VERSION, ASK, 1, {"type": "SubmitTasks", "tasks": [{"type": "CancelTask", "execution_id": "x"}]}]
        ),
        msgspec.msgpack.encode([PROTOCOL_VERSION, ASK, 1, {"type": "SubmitTasks", "tasks": "not a list"}]),
    ],
    ids=["not-msgpack", "empty", "unknown-tag", "not-an-envelope", "batch-of-other-messages", "batch-not-a-list"],
)
async def test_garbage_is_dropped_and_service_keeps_working(probe: Probe, client: RpcService, garbage: bytes) -> None:
    raw = RawDealer(probe.address)
    try:
        raw.send(garbage)
        assert await raw.recv(timeout=0.1) is None  # no answer to garbage
        answer = await client.ask(probe.address, Heartbeat(jobmanager_id="still"), timeout=2)
        assert answer == HeartbeatResponse(task_manager_id="echo-still")
        assert probe.received == [Heartbeat(jobmanager_id="still")]
    finally:
        raw.close()


async def test_multi_frame_message_does_not_stop_the_service(probe: Probe, client: RpcService) -> None:
    raw = RawDealer(probe.address)
    try:
        raw.socket.send_multipart([b"one", b"two"])
        await asyncio.sleep(0.05)
        answer = await client.ask(probe.address, Heartbeat(jobmanager_id="still"), timeout=2)
        assert answer == HeartbeatResponse(task_manager_id="echo-still")
    finally:
        raw.close()


async def test_multi_frame_message_is_dropped_quietly(probe: Probe) -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    raw = RawDealer(probe.address)
    try:
        raw.socket.send_multipart([b"one", b"two"])
        raw.send(msgspec.msgpack.encode(Envelope(PROTOCOL_VERSION, TELL, 0, Heartbeat(jobmanager_id="after"))))
        await wait_until(lambda: len(probe.received) == 1)
        assert errors == []
    finally:
        loop.set_exception_handler(previous)
        raw.close()


async def test_garbage_reply_is_dropped_and_ask_times_out(client: RpcService) -> None:
    """A peer answering with bytes nobody can decode does not break the asker."""
    context = zmq.Context.instance()
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    address = f"tcp://127.0.0.1:{port}"
    try:
        ask = asyncio.ensure_future(client.ask(address, Heartbeat(jobmanager_id="x"), timeout=0.5))
        deadline = time.monotonic() + 2
        while True:
            try:
                identity, _ = router.recv_multipart(zmq.NOBLOCK)
                break
            except zmq.Again:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)
        router.send_multipart([identity, b"\xc1garbage"])
        with pytest.raises(AskTimeoutError):
            await ask
    finally:
        router.close(linger=0)


# -- the message codec ----------------------------------------------------------------------------


def one_of_each_wire_message() -> list[Message]:
    graph = JobGraph(
        name="job",
        job_id=JOB_ID,
        vertices=[
            JobVertex(id="src", name="Source", invokable="number-source", parallelism=2, config={"count": 10}),
            JobVertex(id="sum", name="Sum", invokable="modulo-sum"),
        ],
        config={"restart-strategy.type": "none"},
    )
    graph.connect("src", "sum", keys=["key"])
    descriptor = TaskDeploymentDescriptor(
        job_id=JOB_ID,
        job_name="job",
        execution_id="exec-1",
        jobmanager_id="jm-1",
        allocation_id="alloc-1",
        slot_index=0,
        data_namespace="ns",
        vertex_id="src",
        task_name="Source (1/2)",
        subtask_index=0,
        parallelism=2,
        attempt_number=1,
        invokable="number-source",
        vertex_config={"count": 10, "nested": {"a": [1, 2.5, None, True]}},
        job_config={"k": "v"},
        libraries=["lib.zip"],
        produced_partitions=[
            ResultPartitionDeploymentDescriptor(
                partition_id="p-1",
                result_id="r-1",
                partition_number=0,
                number_of_subpartitions=3,
                partitioner=Partitioner.HASH,
                keys=["key"],
            )
        ],
        input_gates=[
            InputGateDeploymentDescriptor(
                result_id="r-0", partitioner=Partitioner.HASH, consumed_subpartition_index=1, partition_locations=["/a"]
            )
        ],
    )
    return [
        RegisterTaskManager(
            task_manager_id="tm-1",
            address="tcp://127.0.0.1:5000",
            host="host-a",
            slots=4,
            resources={"cpu": 4.0},
            secret="s3cret",
        ),
        AcknowledgeRegistration(registration_id="reg-1", jobmanager_id="jm-1"),
        AlreadyRegistered(registration_id="reg-1", jobmanager_id="jm-1"),
        RefuseRegistration(reason="wrong secret"),
        DisconnectTaskManager(task_manager_id="tm-1", reason="bye"),
        Heartbeat(jobmanager_id="jm-1"),
        HeartbeatResponse(task_manager_id="tm-1", running_executions=["exec-1", "exec-2"]),
        Acknowledge(ok=False, reason="stale"),
        RpcError(error="boom"),
        SubmitJob(job_graph=graph),
        Success(job_id=JOB_ID),
        JobSubmissionFailure(job_id=JOB_ID, reason="cycle", kind="invalid"),
        CancelJob(job_id=JOB_ID),
        CancellationSuccess(job_id=JOB_ID),
        CancellationFailure(job_id=JOB_ID, reason="unknown job"),
        JobStatusChanged(job_id=JOB_ID, old_state="CREATED", new_state="RUNNING", timestamp=1700000000.25),
        SubmitTask(descriptor=descriptor),
        SubmitTasks(tasks=[SubmitTask(descriptor=descriptor), SubmitTask(descriptor=descriptor)]),
        CancelTask(execution_id="exec-1"),
        TaskOperationResult(execution_id="exec-1", success=False, reason="no slot"),
        TaskOperationResults(
            results=[TaskOperationResult(execution_id="exec-1", success=True), RpcError(error="ValueError: boom")]
        ),
        UpdateTaskExecutionState(
            job_id=JOB_ID,
            execution_id="exec-1",
            jobmanager_id="jm-1",
            state="FAILED",
            error="Traceback ...",
            io_metrics=IOMetrics(records_in=3, bytes_in=1024, busy_ms=40),
        ),
        UpdateTaskExecutionStates(
            updates=[
                UpdateTaskExecutionState(job_id=JOB_ID, execution_id="exec-1", jobmanager_id="jm-1", state="RUNNING"),
                UpdateTaskExecutionState(job_id=JOB_ID, execution_id="exec-1", jobmanager_id="jm-1", state="FINISHED"),
            ]
        ),
        AcknowledgeTaskExecutionStates(answers=[Acknowledge(), RpcError(error="boom")]),
        RequestNextInputSplit(job_id=JOB_ID, execution_id="exec-1", jobmanager_id="jm-1", host="host-a"),
        NextInputSplit(split=InputSplit(split_number=3, hosts=["host-a"], payload=[0, 5])),
        ScheduleOrUpdateConsumers(
            job_id=JOB_ID, execution_id="exec-1", jobmanager_id="jm-1", partition_id="p-1", location="/data/r-1/0"
        ),
        ReleasePartitions(job_id=JOB_ID),
        TriggerCheckpoint(job_id=JOB_ID, execution_id="e-1", checkpoint_id=3, timestamp=1.5),
        AcknowledgeCheckpoint(
            job_id=JOB_ID, execution_id="e-1", jobmanager_id="jm-1", checkpoint_id=3, state_handle={"path": "/s"}
        ),
        DeclineCheckpoint(job_id=JOB_ID, execution_id="e-1", jobmanager_id="jm-1", checkpoint_id=3, reason="busy"),
        RequestLogFiles(),
        LogFiles(files=[LogFileInfo(name="tm.log", size=10, mtime=1)], log_name="tm.log"),
        RequestLogFile(name="tm.log", first=0, last=9, max_bytes=100),
        LogFileChunk(name="tm.log", offset=0, file_size=10, partial=False, data=b"0123456789"),
        LogFileRefused(name="../x", kind="invalid-name", reason="not a log file name"),
        RequestTaskLog(job_id=JOB_ID, vertex_id="v", subtask_index=1),
        TaskLogLines(records=["2026-11-23 10:00:00,000 INFO x [job=...] hi"], truncated=True),
        RequestThreadDump(),
        ThreadDump(threads=[("MainThread", '"MainThread" Id=1 RUNNABLE\n\tat run(x.py:1)\n')]),
        RequestSubpartitionFiles(data_namespace=JOB_ID, result_id="r-1", partition_number=0, subpartition_index=1),
        SubpartitionFiles(files={"_COMMITTED.json": 12, "1.jsonl": 40}),
        RequestPartitionFiles(data_namespace=JOB_ID, result_id="r-1", partition_number=0),
        PartitionFiles(files={"split-0/_chunk.json": 80, "split-0/__sub=0/part-0.parquet": 512}),
        RequestPartitionFile(data_namespace=JOB_ID, result_id="r-1", partition_number=0, name="1.jsonl", offset=4),
        PartitionFileChunk(name="1.jsonl", offset=4, file_size=40, data=b"\x00\xff"),
        PartitionRequestRefused(kind="not-found", reason="no such partition"),
        ResolvePlan(
            job_id=JOB_ID,
            libraries=["blob:lib.zip"],
            config={"source": {"format": "text", "paths": ["/in/*.txt"]}, "operators": [{"op": "select"}]},
            input_schemas=['{"type": "struct", "fields": []}', None],
            files=["/in/a.txt"],
            timeout=30.0,
        ),
        PlanResolved(resolved={"input_schemas": ['{"type": "struct"}']}, output_schema='{"type": "struct"}'),
        PlanRefused(
            error="no such column", cause_name="AnalysisException", cause_trace="Traceback ...", user_code=False
        ),
    ]


def test_examples_cover_every_wire_message() -> None:
    assert {type(m) for m in one_of_each_wire_message()} == set(typing.get_args(WireMessage))


@pytest.mark.parametrize("message", one_of_each_wire_message(), ids=lambda m: type(m).__name__)
def test_wire_message_msgpack_round_trip(message: Message) -> None:
    payload = msgspec.msgpack.encode(message)
    assert msgspec.msgpack.decode(payload, type=WireMessage) == message
    envelope = Envelope(PROTOCOL_VERSION, ASK, 12, message)
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(envelope), type=Envelope)
    assert decoded == envelope
    assert type(decoded.body) is type(message)


def test_messages_with_defaults_round_trip() -> None:
    for message in [NextInputSplit(), Acknowledge(), HeartbeatResponse(task_manager_id="t")]:
        assert msgspec.msgpack.decode(msgspec.msgpack.encode(message), type=WireMessage) == message


async def test_every_wire_message_crosses_the_transport(client: RpcService) -> None:
    received: list[Message] = []
    server = RpcService()
    await server.start(lambda message, reply: received.append(message))
    try:
        messages = one_of_each_wire_message()
        for message in messages:
            client.tell(server.address, message)
        await wait_until(lambda: len(received) == len(messages))
        assert received == messages
    finally:
        await server.close()


# -- inside the mailbox ---------------------------------------------------------------------------


async def test_ask_self_runs_inside_the_mailbox(probe: Probe) -> None:
    answer = await probe.ask_self(Heartbeat(jobmanager_id="self"), timeout=1)
    assert answer == HeartbeatResponse(task_manager_id="echo-self")
    assert probe.tasks_seen == [probe._drainer]


async def test_ask_self_errors_raise(probe: Probe) -> None:
    with pytest.raises(RuntimeError, match="ValueError: no such execution e-9"):
        await probe.ask_self(CancelTask(execution_id="e-9"), timeout=1)
    with pytest.raises(RuntimeError, match="does not handle"):
        await probe.ask_self(ReleasePartitions(job_id=JOB_ID), timeout=1)
    probe.release.set()
    assert await probe.ask_self(CancelJob(job_id="j"), timeout=1) == CancellationSuccess(job_id="j")


async def test_ask_self_timeout(probe: Probe) -> None:
    with pytest.raises(TimeoutError):
        await probe.ask_self(CancelJob(job_id="never"), timeout=0.05)


async def test_tell_self_runs_inside_the_mailbox_in_order(probe: Probe) -> None:
    for i in range(5):
        probe.tell_self(Heartbeat(jobmanager_id=str(i)))
    await wait_until(lambda: len(probe.received) == 5)
    assert [m.jobmanager_id for m in probe.received] == ["0", "1", "2", "3", "4"]
    assert set(probe.tasks_seen) == {probe._drainer}


async def test_a_turn_handles_what_is_queued_then_its_end_of_turn_work_then_yields(probe: Probe) -> None:
    order: list[str] = []
    loop = asyncio.get_running_loop()

    def first() -> None:
        order.append("first")
        probe.at_end_of_turn(lambda: order.append("end of turn"))
        loop.call_soon(order.append, "loop callback")

    probe.run_in_mailbox(first)
    for i in range(3):
        probe.run_in_mailbox(order.append, f"queued {i}")
    await wait_until(lambda: "loop callback" in order)
    # Messages already queued are handled in one go, without giving the loop a turn.
    assert order == ["first", "queued 0", "queued 1", "queued 2", "end of turn", "loop callback"]
    # A mailbox that ran dry is woken by the next message.
    probe.run_in_mailbox(order.append, "later")
    await wait_until(lambda: order[-1] == "later")


async def test_tell_self_threadsafe(probe: Probe) -> None:
    await asyncio.to_thread(probe.tell_self_threadsafe, DisconnectTaskManager(task_manager_id="t", reason="r"))
    await asyncio.wait_for(probe.told.wait(), 1)
    assert probe.tasks_seen == [probe._drainer]


async def test_tell_self_threadsafe_from_many_threads_delivers_each_in_its_threads_order(probe: Probe) -> None:
    # Tells that come while the loop has not taken the earlier ones share one wake-up of
    # the loop: none may be lost or overtake another of its thread.
    def tell(thread: int) -> None:
        for n in range(300):
            probe.tell_self_threadsafe(Heartbeat(jobmanager_id=f"{thread}-{n}"))

    threads = [threading.Thread(target=tell, args=(thread,)) for thread in range(6)]
    for thread in threads:
        thread.start()
    await asyncio.to_thread(lambda: [thread.join() for thread in threads])
    await wait_until(lambda: len(probe.received) == 6 * 300)
    for thread in range(6):
        mine = [m.jobmanager_id for m in probe.received if m.jobmanager_id.startswith(f"{thread}-")]
        assert mine == [f"{thread}-{n}" for n in range(300)]
    assert set(probe.tasks_seen) == {probe._drainer}
    # Once taken, a later tell wakes the loop again.
    probe.tell_self_threadsafe(Heartbeat(jobmanager_id="late"))
    await wait_until(lambda: probe.received[-1].jobmanager_id == "late")


async def test_run_async_on_done_runs_inside_the_mailbox(probe: Probe) -> None:
    results: list[tuple[Any, BaseException | None, asyncio.Task[Any] | None]] = []
    done = asyncio.Event()

    def on_done(result: Any, error: BaseException | None) -> None:
        results.append((result, error, asyncio.current_task()))
        if len(results) == 2:
            done.set()

    async def work() -> int:
        await asyncio.sleep(0.01)
        return 42

    async def broken() -> int:
        raise OSError("disk gone")

    probe.run_async(work(), on_done)
    probe.run_async(broken(), on_done)
    await asyncio.wait_for(done.wait(), 1)
    by_result = sorted(results, key=lambda r: r[0] is None)
    assert by_result[0][:2] == (42, None)
    assert by_result[1][0] is None
    assert isinstance(by_result[1][1], OSError)
    assert {r[2] for r in results} == {probe._drainer}
    assert probe._background == set()


async def test_run_in_mailbox_and_schedule_once(probe: Probe) -> None:
    calls: list[tuple[str, asyncio.Task[Any] | None]] = []
    probe.run_in_mailbox(lambda tag: calls.append((tag, asyncio.current_task())), "now")
    probe.schedule_once(0.01, lambda tag: calls.append((tag, asyncio.current_task())), "later")
    await wait_until(lambda: len(calls) == 2)
    assert [c[0] for c in calls] == ["now", "later"]
    assert {c[1] for c in calls} == {probe._drainer}


async def test_schedule_every_ticks_inside_the_mailbox(probe: Probe) -> None:
    ticks: list[asyncio.Task[Any] | None] = []
    probe.schedule_every(0.01, lambda: ticks.append(asyncio.current_task()))
    await wait_until(lambda: len(ticks) >= 3)
    assert set(ticks) == {probe._drainer}


async def test_stop_cancels_background_work() -> None:
    endpoint = Probe(RpcService())
    await endpoint.start()
    task = endpoint.run_async(asyncio.sleep(10))
    await asyncio.sleep(0)  # let it start (a never-started one leaves its coroutine un-awaited)
    await endpoint.stop()
    assert task.cancelled()
    assert endpoint._drainer is not None and endpoint._drainer.done()
