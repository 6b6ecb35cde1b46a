"""JobEventLog: sequence numbers, bounded reads, long-poll waits."""

from __future__ import annotations

import asyncio
import time

from flink_runtime.jobmanager.events import JobEventLog, SequencedEvent
from flink_runtime.rpc.messages import JobStatusChanged


def event(job_id: str, new_state: str = "RUNNING", old_state: str = "CREATED") -> JobStatusChanged:
    return JobStatusChanged(job_id=job_id, old_state=old_state, new_state=new_state, timestamp=time.time())


def sequences(events: list[SequencedEvent]) -> list[int]:
    return [e.sequence for e in events]


# -- sequence numbers and reads -------------------------------------------------------------------


def test_sequence_numbers_start_at_zero_and_increase() -> None:
    log = JobEventLog()
    assert log.next_sequence == 0
    assert log.read(0) == []
    published = [event("a", "RUNNING"), event("b", "RUNNING"), event("a", "FINISHED", "RUNNING")]
    for item in published:
        log.publish(item)
    assert log.next_sequence == 3
    assert log.read(0) == [SequencedEvent(i, item) for i, item in enumerate(published)]


def test_read_since() -> None:
    log = JobEventLog()
    for i in range(5):
        log.publish(event(f"job-{i}"))
    assert sequences(log.read(2)) == [2, 3, 4]
    assert sequences(log.read(4)) == [4]
    assert log.read(5) == []
    assert log.read(50) == []
    assert sequences(log.read(-3)) == [0, 1, 2, 3, 4]


def test_read_with_job_filter() -> None:
    log = JobEventLog()
    for job in ["a", "b", "a", "c", "a", "b"]:
        log.publish(event(job))
    assert sequences(log.read(0, "a")) == [0, 2, 4]
    assert sequences(log.read(3, "a")) == [4]
    assert sequences(log.read(0, "b")) == [1, 5]
    assert log.read(0, "unknown") == []
    assert all(e.event.job_id == "a" for e in log.read(0, "a"))
    assert sequences(log.read(0, None)) == [0, 1, 2, 3, 4, 5]


def test_capacity_drops_the_oldest() -> None:
    log = JobEventLog(capacity=3)
    for i in range(5):
        log.publish(event("a" if i % 2 == 0 else "b", new_state=f"S{i}"))
    assert log.next_sequence == 5
    held = log.read(0)  # 0 and 1 fell off: the read starts at the first held
    assert sequences(held) == [2, 3, 4]
    assert [e.event.new_state for e in held] == ["S2", "S3", "S4"]
    assert sequences(log.read(1)) == [2, 3, 4]
    assert sequences(log.read(3)) == [3, 4]
    assert sequences(log.read(0, "a")) == [2, 4]
    assert sequences(log.read(1, "b")) == [3]


def test_capacity_one() -> None:
    log = JobEventLog(capacity=1)
    for _ in range(4):
        log.publish(event("a"))
    assert sequences(log.read(0)) == [3]
    assert log.read(4) == []


# -- wait ---------------------------------------------------------------------------------------


async def test_wait_returns_at_once_when_events_exist() -> None:
    log = JobEventLog()
    log.publish(event("a"))
    log.publish(event("b"))
    started = time.monotonic()
    events = await log.wait(0, None, timeout=5)
    assert time.monotonic() - started < 0.1
    assert sequences(events) == [0, 1]
    assert sequences(await log.wait(0, "b", timeout=5)) == [1]


async def test_wait_waits_for_a_publish() -> None:
    log = JobEventLog()
    log.publish(event("a"))
    loop = asyncio.get_running_loop()
    later = event("a", "FINISHED", "RUNNING")
    loop.call_later(0.05, log.publish, later)
    started = time.monotonic()
    events = await log.wait(1, "a", timeout=2)
    elapsed = time.monotonic() - started
    assert events == [SequencedEvent(1, later)]
    assert 0.04 <= elapsed < 1.0


async def test_wait_returns_empty_on_timeout() -> None:
    log = JobEventLog()
    log.publish(event("a"))
    started = time.monotonic()
    assert await log.wait(1, None, timeout=0.1) == []
    assert 0.09 <= time.monotonic() - started < 0.6


async def test_wait_with_zero_timeout_does_not_block() -> None:
    log = JobEventLog()
    started = time.monotonic()
    assert await log.wait(0, None, timeout=0) == []
    assert time.monotonic() - started < 0.05


async def test_wait_ignores_other_jobs_events() -> None:
    log = JobEventLog()
    loop = asyncio.get_running_loop()
    mine = event("mine", "FINISHED", "RUNNING")
    loop.call_later(0.02, log.publish, event("other"))
    loop.call_later(0.04, log.publish, event("other", "FAILED", "RUNNING"))
    loop.call_later(0.08, log.publish, mine)
    started = time.monotonic()
    events = await log.wait(0, "mine", timeout=2)
    assert events == [SequencedEvent(2, mine)]
    assert time.monotonic() - started >= 0.07


async def test_wait_times_out_when_only_other_jobs_publish() -> None:
    log = JobEventLog()
    loop = asyncio.get_running_loop()
    for delay in (0.01, 0.03, 0.05):
        loop.call_later(delay, log.publish, event("other"))
    started = time.monotonic()
    assert await log.wait(0, "mine", timeout=0.15) == []
    elapsed = time.monotonic() - started
    assert 0.14 <= elapsed < 0.6  # the other job's events did not extend or cut the wait
    assert log.next_sequence == 3


async def test_publish_wakes_every_waiter() -> None:
    log = JobEventLog()
    waiters = [asyncio.ensure_future(log.wait(0, job, timeout=2)) for job in ("a", "a", None)]
    await asyncio.sleep(0.01)
    assert not any(w.done() for w in waiters)
    published = event("a")
    log.publish(published)
    results = await asyncio.wait_for(asyncio.gather(*waiters), 1)
    assert results == [[SequencedEvent(0, published)]] * 3


async def test_waits_in_sequence_see_every_event_once() -> None:
    """A long-polling reader that passes last+1 as `since` sees each event exactly once."""
    log = JobEventLog()
    loop = asyncio.get_running_loop()
    for i in range(6):
        loop.call_later(0.01 * (i + 1), log.publish, event("j", f"S{i}"))
    seen: list[int] = []
    since = 0
    while len(seen) < 6:
        batch = await log.wait(since, "j", timeout=1)
        assert batch, "timed out"
        seen.extend(sequences(batch))
        since = batch[-1].sequence + 1
    assert seen == [0, 1, 2, 3, 4, 5]
