"""A real PostgreSQL server for tests: initdb into a temporary folder, `postgres` on a
free loopback port, stopped at the end.

Debian's server binaries (scripts/ensure-postgresql.sh installs them) are used as they
are. PostgreSQL refuses to run as root, so when the tests run as root the server runs
as the `postgres` system user (`runuser`), in a folder that user owns; as anyone else it
runs as that user. Authentication is `trust` on loopback only: the server lives for one
test session, holds throwaway data, and listens on 127.0.0.1 and a socket in its folder.

`PostgresServer.new_database()` gives every test its own empty database (CREATE
DATABASE takes a few milliseconds), so tests never see each other's rows.
"""

from __future__ import annotations

import ctypes
import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flink_runtime.client.local_cluster import free_port

SERVER_USER = "postgres"  # Debian's postgresql package creates it
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class PostgresUnavailable(RuntimeError):
    """The server could not be started; the message says why and what to do."""


def _bin_dir() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise PostgresUnavailable(
        "PostgreSQL's initdb is not installed (looked in /usr/lib/postgresql/*/bin and on PATH); "
        "run scripts/ensure-postgresql.sh (make setup does) to install Debian's postgresql"
    )


class PostgresServer:
    def __init__(self, root: Path, port: int, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.root = root
        self.port = port
        self.process = process
        self.log_path = log_path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "t") -> str:
        """CREATE DATABASE with a unique name; returns its SQLAlchemy URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.create_database(name)
        return self.url(name)

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def dump(self, database: str, path: Path) -> None:
        """``pg_dump`` of ``database`` (its name) as plain SQL into ``path``."""
        self._client("pg_dump", "--no-owner", "--file", str(path), database)

    def restore(self, database: str, path: Path) -> None:
        """Run the SQL of ``path`` (a dump()) in ``database`` (its name), stopping at the first error."""
        self._client("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--file", str(path), database)

    def _client(self, program: str, *args: str) -> None:
        command = [str(_bin_dir() / program), "-h", "127.0.0.1", "-p", str(self.port), "-U", SERVER_USER, *args]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PostgresUnavailable(f"{program} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


def _as_server_user(command: list[str]) -> tuple[list[str], int | None]:
    """The command run as the server's user, and that user's uid (None: ourselves)."""
    if os.geteuid() != 0:
        return command, None
    try:
        uid = pwd.getpwnam(SERVER_USER).pw_uid
    except KeyError:
        raise PostgresUnavailable(
            f"running as root, and there is no {SERVER_USER!r} user for PostgreSQL to run as "
            "(it refuses root); install Debian's postgresql (scripts/ensure-postgresql.sh) or run as another user"
        ) from None
    return ["runuser", "-u", SERVER_USER, "--", *command], uid


@contextmanager
def postgres_server(timeout: float = 60.0) -> Iterator[PostgresServer]:
    """Start a private PostgreSQL server; PostgresUnavailable with the reason if it cannot."""
    bin_dir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="flink-runtime-pg-"))
    data, log_path = root / "data", root / "server.log"
    _, uid = _as_server_user([])
    if uid is not None:
        os.chown(root, uid, -1)
    initdb, _ = _as_server_user(
        [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]
    )
    done = subprocess.run(initdb, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise PostgresUnavailable(f"initdb failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    port = free_port()
    # fsync off: test data need not survive a power cut, and it halves commit latency on a busy disk.
    command, _ = _as_server_user(
        [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1", "-k", str(root)]
        + ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        + ["-c", "max_connections=200", "-c", "shared_buffers=32MB"]
    )
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_end_with_parent
        )
    server = PostgresServer(root, port, process, log_path)
    try:
        _wait_until_accepting(server, timeout)
        yield server
    finally:
        _stop(server)
        shutil.rmtree(root, ignore_errors=True)


def _end_with_parent() -> None:
    """In the server's first process, before exec: the kernel sends it SIGTERM when the test
    process that started it dies, even by SIGKILL (no fixture teardown then). runuser passes
    SIGTERM on to postgres (and SIGKILLs it 2 s later); postgres alone shuts down on it."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _wait_until_accepting(server: PostgresServer, timeout: float) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise PostgresUnavailable(f"postgres exited with {server.process.returncode}:\n{server.log()[-3000:]}")
        try:
            psycopg.connect(
                f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres", connect_timeout=2
            ).close()
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                _stop(server)
                raise PostgresUnavailable(
                    f"postgres did not accept connections within {timeout} s ({exc}):\n{server.log()[-3000:]}"
                ) from None
            time.sleep(0.1)


def _stop(server: PostgresServer) -> None:
    """SIGINT: PostgreSQL's fast shutdown (ends sessions, no waiting for clients)."""
    if server.process.poll() is None:
        # runuser forwards signals to its child; signal the whole session to be sure.
        os.killpg(server.process.pid, 2)
        try:
            server.process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, 9)
            server.process.wait(10)
