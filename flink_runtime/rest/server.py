"""The REST endpoint: uvicorn serving the FastAPI app on the JobManager's event loop.

Sharing the loop means a request handler reads JobManager state between two
mailbox messages, never during one, and mutations still go through the mailbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import uvicorn

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration
from flink_runtime.rest.app import create_app
from flink_runtime.rest.guard import RestGuard
from flink_runtime.rest.leader_proxy import LeaderProxy
from flink_runtime.security import check_rest_exposure, client_verify, rest_tls, rest_token
from flink_runtime.security.hosts import AllowedHosts

if TYPE_CHECKING:
    from flink_runtime.jobmanager.jobmanager import JobManager

log = logging.getLogger(__name__)


class _EmbeddedServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The process that hosts the JobManager owns its signals and stops us itself.
        yield


class RestServer:
    def __init__(self, jobmanager: JobManager, config: Configuration) -> None:
        self.jobmanager = jobmanager
        self.config = config
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._leader_proxy: LeaderProxy | None = None
        self.port = 0
        # Read (and checked) at construction: a bad token file or TLS setting stops the
        # JobManager before it listens anywhere.
        self._token = rest_token(config)
        check_rest_exposure(config, self._token)
        self._tls = rest_tls(config)
        self._hosts = AllowedHosts.from_config(config)
        if self._hosts.any_host:
            log.warning(
                "%s has '*': the REST API answers any Host name, so a web page can reach it through "
                "DNS rebinding; only safe behind a proxy that checks Host itself.",
                cfg.REST_ALLOWED_HOSTS.key,
            )

    @property
    def scheme(self) -> str:
        return "https" if self._tls else "http"

    @property
    def url(self) -> str:
        host = self.config.get(cfg.REST_ADDRESS) or self.config.get(cfg.REST_BIND_ADDRESS)
        return f"{self.scheme}://{host}:{self.port}"

    def request_counts(self) -> tuple[int, int]:
        """(requests received so far, requests being answered now), for an idle timeout."""
        if self._server is None:
            return 0, 0
        state = self._server.server_state
        return state.total_requests, len(state.tasks)

    async def start(self) -> None:
        bind_address = self.config.get(cfg.REST_BIND_ADDRESS)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Inherited by accepted connections. Responses leave as two writes (headers,
        # body); with Nagle on, the body waits for the client's delayed ACK (~40 ms).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind((bind_address, self.config.get(cfg.REST_PORT)))
        except OSError as exc:
            sock.close()
            raise OSError(
                f"cannot bind the REST API to {bind_address}:{self.config.get(cfg.REST_PORT)}: {exc.strerror}; "
                "set rest.port to a free port (0 picks one)"
            ) from None
        self.port = sock.getsockname()[1]
        self._leader_proxy = LeaderProxy(
            create_app(self.jobmanager.gateway, self.config, rest_url=self.url),
            self.jobmanager.gateway,
            verify=client_verify(self.config),
        )
        app = RestGuard(self._leader_proxy, self._token, self.scheme, self._hosts)
        server_config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", **(self._tls or {}))
        self._server = _EmbeddedServer(server_config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="rest-server")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises the startup error
            await asyncio.sleep(0.01)
        # TaskManagers learn where to download job libraries from (GET /blobs/...) in the
        # JobManager's registration answer.
        self.jobmanager.rest_url = self.url

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._server = None
        self._task = None
        if self._leader_proxy is not None:
            await self._leader_proxy.aclose()
