"""REST errors keep their messages for people and set a server's stack traces apart
(client/errors.py), as Flink's REST API sends them."""

from __future__ import annotations

import pytest

from flink_runtime.client.cli_output import VERBOSE_ENV, print_failure, server_details, verbose_requested
from flink_runtime.client.errors import RestClientError

TRACE = (
    "<Exception on server side:\norg.apache.flink.X: boom\n\tat org.apache.flink.A.b(A.java:1)\n"
    "End of exception on server side>"
)


def test_flinks_internal_error_keeps_its_message_and_sets_the_trace_apart() -> None:
    error = RestClientError(500, ["Internal server error.", TRACE])
    assert error.errors == ["Internal server error."] and error.details == [TRACE]
    assert str(error) == "Internal server error."


def test_a_message_followed_by_java_frames_is_cut_where_they_start() -> None:
    entry = "org.apache.flink.runtime.rest.NotFoundException: Job 01 not found\n\tat org.a.B.c(B.java:9)\nCaused by: x"
    error = RestClientError(404, [entry])
    assert error.errors == ["org.apache.flink.runtime.rest.NotFoundException: Job 01 not found"]
    assert server_details(error) == [entry]


def test_messages_without_a_trace_are_untouched() -> None:
    problems = ["vertices[0].parallelism: must be at least 1", "line one\n  indented detail"]
    error = RestClientError(400, problems)
    assert error.errors == problems and error.details == [] and server_details(error) == []
    assert RestClientError(502, []).errors == ["HTTP 502"]


def test_the_trace_is_printed_only_when_verbose(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(VERBOSE_ENV, raising=False)
    assert not verbose_requested(None) and not verbose_requested("INFO") and verbose_requested("debug")
    monkeypatch.setenv(VERBOSE_ENV, "1")
    assert verbose_requested(None)
    print_failure("Internal server error.", [TRACE], verbose=False)
    quiet = capsys.readouterr().err.splitlines()
    assert quiet[0] == "error: Internal server error." and len(quiet) == 2 and VERBOSE_ENV in quiet[1]
    print_failure("Internal server error.", [TRACE], verbose=True)
    assert "\tat org.apache.flink.A.b" in capsys.readouterr().err
