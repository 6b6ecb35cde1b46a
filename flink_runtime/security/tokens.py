"""The REST API's credentials: its bearer token and its TLS files, read from the configuration.

The token is the boundary: whoever holds it may submit jobs, and a job runs code on
the TaskManagers. So a JobManager refuses to serve REST on a non-loopback address
without one, unless `security.rest.allow-unauthenticated` says the operator accepts
that risk (a private network, a proxy in front that authenticates).
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration, ConfigurationError


class RestSecurityError(ConfigurationError):
    """The REST security settings are unusable; the message says which key and what to do."""


def rest_token(config: Configuration) -> str:
    """The configured token (`security.rest.token`, or the first line of
    `security.rest.token-file`); "" when neither is set."""
    token = config.get(cfg.REST_TOKEN).strip()
    token_file = config.get(cfg.REST_TOKEN_FILE)
    if token and token_file:
        raise RestSecurityError(f"set either {cfg.REST_TOKEN.key} or {cfg.REST_TOKEN_FILE.key}, not both")
    if token_file:
        try:
            lines = Path(token_file).read_text().splitlines()
        except OSError as exc:
            raise RestSecurityError(
                f"{cfg.REST_TOKEN_FILE.key}: cannot read {token_file}: {exc.strerror or exc}"
            ) from None
        token = lines[0].strip() if lines else ""
        if not token:
            raise RestSecurityError(
                f"{cfg.REST_TOKEN_FILE.key}: {token_file} is empty; put the token on its first line"
            )
    return token


def is_loopback(address: str) -> bool:
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def check_rest_exposure(config: Configuration, token: str) -> None:
    """Refuse an unauthenticated REST API on an address other machines can reach."""
    bind_address = config.get(cfg.REST_BIND_ADDRESS)
    if token or is_loopback(bind_address) or config.get(cfg.REST_ALLOW_UNAUTHENTICATED):
        return
    raise RestSecurityError(
        f"the REST API would listen on {bind_address!r} without authentication: anyone who reaches "
        f"that port could submit a job, and a job runs code on the cluster. Set {cfg.REST_TOKEN.key} "
        f"(or {cfg.REST_TOKEN_FILE.key}) and give clients the token (CLI --token, the Airflow "
        f"connection's password), bind to 127.0.0.1 ({cfg.REST_BIND_ADDRESS.key}), or accept the risk "
        f"with {cfg.REST_ALLOW_UNAUTHENTICATED.key}: true"
    )


def rest_tls(config: Configuration) -> dict[str, str] | None:
    """uvicorn's ssl_certfile/ssl_keyfile when `security.ssl.rest.enabled`, else None."""
    if not config.get(cfg.SSL_REST_ENABLED):
        return None
    files = {}
    for option, name in ((cfg.SSL_REST_CERTIFICATE, "ssl_certfile"), (cfg.SSL_REST_KEY, "ssl_keyfile")):
        path = config.get(option)
        if not path:
            raise RestSecurityError(f"{cfg.SSL_REST_ENABLED.key} is true but {option.key} is not set (a PEM file)")
        if not Path(path).is_file():
            raise RestSecurityError(f"{option.key}: no such file {path}")
        files[name] = path
    return files


def client_verify(config: Configuration) -> ssl.SSLContext | bool:
    """What an HTTPS client of the REST API verifies the server with: the configured
    `security.ssl.rest.truststore`, else the system's certificate authorities."""
    truststore = config.get(cfg.SSL_REST_TRUSTSTORE)
    if not truststore:
        return True
    return trust(truststore)


def trust(truststore: str) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=truststore)
    except (OSError, ssl.SSLError) as exc:
        raise RestSecurityError(
            f"{cfg.SSL_REST_TRUSTSTORE.key}: cannot load {truststore} as PEM certificates: {exc}"
        ) from None


def bearer(token: str) -> dict[str, Any]:
    """The request header that carries `token` (none when empty)."""
    return {"Authorization": f"Bearer {token}"} if token else {}
