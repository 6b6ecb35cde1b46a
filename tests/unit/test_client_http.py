"""The one retrying HTTP layer (client/http.py), sync and async, against httpx.MockTransport."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable

import httpx
import pytest
import tenacity

from flink_runtime.client.errors import ClusterUnreachable, JobNotFound, RestClientError
from flink_runtime.client.http import RetryPolicy, a_send, json_object, retry_after_seconds, send

URL = "http://jm:8081"
Answer = httpx.Response | Exception


def scripted(*answers: Answer) -> tuple[list[httpx.Request], Callable[[httpx.Request], httpx.Response]]:
    """A handler answering `answers` in turn (the last one for ever) and the requests it saw."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers[min(len(seen), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return seen, handler


def busy(status: int = 503, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"errors": ["busy"]}, headers=headers)


def ok() -> httpx.Response:
    return httpx.Response(200, json={"ok": True})


def sync_send(*answers: Answer, method: str = "GET", idempotent: bool = True, policy: RetryPolicy | None = None):
    """(response or raised error, requests seen, pauses asked for)"""
    seen, handler = scripted(*answers)
    pauses: list[float] = []
    with httpx.Client(base_url=URL, transport=httpx.MockTransport(handler)) as client:
        try:
            result: object = send(
                client, policy or RetryPolicy(), method, "/x", idempotent=idempotent, sleep=pauses.append
            )
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            result = exc
    return result, seen, pauses


async def async_send(*answers: Answer, idempotent: bool = True, policy: RetryPolicy | None = None):
    seen, handler = scripted(*answers)
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    async with httpx.AsyncClient(base_url=URL, transport=httpx.MockTransport(handler)) as client:
        try:
            result: object = await a_send(
                client, policy or RetryPolicy(), "GET", "/x", idempotent=idempotent, sleep=sleep
            )
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            result = exc
    return result, seen, pauses


def test_a_busy_answer_is_retried_with_exponential_bounded_back_off() -> None:
    result, seen, pauses = sync_send(busy(), busy(), busy(), busy(), ok(), policy=RetryPolicy(5, 0.5, 1.5))
    assert isinstance(result, httpx.Response) and result.json() == {"ok": True}
    assert len(seen) == 5
    assert pauses == [0.5, 1.0, 1.5, 1.5]


@pytest.mark.parametrize("header", ["7", "HTTP-DATE"])
def test_retry_after_is_honoured_in_seconds_and_as_a_date_up_to_the_cap(header: str) -> None:
    if header == "HTTP-DATE":
        header = email.utils.formatdate(time.time() + 7, usegmt=True)
    _, _, pauses = sync_send(busy(429, **{"Retry-After": header}), ok(), policy=RetryPolicy(3, 0.1, 30.0))
    assert 5.0 <= pauses[0] <= 7.0
    _, _, capped = sync_send(busy(429, **{"Retry-After": "600"}), ok(), policy=RetryPolicy(3, 0.1, 2.0))
    assert capped == [2.0]


def test_an_unreadable_retry_after_falls_back_to_the_back_off() -> None:
    assert retry_after_seconds(busy(**{"Retry-After": "soon"})) is None
    _, _, pauses = sync_send(busy(**{"Retry-After": "soon"}), ok(), policy=RetryPolicy(3, 0.25, 2.0))
    assert pauses == [0.25]


def test_a_client_error_is_not_retried_and_carries_the_servers_message() -> None:
    result, seen, _ = sync_send(httpx.Response(400, json={"errors": ["vertex 'v' has no invokable"]}))
    assert isinstance(result, RestClientError) and result.status_code == 400
    assert str(result) == "vertex 'v' has no invokable" and result.method == "GET" and result.path == "/x"
    assert len(seen) == 1
    missing, _, _ = sync_send(httpx.Response(404, json={"errors": ["Job j not found"]}))
    assert isinstance(missing, JobNotFound)


def test_a_post_that_may_have_run_is_not_retried_but_an_unsent_or_unhandled_one_is() -> None:
    # 500 after a POST: it may have run; a retry could run it twice.
    result, seen, _ = sync_send(busy(500), ok(), method="POST", idempotent=False)
    assert isinstance(result, RestClientError) and result.status_code == 500 and len(seen) == 1
    # A read timeout: the request was sent and may be running.
    result, seen, _ = sync_send(httpx.ReadTimeout("slow"), ok(), method="POST", idempotent=False)
    assert isinstance(result, ClusterUnreachable) and len(seen) == 1
    # Never sent (no connection), or "not handled, try later" (503, 429): retried.
    for first in (httpx.ConnectError("refused"), busy(503), busy(429)):
        result, seen, _ = sync_send(first, ok(), method="POST", idempotent=False)
        assert isinstance(result, httpx.Response) and result.status_code == 200 and len(seen) == 2


def test_when_attempts_run_out_the_last_answer_or_the_unreachable_cluster_is_reported() -> None:
    result, seen, _ = sync_send(busy(502), policy=RetryPolicy(2, 0.0, 0.0))
    assert isinstance(result, RestClientError) and result.status_code == 502 and len(seen) == 3
    result, seen, _ = sync_send(httpx.ConnectError("refused"), policy=RetryPolicy(1, 0.0, 0.0))
    assert isinstance(result, ClusterUnreachable) and len(seen) == 2
    assert URL in str(result) and "refused" in str(result)


def test_501_is_not_retried() -> None:
    result, seen, _ = sync_send(busy(501), ok())
    assert isinstance(result, RestClientError) and result.status_code == 501 and len(seen) == 1


async def test_the_async_side_retries_the_same_way_and_honours_retry_after() -> None:
    result, seen, pauses = await async_send(
        busy(503, **{"Retry-After": "1.5"}), httpx.ConnectError("refused"), ok(), policy=RetryPolicy(3, 0.25, 10.0)
    )
    assert isinstance(result, httpx.Response) and result.status_code == 200 and len(seen) == 3
    assert pauses == [1.5, 0.5]
    result, seen, _ = await async_send(httpx.Response(409, json={"errors": ["no"]}))
    assert isinstance(result, RestClientError) and result.status_code == 409 and len(seen) == 1
    result, _, _ = await async_send(httpx.ConnectError("refused"), policy=RetryPolicy(0))
    assert isinstance(result, ClusterUnreachable)


def test_json_object_refuses_anything_but_an_object_and_names_the_request() -> None:
    request = httpx.Request("GET", f"{URL}/jobs/overview")
    with pytest.raises(RestClientError, match="unexpected answer from GET /jobs/overview"):
        json_object(httpx.Response(200, text="<html>proxy</html>", request=request))
    assert json_object(httpx.Response(200, json={"jobs": []}, request=request)) == {"jobs": []}


def test_a_policy_refuses_negative_settings() -> None:
    with pytest.raises(ValueError, match="retries must be >= 0"):
        RetryPolicy(retries=-1)
    with pytest.raises(ValueError, match="back-off"):
        RetryPolicy(backoff=-1.0)
    assert isinstance(RetryPolicy().retrying(idempotent=True), tenacity.Retrying)


# -- a standby JobManager's redirect to the leader ------------------------------------------------


def standby_and_leader(
    hops_to_leader: int = 1,
) -> tuple[list[httpx.Request], Callable[[httpx.Request], httpx.Response]]:
    """jm-standby answers 307 to jm-leader (which may redirect on, `hops_to_leader`)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) <= hops_to_leader:
            return httpx.Response(
                307,
                headers={"Location": f"http://jm-leader:9{len(seen)}/jobs?mode=x"},
                json={"errors": ["this JobManager is a standby"]},
            )
        return httpx.Response(202, json={"jobid": "j1"})

    return seen, handler


def test_a_standby_redirect_is_followed_with_method_body_and_token() -> None:
    seen, handler = standby_and_leader()
    headers = {"Authorization": "Bearer s3cret"}
    with httpx.Client(base_url="http://jm-standby:8081", transport=httpx.MockTransport(handler), headers=headers) as c:
        response = send(c, RetryPolicy(), "POST", "/jobs", content=b'{"a": 1}', idempotent=False)
    assert response.json() == {"jobid": "j1"}
    assert [str(r.url) for r in seen] == ["http://jm-standby:8081/jobs", "http://jm-leader:91/jobs?mode=x"]
    leader = seen[1]
    assert (leader.method, leader.content, leader.headers["authorization"]) == ("POST", b'{"a": 1}', "Bearer s3cret")


def test_endless_redirects_end_in_a_clear_error() -> None:
    seen, handler = standby_and_leader(hops_to_leader=100)
    transport = httpx.MockTransport(handler)
    with (
        httpx.Client(base_url="http://jm-standby:8081", transport=transport) as client,
        pytest.raises(RestClientError, match="standby") as info,
    ):
        send(client, RetryPolicy(), "GET", "/jobs")
    assert info.value.status_code == 307 and len(seen) == 4  # the first request and MAX_REDIRECTS more


async def test_the_async_layer_follows_the_redirect_too() -> None:
    seen, handler = standby_and_leader()
    async with httpx.AsyncClient(base_url="http://jm-standby:8081", transport=httpx.MockTransport(handler)) as client:
        response = await a_send(client, RetryPolicy(), "GET", "/jobs")
    assert response.status_code == 202 and str(seen[1].url) == "http://jm-leader:91/jobs?mode=x"
