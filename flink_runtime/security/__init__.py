"""Who may talk to the cluster, and what a job may touch.

cluster_secret.py  the RPC's cluster secret: configured, made per user on loopback, or refused
rpc_keys.py        the CURVE keys derived from it, for every RPC socket
tokens.py          the REST API's bearer token and TLS files
hosts.py           the Host names the REST API answers to (no DNS rebinding)
paths.py           the directories a job may read and write (security.allowed-directories)
secrets.py         which configuration values are secrets, masked wherever they are shown

This module re-exports the REST side (tokens, TLS) and the masking."""

from flink_runtime.security.secrets import is_secret_key, mask_url_password, masked_config, masked_value
from flink_runtime.security.tokens import (
    RestSecurityError,
    bearer,
    check_rest_exposure,
    client_verify,
    is_loopback,
    rest_tls,
    rest_token,
    trust,
)

__all__ = [
    "RestSecurityError",
    "bearer",
    "check_rest_exposure",
    "client_verify",
    "is_loopback",
    "trust",
    "is_secret_key",
    "mask_url_password",
    "masked_config",
    "masked_value",
    "rest_tls",
    "rest_token",
]
