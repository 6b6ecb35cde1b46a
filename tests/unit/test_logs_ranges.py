"""HTTP Range headers against a log file: parsed, resolved, bounded, refused clearly."""

from __future__ import annotations

import pytest

from flink_runtime.logs.ranges import ByteRange, InvalidRange, RangeNotSatisfiable, Slice, parse_range, resolve


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-99", ByteRange(0, 99)),
        ("bytes=100-", ByteRange(100, None)),
        ("bytes=-500", ByteRange(None, 500)),
        ("  Bytes = 5-5 ", ByteRange(5, 5)),
    ],
)
def test_valid_ranges_parse(header: str, expected: ByteRange) -> None:
    assert parse_range(header) == expected


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("bytes=", "expected 'bytes=first-last'"),
        ("bytes=-", "expected 'bytes=first-last'"),
        ("bytes=a-b", "expected 'bytes=first-last'"),
        ("bytes=1-2-3", "expected 'bytes=first-last'"),
        ("bytes=-5-", "expected 'bytes=first-last'"),
        ("bytes=+1-2", "expected 'bytes=first-last'"),
        ("items=0-1", "expected 'bytes=first-last'"),
        ("0-99", "expected 'bytes=first-last'"),
        ("bytes=0-1,5-6", "only one range"),
        ("bytes=99999999999999999999-", r"beyond 2\^63"),
        ("bytes=-9999999999999999999", r"beyond 2\^63"),
    ],
)
def test_malformed_ranges_are_refused_with_the_reason(header: str, problem: str) -> None:
    with pytest.raises(InvalidRange, match=problem):
        parse_range(header)


def test_resolving_against_the_file_size() -> None:
    assert resolve(ByteRange(0, 99), 1000) == Slice(0, 100, 1000, partial=True)
    assert resolve(ByteRange(990, 5000), 1000) == Slice(990, 10, 1000, partial=True)  # cut at the end
    assert resolve(ByteRange(100, None), 1000) == Slice(100, 900, 1000, partial=True)  # open-ended
    assert resolve(ByteRange(None, 10), 1000) == Slice(990, 10, 1000, partial=True)  # suffix
    assert resolve(ByteRange(None, 5000), 1000) == Slice(0, 1000, 1000, partial=True)  # suffix past the start
    assert resolve(ByteRange(0, 99), 1000).content_range == "bytes 0-99/1000"


def test_without_a_range_the_tail_within_the_bound() -> None:
    assert resolve(None, 1000, bound=4096) == Slice(0, 1000, 1000, partial=False)
    assert resolve(None, 0, bound=4096) == Slice(0, 0, 0, partial=False)
    assert resolve(None, 10_000, bound=4096) == Slice(10_000 - 4096, 4096, 10_000, partial=True)


def test_ranges_are_bounded_too() -> None:
    assert resolve(ByteRange(0, None), 10_000, bound=4096) == Slice(0, 4096, 10_000, partial=True)
    # A suffix keeps its end: the last `bound` bytes.
    assert resolve(ByteRange(None, 9000), 10_000, bound=4096) == Slice(10_000 - 4096, 4096, 10_000, partial=True)


@pytest.mark.parametrize(
    ("byte_range", "size", "problem"),
    [
        (ByteRange(1000, None), 1000, "the file has 1000 bytes"),
        (ByteRange(5000, 6000), 1000, "the file has 1000 bytes"),
        (ByteRange(0, 0), 0, "the file has 0 bytes"),
        (ByteRange(10, 5), 1000, "the last byte comes before the first"),
        (ByteRange(None, 0), 1000, "an empty suffix"),
        (ByteRange(None, 10), 0, "an empty suffix"),
    ],
)
def test_unsatisfiable_ranges_say_why_and_the_size(byte_range: ByteRange, size: int, problem: str) -> None:
    with pytest.raises(RangeNotSatisfiable, match=problem) as raised:
        resolve(byte_range, size)
    assert raised.value.file_size == size
