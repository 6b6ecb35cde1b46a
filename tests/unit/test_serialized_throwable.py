"""The failure-cause's `serialized-throwable`: a Java-serialized SerializedThrowable that
Flink 2.3's client can read (rest/serialized_throwable.py; the real CLI was checked by
hand with tests/flink_reference/verify_failure_cause.py)."""

from __future__ import annotations

import base64

import pytest

from flink_runtime.rest.serialized_throwable import complete_failure_cause, failure_cause, serialized_throwable

STREAM_MAGIC = bytes.fromhex("ACED0005")


def java_string(text: str) -> bytes:
    """A string record: TC_STRING (u16 length) or, past 65,535 bytes, TC_LONGSTRING (u64)."""
    data = text.encode("utf-8")  # no U+0000 or astral characters below: modified UTF-8 is UTF-8
    if len(data) <= 0xFFFF:
        return b"\x74" + len(data).to_bytes(2, "big") + data
    return b"\x7c" + len(data).to_bytes(8, "big") + data


def decoded(encoded: str) -> bytes:
    stream = base64.b64decode(encoded, validate=True)
    assert stream[:4] == STREAM_MAGIC
    assert b"org.apache.flink.util.SerializedThrowable" in stream
    return stream


def test_message_class_and_trace_are_string_records_of_the_stream() -> None:
    trace = "java.io.IOException: disk full\n\tat somewhere\n"
    stream = decoded(serialized_throwable("disk full", "java.io.IOException", trace))
    assert java_string("java.io.IOException: disk full") in stream  # Throwable.detailMessage
    assert java_string("java.io.IOException") in stream  # originalErrorClassName
    assert java_string(trace) in stream  # fullStringifiedStackTrace
    assert b"@@" not in stream  # every placeholder replaced


def test_a_message_past_65535_bytes_is_a_long_string_record() -> None:
    message = "x" * 70_000
    stream = decoded(serialized_throwable(message))
    assert java_string(f"java.lang.Exception: {message}") in stream
    assert b"\x7c" + (70_000 + len("java.lang.Exception: ")).to_bytes(8, "big") in stream


@pytest.mark.parametrize("message", ["Prüfung fehlgeschlagen: größer als 5 €", "チェックポイント失敗"])
def test_non_ascii_messages_are_modified_utf8(message: str) -> None:
    assert java_string(f"java.lang.Exception: {message}") in decoded(serialized_throwable(message))


def test_nul_and_astral_characters_use_javas_modified_utf8() -> None:
    stream = decoded(serialized_throwable("a\x00b 😀"))
    # U+0000 as C0 80; U+1F600 as two 3-byte surrogates, never the 4-byte UTF-8 form.
    detail = b"java.lang.Exception: a\xc0\x80b \xed\xa0\xbd\xed\xb8\x80"
    assert b"\x74" + len(detail).to_bytes(2, "big") + detail in stream
    assert "😀".encode() not in stream


def test_failure_cause_has_flinks_three_fields() -> None:
    cause = failure_cause("disk full", "java.io.IOException")
    assert set(cause) == {"class", "stack-trace", "serialized-throwable"}
    assert cause["stack-trace"] == "java.io.IOException: disk full\n"
    decoded(cause["serialized-throwable"])


def test_complete_failure_cause_takes_the_message_from_the_traces_first_line() -> None:
    cause = {"class": "CheckpointFailure", "stack-trace": "CheckpointFailure: no space left\nTraceback ..."}
    completed = complete_failure_cause(cause)
    assert {key: completed[key] for key in cause} == cause
    stream = decoded(completed["serialized-throwable"])
    assert java_string("CheckpointFailure: no space left") in stream
    assert java_string(cause["stack-trace"]) in stream
    assert complete_failure_cause(completed) == completed  # already complete: unchanged
