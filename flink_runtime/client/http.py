"""The one retrying HTTP layer under JobClient (sync) and AsyncJobClient (async): the
same settings (`ClientOptions`: address, REST token, TLS, timeout, retry policy), retry
rule, back-off and error mapping for both.

Which requests are retried:

* Transient problems - connection errors, timeouts, 5xx and 429 answers - are retried
  with bounded exponential back-off (`RetryPolicy`); a server's `Retry-After` (seconds
  or an HTTP date) replaces the back-off, capped by the same maximum. 4xx answers never
  are: the same request would fail the same way. Neither is 501 (not implemented).
* A request that must not run twice (`idempotent=False`: a POST without an id of the
  client's own) is retried only where it cannot have been handled: it was never sent
  (no connection), or the server answered 429/503 ("not handled, try again later").

A standby JobManager (high-availability.type: database) answers through the leader's
REST API; one of an earlier version, or a proxy in front of the cluster, may instead
answer 307/308 with the leader's URL in Location: the request is sent there again,
method, body and headers (the REST token too) unchanged, at most MAX_REDIRECTS times.
httpx's own redirect following is not used because it drops the Authorization header
on the way to another port.

After the last attempt: the last answer's status decides (`raise_for_status`:
RestClientError with the JobManager's messages, JobNotFound for 404), or, with no
answer at all, ClusterUnreachable.
"""

from __future__ import annotations

import email.utils
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import tenacity

from flink_runtime.client.errors import ClusterUnreachable, JobNotFound, RestClientError
from flink_runtime.security import bearer

__all__ = [
    "ClientOptions",
    "RetryPolicy",
    "a_send",
    "error_messages",
    "is_retryable_status",
    "json_object",
    "raise_for_status",
    "send",
]

# Network failures after which the same request may well succeed. Deliberately not all
# of httpx.TransportError: UnsupportedProtocol or LocalProtocolError would fail again.
TRANSIENT_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
# The subset after which the request surely never reached the server: safe to retry even
# for a request that must not run twice (a savepoint trigger).
UNSENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Answers meaning "not handled, try again later", whatever the request was.
UNHANDLED_STATUSES = (429, 503)
# Standby -> leader is one hop; more means JobManagers that disagree about who leads.
MAX_REDIRECTS = 3
REDIRECT_STATUSES = (307, 308)


def is_retryable_status(status: int, idempotent: bool) -> bool:
    if status in UNHANDLED_STATUSES:
        return True
    return idempotent and status >= 500 and status != 501


class RetryableAnswer(Exception):
    """An answer worth retrying (5xx, 429), raised so tenacity retries it."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def retry_after_seconds(response: httpx.Response, now: float | None = None) -> float | None:
    """The server's Retry-After in seconds (RFC 9110: delay-seconds or an HTTP date), or None."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - (time.time() if now is None else now), 0.0)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is retried.

    retries: how often a transient failure is retried before giving up.
    backoff, max_backoff: the first and the largest pause between attempts, in seconds
        (doubling from `backoff`; a server's Retry-After is honoured up to `max_backoff`).
    """

    retries: int = 5
    backoff: float = 0.1
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError(f"back-off must be >= 0 seconds, got {self.backoff} and {self.max_backoff}")

    def wait(self, retry_state: tenacity.RetryCallState) -> float:
        """Seconds before the next attempt: the server's Retry-After, else exponential."""
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        if isinstance(error, RetryableAnswer):
            asked = retry_after_seconds(error.response)
            if asked is not None:
                return min(asked, self.max_backoff)
        return min(self.backoff * 2 ** (retry_state.attempt_number - 1), self.max_backoff)

    def _arguments(self, idempotent: bool, sleep: Callable[[float], Any] | None) -> dict[str, Any]:
        retried_errors = TRANSIENT_ERRORS if idempotent else UNSENT_ERRORS
        arguments: dict[str, Any] = {
            "retry": tenacity.retry_if_exception_type((*retried_errors, RetryableAnswer)),
            "stop": tenacity.stop_after_attempt(self.retries + 1),
            "wait": self.wait,
            "reraise": True,
        }
        if sleep is not None:
            arguments["sleep"] = sleep
        return arguments

    def retrying(self, idempotent: bool, sleep: Callable[[float], None] | None = None) -> tenacity.Retrying:
        return tenacity.Retrying(**self._arguments(idempotent, sleep))

    def async_retrying(
        self, idempotent: bool, sleep: Callable[[float], Awaitable[None]] | None = None
    ) -> tenacity.AsyncRetrying:
        return tenacity.AsyncRetrying(**self._arguments(idempotent, sleep))


@dataclass(frozen=True)
class ClientOptions:
    """What JobClient and AsyncJobClient are both configured with, in one place.

    rest_url: the REST API's base URL, without a trailing slash.
    timeout: seconds for connecting and for each answer (long polls add their wait).
    token: the REST API's bearer token (security.rest.token), if it has one.
    verify: how an https server is verified: True (the system's authorities), an
        ssl.SSLContext (flink_runtime.security.trust(path) for a CA file), or False.
    user_agent: what the requests say they come from (httpx's default if None).
    """

    rest_url: str
    timeout: float = 30.0
    retry_policy: RetryPolicy = RetryPolicy()
    token: str = field(default="", repr=False)
    verify: ssl.SSLContext | bool = True
    user_agent: str | None = None

    def httpx_arguments(self) -> dict[str, Any]:
        """The keyword arguments of httpx.Client and httpx.AsyncClient alike."""
        # Every answer is parsed as JSON: say so, so that a proxy in front answers JSON too.
        headers = {"Accept": "application/json", **bearer(self.token)}
        if self.user_agent:
            headers["User-Agent"] = self.user_agent
        return {"base_url": self.rest_url, "timeout": self.timeout, "verify": self.verify, "headers": headers}


def send(
    client: httpx.Client,
    policy: RetryPolicy,
    method: str,
    path: str,
    *,
    idempotent: bool = True,
    before_attempt: Callable[[], None] | None = None,
    check_status: bool = True,
    sleep: Callable[[float], None] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """One request through `client`, retried as the module docstring says.

    before_attempt: runs before each attempt (e.g. to rewind an upload).
    check_status: raise RestClientError/JobNotFound for an error answer (else return it)."""

    def attempt() -> httpx.Response:
        target = path
        for _ in range(MAX_REDIRECTS + 1):
            if before_attempt is not None:
                before_attempt()
            response = client.request(method, target, **kwargs)
            target = _redirect_target(response)
            if target is None:
                break
        return _retry_if_unhandled(response, idempotent)

    try:
        response = policy.retrying(idempotent, sleep)(attempt)
    except (RetryableAnswer, httpx.TransportError) as exc:
        response = _last_answer(exc, client.base_url)
    if check_status:
        raise_for_status(response)
    return response


async def a_send(
    client: httpx.AsyncClient,
    policy: RetryPolicy,
    method: str,
    path: str,
    *,
    idempotent: bool = True,
    before_attempt: Callable[[], None] | None = None,
    check_status: bool = True,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """`send` for an httpx.AsyncClient (the Airflow triggerer's event loop)."""

    async def attempt() -> httpx.Response:
        target = path
        for _ in range(MAX_REDIRECTS + 1):
            if before_attempt is not None:
                before_attempt()
            response = await client.request(method, target, **kwargs)
            target = _redirect_target(response)
            if target is None:
                break
        return _retry_if_unhandled(response, idempotent)

    try:
        response = await policy.async_retrying(idempotent, sleep)(attempt)
    except (RetryableAnswer, httpx.TransportError) as exc:
        response = _last_answer(exc, client.base_url)
    if check_status:
        raise_for_status(response)
    return response


def _redirect_target(response: httpx.Response) -> str | None:
    """The URL a 307/308 points at, or None for any other answer."""
    if response.status_code not in REDIRECT_STATUSES:
        return None
    location = response.headers.get("Location", "")
    return str(response.request.url.join(location)) if location else None


def _last_answer(error: RetryableAnswer | httpx.TransportError, base_url: httpx.URL) -> httpx.Response:
    """After the last attempt: its answer, or ClusterUnreachable when there was none."""
    if isinstance(error, RetryableAnswer):
        return error.response
    raise ClusterUnreachable(str(base_url).rstrip("/"), error) from error


def _retry_if_unhandled(response: httpx.Response, idempotent: bool) -> httpx.Response:
    if is_retryable_status(response.status_code, idempotent):
        raise RetryableAnswer(response)
    return response


def raise_for_status(response: httpx.Response) -> None:
    """RestClientError (JobNotFound for 404) with the JobManager's messages for an error answer."""
    if response.status_code < 400 and response.status_code not in REDIRECT_STATUSES:
        return
    request = response.request
    error_type = JobNotFound if response.status_code == 404 else RestClientError
    raise error_type(response.status_code, error_messages(response), method=request.method, path=request.url.path)


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The answer's JSON object; RestClientError naming the request for anything else."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        request = response.request
        raise RestClientError(
            response.status_code,
            [f"unexpected answer from {request.method} {request.url.path}: {response.text[:200]!r}"],
            method=request.method,
            path=request.url.path,
        )
    return data


def error_messages(response: httpx.Response) -> list[str]:
    """The JobManager's `{"errors": [...]}`, or the best text available from anything else."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("errors"), list) and data["errors"]:
        return [str(error) for error in data["errors"]]
    text = response.text.strip()
    # A proxy's HTML error page is no help on one line; its status phrase is.
    if text and not text.lstrip().startswith("<") and len(text) <= 500:
        return [f"HTTP {response.status_code}: {text}"]
    return [f"HTTP {response.status_code} {response.reason_phrase}".strip()]
