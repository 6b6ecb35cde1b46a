"""Which configuration values are secrets, and how they are shown: never in clear.

A key is secret when one of its segments (split at `.`, `-`, `_`) names a secret
(`secret`, `password`, `token`, `credential`, ...) or is a key (`key`, `access.key`,
`apikey`, `private-key`): `spark.hadoop.fs.s3a.secret.key`, `security.rest.token`,
`fs.azure.account.key.x.blob.core.windows.net`. A value that is a URL with a password
in it (`jobstore.url: postgresql://user:pw@host/db`) is shown with the password masked,
whatever its key. Flink masks by key the same way (GlobalConfiguration.isSensitive).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "******"

_SEGMENTS = re.compile(r"[.\-_]")
_SECRET_WORDS = ("secret", "password", "passwd", "token", "credential", "passphrase", "jaas")
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.\-]*://[^:/@\s]*:)[^@\s]*@", re.IGNORECASE)
# Spark Connect's form: sc://host:15002/;token=...;user_id=...
_URL_PARAMETER = re.compile(r"(?P<head>;(?:token|password)=)[^;\s]*", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    segments = [segment for segment in _SEGMENTS.split(key.lower()) if segment]
    for segment in segments:
        if any(word in segment for word in _SECRET_WORDS):
            return True
        if segment.endswith("key") and segment not in ("keyed", "keyby"):
            return True
    return False


def mask_url_password(text: str) -> str:
    """`scheme://user:password@host` -> `scheme://user:***@host` and `;token=...` ->
    `;token=***`, anywhere in `text`."""
    return _URL_PARAMETER.sub(r"\g<head>***", _URL_PASSWORD.sub(r"\g<head>***@", text))


def masked_value(key: str, value: Any) -> str:
    if is_secret_key(key) and value not in (None, ""):
        return MASK
    return mask_url_password(str(value))


def masked_config(values: Mapping[str, Any]) -> dict[str, str]:
    """Every value as text, secrets masked: for REST answers and log lines."""
    return {key: masked_value(key, value) for key, value in values.items()}
