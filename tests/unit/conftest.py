"""Fixtures shared by the unit tests that start real RPC endpoints."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from flink_runtime.rpc.endpoint import RpcEndpoint


@pytest.fixture
async def endpoints() -> AsyncIterator[list[RpcEndpoint]]:
    """Endpoints a test started; stopped at its end, last started first."""
    started: list[RpcEndpoint] = []
    yield started
    for endpoint in reversed(started):
        await endpoint.stop()
