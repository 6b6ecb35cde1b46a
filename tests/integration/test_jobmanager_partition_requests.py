"""The JobManager's own partition requests (a savepoint copying chunks only a TaskManager
holds, checkpoint/served_partitions.py), against the session's MiniCluster: a registered
TaskManager answers, an address no TaskManager is registered at is refused at once
rather than after pekko.ask.timeout."""

from __future__ import annotations

import time

import pytest

from flink_runtime.minicluster import MiniCluster
from flink_runtime.rpc.messages import PartitionRequestRefused, RequestPartitionFiles
from flink_runtime.rpc.service import RpcException

pytestmark = pytest.mark.integration

REQUEST = RequestPartitionFiles(data_namespace="ab" * 16, result_id="r-1", partition_number=0)


def test_a_registered_taskmanager_answers_and_an_unknown_address_is_refused_at_once(minicluster: MiniCluster) -> None:
    async def made_in_the_mailbox() -> object:
        return minicluster.jobmanager.blocking_ask()

    ask = minicluster.call(made_in_the_mailbox)
    registered = next(iter(minicluster.jobmanager.task_managers.values())).address
    answer = ask(registered, REQUEST)  # from this (worker) thread, as a savepoint's writer asks
    assert isinstance(answer, PartitionRequestRefused) and answer.kind == "not-found", answer
    assert "does not exist" in answer.reason

    started = time.monotonic()
    with pytest.raises(RpcException, match="no TaskManager is registered at tcp://127.0.0.1:9"):
        ask("tcp://127.0.0.1:9", REQUEST)
    assert time.monotonic() - started < 2  # not the 10 s ask timeout
