"""The JobStatusChanged log that subscribers read.

Every job status transition is appended with a sequence number. Readers ask for the
events after the last number they saw (`since`) and may wait for new ones (long
poll), so a slow or reconnecting reader never misses a transition. The log is
bounded: the oldest events fall off once it holds `capacity`; a reader that asks
for an event that fell off is told the first number still held.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass

from flink_runtime.rpc.messages import JobStatusChanged


@dataclass(frozen=True)
class SequencedEvent:
    sequence: int
    event: JobStatusChanged


class JobEventLog:
    def __init__(self, capacity: int = 100_000) -> None:
        self._events: deque[SequencedEvent] = deque(maxlen=capacity)
        self._next_sequence = 0
        self._changed = asyncio.Event()

    @property
    def next_sequence(self) -> int:
        return self._next_sequence

    def publish(self, event: JobStatusChanged) -> None:
        self._events.append(SequencedEvent(self._next_sequence, event))
        self._next_sequence += 1
        # Wake every waiter, then re-arm for the next publish.
        self._changed.set()
        self._changed = asyncio.Event()

    def read(self, since: int, job_id: str | None = None) -> list[SequencedEvent]:
        """Events with sequence >= since (optionally for one job)."""
        first = self._events[0].sequence if self._events else self._next_sequence
        start = max(since, first) - first
        return [
            item
            for item in itertools.islice(self._events, start, None)
            if job_id is None or item.event.job_id == job_id
        ]

    async def wait(self, since: int, job_id: str | None, timeout: float) -> list[SequencedEvent]:
        """Events after `since`, waiting up to `timeout` seconds for the first one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            events = self.read(since, job_id)
            remaining = deadline - loop.time()
            if events or remaining <= 0:
                return events
            since = max(since, self._next_sequence)
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return []
