"""Flink's ``failure-cause`` JSON, with a ``serialized-throwable`` Flink 2.3's CLI can read.

Why: Flink 2.3's client reads an asynchronous operation's ``failure-cause`` (savepoint,
stop-with-savepoint, checkpoint trigger status) only through its
``serialized-throwable`` field: base64 of a Java-serialized
``org.apache.flink.util.SerializedThrowable`` (SerializedThrowableDeserializer reads
that field alone, deserializes it and casts it). A missing field, bytes that are not
Java serialization, or another class (a plain ``java.lang.Exception``) fail the
response's parsing with an IOException, which the client takes for a connection
problem and retries (``rest.retry.max-attempts`` x ``rest.retry.delay``, 20 x 3 s),
until the CLI gives up after ``client.timeout`` (60 s) with a TimeoutException and
never shows the reason. tests/flink_reference/verify_failure_cause.py runs the real CLI
against each kind of answer.

So a Python server must produce those bytes. TEMPLATE is a SerializedThrowable
serialized once by the JDK (MakeTemplate.java in the README) with three placeholder
strings: its message (Throwable.detailMessage, which Flink 2.3 fills with
``"<class>: <message>"``), ``originalErrorClassName`` and
``fullStringifiedStackTrace``; its ``serializedException`` is null, which Flink
allows (the original could not be serialized) and then uses the SerializedThrowable
itself. In Java serialization a string is a record ``0x74 <u16 length> <modified
UTF-8>`` (``0x7C <u64 length>`` past 65,535 bytes) and nothing else refers to its
length, so replacing the three records keeps the stream valid.
"""

from __future__ import annotations

import base64
from typing import Any

__all__ = ["complete_failure_cause", "failure_cause", "serialized_throwable"]

TEMPLATE = (
    "rO0ABXNyAClvcmcuYXBhY2hlLmZsaW5rLnV0aWwuU2VyaWFsaXplZFRocm93YWJsZWUWnfUfpxPzAgADTAAZZnVsbFN0cmluZ2lmaWVk"
    "U3RhY2tUcmFjZXQAEkxqYXZhL2xhbmcvU3RyaW5nO0wAFm9yaWdpbmFsRXJyb3JDbGFzc05hbWVxAH4AAVsAE3NlcmlhbGl6ZWRFeGNl"
    "cHRpb250AAJbQnhyABNqYXZhLmxhbmcuRXhjZXB0aW9u0P0fPho7HMQCAAB4cgATamF2YS5sYW5nLlRocm93YWJsZdXGNSc5d7jLAwAE"
    "TAAFY2F1c2V0ABVMamF2YS9sYW5nL1Rocm93YWJsZTtMAA1kZXRhaWxNZXNzYWdlcQB+AAFbAApzdGFja1RyYWNldAAeW0xqYXZhL2xh"
    "bmcvU3RhY2tUcmFjZUVsZW1lbnQ7TAAUc3VwcHJlc3NlZEV4Y2VwdGlvbnN0ABBMamF2YS91dGlsL0xpc3Q7eHBwdAAgamF2YS5sYW5n"
    "LkV4Y2VwdGlvbjogQEBNRVNTQUdFQEB1cgAeW0xqYXZhLmxhbmcuU3RhY2tUcmFjZUVsZW1lbnQ7AkYqPDz9IjkCAAB4cAAAAABzcgAf"
    "amF2YS51dGlsLkNvbGxlY3Rpb25zJEVtcHR5TGlzdHq4F7Q8p57eAgAAeHB4dAAJQEBUUkFDRUBAdAAJQEBDTEFTU0BAcA=="
)
_DETAIL, _CLASS, _TRACE = "java.lang.Exception: @@MESSAGE@@", "@@CLASS@@", "@@TRACE@@"


def _modified_utf8(text: str) -> bytes:
    """Java's DataOutput.writeUTF encoding: UTF-16 code units, U+0000 as C0 80."""
    out = bytearray()
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        unit = int.from_bytes(units[i : i + 2], "big")
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes((0xC0 | unit >> 6, 0x80 | unit & 0x3F))
        else:
            out += bytes((0xE0 | unit >> 12, 0x80 | (unit >> 6) & 0x3F, 0x80 | unit & 0x3F))
    return bytes(out)


def _java_string(text: str) -> bytes:
    data = _modified_utf8(text)
    if len(data) <= 0xFFFF:
        return b"\x74" + len(data).to_bytes(2, "big") + data
    return b"\x7c" + len(data).to_bytes(8, "big") + data


def serialized_throwable(message: str, class_name: str = "java.lang.Exception", stack_trace: str | None = None) -> str:
    """Base64 of a Java-serialized SerializedThrowable saying ``class_name: message``."""
    stream = base64.b64decode(TEMPLATE)
    trace = stack_trace if stack_trace is not None else f"{class_name}: {message}\n"
    for placeholder, value in ((_DETAIL, f"{class_name}: {message}"), (_CLASS, class_name), (_TRACE, trace)):
        needle = _java_string(placeholder)
        assert stream.count(needle) == 1, placeholder
        stream = stream.replace(needle, _java_string(value))
    return base64.b64encode(stream).decode("ascii")


def failure_cause(
    message: str, class_name: str = "java.lang.Exception", stack_trace: str | None = None
) -> dict[str, Any]:
    """A ``failure-cause`` object as Flink 2.3 writes it: class, stack-trace, serialized-throwable."""
    trace = stack_trace if stack_trace is not None else f"{class_name}: {message}\n"
    return {
        "class": class_name,
        "stack-trace": trace,
        "serialized-throwable": serialized_throwable(message, class_name, trace),
    }


def complete_failure_cause(cause: dict[str, Any]) -> dict[str, Any]:
    """`cause` (the JobManager's ``{"class", "stack-trace"}``) with its
    ``serialized-throwable``. The message is the trace's first line without its
    ``"<class>: "`` prefix, the line a Java stack trace starts with too."""
    if "serialized-throwable" in cause:
        return cause
    class_name = str(cause.get("class") or "java.lang.Exception")
    trace = str(cause.get("stack-trace") or "")
    message = trace.split("\n", 1)[0].removeprefix(f"{class_name}: ")
    return {**cause, "serialized-throwable": serialized_throwable(message, class_name, trace or None)}
