"""Who may talk to the cluster: REST tokens and TLS settings, secret masking."""

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
