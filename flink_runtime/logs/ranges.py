"""HTTP byte ranges of a log file (RFC 9110 section 14), bounded.

`parse_range` reads a `Range` header; `resolve` turns it, against the file's size at
the moment it is read, into the slice to send. The resolution runs where the file is
(the TaskManager for its files), so a growing file is measured once, when it is read.

Log files grow to `env.log.max-file-size` (100 MiB by default): no answer carries more
than `bound` bytes. Without a Range that is the file's tail (the newest lines); a
range longer than the bound is cut to its first `bound` bytes (a suffix range to its
last), and the answer's Content-Range says which bytes came.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What one answer carries at most.
MAX_ANSWER_BYTES = 1 << 20

_SPEC = re.compile(r"^(\d*)-(\d*)$")
# A range position past 2**63 is nonsense, not a big file (and no RPC integer).
_MAX_DIGITS = 19
_MAX_POSITION = 2**63 - 1


class InvalidRange(ValueError):
    """A Range header that does not parse (answered 400)."""


class RangeNotSatisfiable(ValueError):
    """A range that lies outside the file (answered 416 with the file's size)."""

    def __init__(self, message: str, file_size: int) -> None:
        super().__init__(message)
        self.file_size = file_size


@dataclass(frozen=True)
class ByteRange:
    """`bytes=first-last` (inclusive), `bytes=first-` (last None) or `bytes=-n` (first None, last n)."""

    first: int | None
    last: int | None

    def __str__(self) -> str:
        return f"bytes={'' if self.first is None else self.first}-{'' if self.last is None else self.last}"


@dataclass(frozen=True)
class Slice:
    offset: int
    length: int
    file_size: int
    partial: bool  # not the whole file: answered 206 with Content-Range

    @property
    def content_range(self) -> str:
        if self.length == 0:
            return f"bytes */{self.file_size}"
        return f"bytes {self.offset}-{self.offset + self.length - 1}/{self.file_size}"


def parse_range(header: str) -> ByteRange:
    """One byte range from a Range header; InvalidRange names what is wrong."""
    unit, separator, spec = header.strip().partition("=")
    if not separator or unit.strip().lower() != "bytes":
        raise InvalidRange(f"Range {header!r}: expected 'bytes=first-last', 'bytes=first-' or 'bytes=-suffix'.")
    spec = spec.strip()
    if "," in spec:
        raise InvalidRange(f"Range {header!r}: only one range per request is served.")
    match = _SPEC.match(spec)
    if match is None or not (match.group(1) or match.group(2)):
        raise InvalidRange(f"Range {header!r}: expected 'bytes=first-last', 'bytes=first-' or 'bytes=-suffix'.")
    first_text, last_text = match.groups()
    # The lengths first: a megabyte of digits is refused, never converted.
    if (
        len(first_text) > _MAX_DIGITS
        or len(last_text) > _MAX_DIGITS
        or max(int(first_text or 0), int(last_text or 0)) > _MAX_POSITION
    ):
        raise InvalidRange(f"Range {header!r}: positions beyond 2^63 bytes.")
    if not first_text:
        return ByteRange(None, int(last_text))
    return ByteRange(int(first_text), int(last_text) if last_text else None)


def resolve(byte_range: ByteRange | None, file_size: int, bound: int = MAX_ANSWER_BYTES) -> Slice:
    """The slice of a file of `file_size` bytes to answer; RangeNotSatisfiable outside it."""
    if byte_range is None:
        if file_size <= bound:
            return Slice(0, file_size, file_size, partial=False)
        return Slice(file_size - bound, bound, file_size, partial=True)
    first, last = byte_range.first, byte_range.last
    if first is None:
        assert last is not None
        if last == 0 or file_size == 0:
            raise RangeNotSatisfiable(f"{byte_range}: an empty suffix of a {file_size}-byte file.", file_size)
        length = min(last, file_size, bound)
        return Slice(file_size - length, length, file_size, partial=True)
    if last is not None and last < first:
        raise RangeNotSatisfiable(f"{byte_range}: the last byte comes before the first.", file_size)
    if first >= file_size:
        raise RangeNotSatisfiable(f"{byte_range}: the file has {file_size} bytes.", file_size)
    end = file_size - 1 if last is None else min(last, file_size - 1)
    return Slice(first, min(end - first + 1, bound), file_size, partial=True)
