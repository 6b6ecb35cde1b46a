"""ZeroMQ CURVE for the RPC between JobManager and TaskManagers, keyed by the cluster secret.

Every process that knows `security.cluster.secret` derives the same CURVE keypair from
it (scrypt, then Curve25519 via libzmq's own `zmq_curve_public`). A JobManager's or
TaskManager's RPC socket is a CURVE server with that keypair, and every connection it
opens a CURVE client with it; a ZAP handler (`zmq.auth`) accepts only clients that
prove they hold the keypair's secret half. So a peer without the cluster secret cannot
complete a handshake: nothing it sends is read, and the traffic is encrypted.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
from dataclasses import dataclass

import zmq
import zmq.auth.thread
from zmq.utils import z85

log = logging.getLogger(__name__)

ZAP_DOMAIN = "flink-runtime"
# scrypt's cost: ~50 ms once per process, so a guessed secret costs an attacker as much.
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


@dataclass(frozen=True)
class CurveKeys:
    public: bytes  # Z85, 40 characters
    secret: bytes


@functools.lru_cache(maxsize=16)
def curve_keys(cluster_secret: str) -> CurveKeys | None:
    """The keypair of `cluster_secret`; None when there is no secret (plain TCP, which only
    the transport's own tests use: a JobManager or TaskManager always has a secret).
    Cached: a MiniCluster's JobManager and TaskManagers would each pay scrypt otherwise."""
    if not cluster_secret:
        return None
    seed = hashlib.scrypt(cluster_secret.encode(), salt=b"flink-runtime rpc curve v1", dklen=32, **_SCRYPT)
    secret = z85.encode(seed)
    return CurveKeys(public=zmq.curve_public(secret), secret=secret)


def make_server(socket: zmq.Socket, keys: CurveKeys) -> None:
    """Before bind(): accept only CURVE clients holding `keys`."""
    _authenticator(socket.context).allow(keys.public)
    socket.zap_domain = ZAP_DOMAIN.encode()
    socket.curve_server = True
    socket.curve_publickey = keys.public
    socket.curve_secretkey = keys.secret


def make_client(socket: zmq.Socket, keys: CurveKeys) -> None:
    """Before connect(): authenticate with `keys` to a server of the same keys."""
    socket.curve_serverkey = keys.public
    socket.curve_publickey = keys.public
    socket.curve_secretkey = keys.secret


class _AllowedKeys:
    """The ZAP handler's check: the client's public key is one this process serves."""

    def __init__(self) -> None:
        self.keys: set[bytes] = set()
        self._refused: set[bytes] = set()

    def allow(self, key: bytes) -> None:
        self.keys.add(key)

    def callback(self, domain: str, key: bytes) -> bool:
        encoded = z85.encode(key) if len(key) == 32 else key
        if encoded in self.keys:
            return True
        if encoded not in self._refused:  # once per key: a scanner must not flood the log
            self._refused.add(encoded)
            log.warning(
                "RPC connection refused: a peer presented a CURVE key other than the cluster's "
                "(its security.cluster.secret differs from this process's)"
            )
        return False


class _Authenticator:
    def __init__(self, context: zmq.Context) -> None:
        self.allowed = _AllowedKeys()
        self._thread = zmq.auth.thread.ThreadAuthenticator(context, log=logging.getLogger(__name__ + ".zap"))
        self._thread.start()
        self._thread.configure_curve_callback(domain=ZAP_DOMAIN, credentials_provider=self.allowed)

    def allow(self, key: bytes) -> None:
        self.allowed.allow(key)


_lock = threading.Lock()
_authenticators: dict[int, _Authenticator] = {}


def _authenticator(context: zmq.Context) -> _Authenticator:
    # One ZAP handler per context (it binds inproc://zeromq.zap.01), shared by every
    # RPC service of the process (a MiniCluster runs several).
    with _lock:
        authenticator = _authenticators.get(id(context))
        if authenticator is None:
            authenticator = _authenticators[id(context)] = _Authenticator(context)
        return authenticator
