"""The RPC's cluster secret: configured, made per user on loopback, or refused.

RPC is authenticated always: every JobManager and TaskManager socket is CURVE keyed by a
secret (security/rpc_keys.py), so a process that does not hold it cannot register a
TaskManager, cancel a job or deploy a task. Where the secret comes from:

- `security.cluster.secret`, when set: a cluster across hosts, where the operator gives
  every process the same value;
- a MiniCluster (and the embedded cluster, a MiniCluster process) makes its own
  (`new_secret`) and hands it to its JobManager and TaskManagers in memory: it never
  leaves the process, so it is in no file, command line or environment;
- a standalone JobManager or TaskManager whose RPC stays on loopback shares one with the
  other processes of the same user through a file only that user can read
  (`user_secret`). One secret per user serves every loopback cluster of that user: on one
  host the boundary is the user (a process of the same user can read the other's memory
  and files anyway), so a secret per cluster would protect nothing more, and processes
  started separately need not agree on a cluster name to find it;
- off loopback without `security.cluster.secret`: refused (RpcSecurityError; the CLI
  exits 2 with how to set one), as the REST API is without a token.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.security.tokens import is_loopback

SECRET_FILE = "rpc-secret"


class RpcSecurityError(ConfigurationError):
    """No usable cluster secret; the message says why and what to set."""


def new_secret() -> str:
    """A fresh random secret (256 bits)."""
    return secrets.token_urlsafe(32)


def cluster_secret(config: Configuration, role: str, addresses: Mapping[str, str]) -> str:
    """The secret `role`'s RPC is keyed with.

    `addresses`: the configuration keys naming where this process's RPC binds and whom it
    connects to, with their values. Any of them off loopback needs a configured secret.
    """
    configured = str(config.get(cfg.CLUSTER_SECRET))
    if configured:
        return configured
    exposed = {key: value for key, value in addresses.items() if not is_loopback(value)}
    if exposed:
        where = ", ".join(f"{key}={value!r}" for key, value in exposed.items())
        raise RpcSecurityError(
            f"the {role}'s RPC would be reachable off this host ({where}) without {cfg.CLUSTER_SECRET.key}: "
            f"anyone who reaches its port could register a TaskManager, cancel jobs or deploy tasks. "
            f"Set {cfg.CLUSTER_SECRET.key} to the same random value on the JobManager and every TaskManager "
            f"(in config.yaml readable only by the cluster's user, or FLINK_PROPERTIES; e.g. a value from "
            f"`python -c 'import secrets; print(secrets.token_urlsafe(32))'`), or keep the RPC on "
            f"127.0.0.1 ({', '.join(exposed)})"
        )
    return user_secret()


def runtime_folder(environ: Mapping[str, str] | None = None) -> Path:
    """Where this user's loopback secret lives: `$XDG_RUNTIME_DIR/flink-runtime` (the
    per-user folder a login session gets, 0700, on tmpfs), else
    `$XDG_STATE_HOME/flink-runtime` (default `~/.local/state/flink-runtime`). Never a
    shared folder such as /tmp, where another user could make the folder first; not
    `~/.cache/flink-runtime` either, which holds downloads anyone may read."""
    environ = os.environ if environ is None else environ
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "flink-runtime"
    state = environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "flink-runtime"


def user_secret(folder: Path | None = None) -> str:
    """This user's loopback secret, from `folder`/rpc-secret; made there by the first
    process that needs it (folder 0700, file 0600)."""
    if folder is None:
        try:
            folder = runtime_folder()
        except RuntimeError:  # no HOME, and a user id without a passwd entry (a container)
            raise RpcSecurityError(
                f"this user has no home folder to keep its RPC secret in: set {cfg.CLUSTER_SECRET.key}, "
                "or XDG_RUNTIME_DIR to a folder of this user"
            ) from None
    _private_folder(folder)
    path = folder / SECRET_FILE
    try:
        try:
            return _read(path)
        except FileNotFoundError:
            return _publish(folder, path)
    except OSError as exc:  # a link where the file should be (O_NOFOLLOW), a full disk, ...
        raise RpcSecurityError(
            f"cannot read or make the RPC secret file {path} ({exc.strerror or exc}); remove it if it is "
            f"a link or not a file, or set {cfg.CLUSTER_SECRET.key}"
        ) from None


def _publish(folder: Path, path: Path) -> str:
    # Written whole to a name of our own (O_EXCL), then linked to the shared name: link()
    # fails when the name exists, so of two processes starting at once exactly one
    # publishes, both read the same secret, and nobody ever reads a half-written file.
    temporary = folder / f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(new_secret() + "\n")
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):  # another process was first: its secret is the one
            os.link(temporary, path)
    finally:
        os.unlink(temporary)
    return _read(path)


def _private_folder(folder: Path) -> None:
    try:
        folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise RpcSecurityError(
            f"cannot make {folder} for this user's RPC secret ({exc.strerror or exc}); set "
            f"{cfg.CLUSTER_SECRET.key}, or XDG_RUNTIME_DIR to a folder of this user"
        ) from None
    _check_private(folder, os.lstat(folder), "folder", stat.S_ISDIR)


def _read(path: Path) -> str:
    """The secret in `path`; FileNotFoundError when there is none yet."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(descriptor) as file:
        _check_private(path, os.fstat(file.fileno()), "file", stat.S_ISREG)
        secret = file.read().strip()
    if not secret:
        raise RpcSecurityError(f"the RPC secret file {path} is empty; delete it (the next process makes a new one)")
    return secret


def _check_private(path: Path, status: os.stat_result, kind: str, is_kind: Callable[[int], bool]) -> None:
    """Refuse what another user made, or may read: the secret would be theirs too."""
    if not is_kind(status.st_mode):
        raise RpcSecurityError(
            f"{path} should be a {kind} holding this user's RPC secret but is not (a link, or something "
            f"else); remove it, or set {cfg.CLUSTER_SECRET.key}"
        )
    if status.st_uid != os.geteuid():
        raise RpcSecurityError(
            f"the RPC secret {kind} {path} belongs to user id {status.st_uid}, not to this user "
            f"({os.geteuid()}): whoever owns it knows the secret. Remove it, set XDG_RUNTIME_DIR to a folder "
            f"of this user, or set {cfg.CLUSTER_SECRET.key}"
        )
    mode = stat.S_IMODE(status.st_mode)
    if mode & 0o077:
        if kind == "folder":
            fix = f"Run `chmod 700 {path}` and delete {SECRET_FILE} in it (another user may have read it)"
        else:
            fix = "Delete it (the next process makes a new one; another user may have read this one)"
        raise RpcSecurityError(
            f"the RPC secret {kind} {path} has mode {mode:o}: other users may read it, and with it talk "
            f"to the cluster. {fix}, or set {cfg.CLUSTER_SECRET.key}"
        )
