"""Apache Flink's own command-line client, installed once and cached, for tests.

Why: our REST API follows Flink's paths and field names, and the proof that it does is
Flink's real tools (``bin/flink list``, ``savepoint``, ``stop``, ``cancel``,
``checkpoint``) working against our cluster. The ``apache-flink`` wheel on PyPI ships
the whole Flink distribution (``bin/``, ``lib/``, ``conf/``) inside its ``pyflink``
package, so a virtualenv with that wheel is a Flink installation we can get from a
package registry.

The virtualenv lives in a cache outside the repository (``$FLINK_RUNTIME_TOOL_CACHE``,
else ``$XDG_CACHE_HOME/flink-runtime``, else ``~/.cache/flink-runtime``) and is built
once with ``uv``: a stamp file is written only after a complete install, and a file
lock (``fcntl``) makes a second pytest process wait instead of installing alongside.
A failed install raises :class:`FlinkToolError` naming the command, its exit code and
the last lines of its output: tests ``pytest.fail`` with it, never skip.

:func:`flink_cli` runs ``$FLINK_HOME/bin/flink`` with Java 17, a private copy of the
configuration (the cached install's ``conf/`` is never written to) and a time limit.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

FLINK_VERSION = "2.3.0"
"""The apache-flink release we hold our REST API against."""

CACHE_ENV = "FLINK_RUNTIME_TOOL_CACHE"
STAMP = ".flink-runtime-installed.json"
INSTALL_TIMEOUT = 900.0
"""Seconds one install command may take (a cold download of the wheels is ~500 MB)."""

# CLI actions that talk to a running cluster, so take `-m host:port`.
_CLUSTER_ACTIONS = frozenset({"run", "list", "info", "cancel", "stop", "savepoint", "checkpoint"})


class FlinkToolError(RuntimeError):
    """Installing or running Flink's tools failed; the message says what and how."""


def cache_root() -> Path:
    """The folder that holds the cached installs (created if missing)."""
    if os.environ.get(CACHE_ENV):
        root = Path(os.environ[CACHE_ENV])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        root = base / "flink-runtime"
    root.mkdir(parents=True, exist_ok=True)
    return root


def venv_dir(version: str = FLINK_VERSION) -> Path:
    return cache_root() / f"apache-flink-{version}"


def flink_home(version: str = FLINK_VERSION) -> Path:
    """FLINK_HOME of a cached ``apache-flink==version``: the ``pyflink`` package folder.

    Installs it on the first call on this machine (about a minute) and returns at once
    after that. Raises FlinkToolError when the install fails.
    """
    venv = venv_dir(version)
    home = _installed_home(venv)
    if home is not None:
        return home
    with _locked(venv.with_name(venv.name + ".lock")):
        home = _installed_home(venv)  # another process may have finished meanwhile
        if home is not None:
            return home
        return _install(venv, version)


def flink_python(version: str = FLINK_VERSION) -> Path:
    """The cached virtualenv's interpreter, which has pyflink (for ``flink run -py``)."""
    flink_home(version)
    return venv_dir(version) / "bin" / "python"


def _installed_home(venv: Path) -> Path | None:
    stamp = venv / STAMP
    if not stamp.is_file():
        return None
    home = Path(json.loads(stamp.read_text())["flink_home"])
    return home if (home / "bin" / "flink").is_file() else None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _uv() -> str:
    """uv from the running interpreter's environment, else from PATH."""
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file():
        return str(beside)
    found = shutil.which("uv")
    if found is None:
        raise FlinkToolError(f"cannot install apache-flink: no `uv` beside {sys.executable} nor on PATH")
    return found


def _run_step(command: Sequence[str], what: str, env: Mapping[str, str] | None = None) -> str:
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, timeout=INSTALL_TIMEOUT, env=dict(env or os.environ)
        )
    except subprocess.TimeoutExpired as exc:
        raise FlinkToolError(f"{what}: `{' '.join(command)}` did not finish within {INSTALL_TIMEOUT:.0f} s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        raise FlinkToolError(f"{what}: `{' '.join(command)}` exited with {done.returncode}:\n{tail}")
    return done.stdout


def _install(venv: Path, version: str) -> Path:
    if venv.exists():  # a half-finished install from a run that died: start again
        shutil.rmtree(venv)
    uv = _uv()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    started = time.monotonic()
    _run_step([uv, "venv", "--quiet", "--seed", "--python", sys.executable, str(venv)], "creating the virtualenv")
    venv_python = str(venv / "bin" / "python")
    _run_step(
        [uv, "pip", "install", "--quiet", "--python", venv_python, f"apache-flink=={version}"],
        f"installing apache-flink=={version} for Python {python}",
    )
    located = _run_step(
        [venv_python, "-c", "import os, pyflink; print(os.path.dirname(pyflink.__file__))"],
        "locating the pyflink package",
    )
    home = Path(located.strip().splitlines()[-1])
    for script in (home / "bin").iterdir():  # wheels may drop the executable bit
        if script.is_file() and not os.access(script, os.X_OK):
            script.chmod(script.stat().st_mode | 0o111)
    if not (home / "bin" / "flink").is_file():
        raise FlinkToolError(f"apache-flink=={version} installed, but {home}/bin/flink does not exist")
    seconds = round(time.monotonic() - started, 1)
    stamp = {"version": version, "flink_home": str(home), "python": python, "install_seconds": seconds}
    (venv / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
    return home


def java_home() -> Path:
    """A Java 17+ installation: $JAVA_HOME if it has bin/java, else the `java` on PATH."""
    if os.environ.get("JAVA_HOME") and (Path(os.environ["JAVA_HOME"]) / "bin" / "java").is_file():
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    if java is None:
        raise FlinkToolError("Flink's CLI needs Java 17+: none on PATH (run scripts/ensure-java.sh)")
    return Path(java).resolve().parent.parent


def private_conf_dir(flink_home: Path, into: Path | None = None, settings: Mapping[str, object] = ()) -> Path:
    """A copy of ``$FLINK_HOME/conf`` with ``settings`` appended to its config.yaml.

    Flink's config.yaml is YAML; appended flat keys (``rest.port: 8081``) override the
    shipped nested ones for the same key, as the last occurrence of a key wins.
    """
    conf = Path(into) if into is not None else Path(tempfile.mkdtemp(prefix="flink-conf-"))
    shutil.copytree(flink_home / "conf", conf, dirs_exist_ok=True)
    if settings:
        _override_yaml(conf / "config.yaml", settings)
    return conf


def _override_yaml(path: Path, overrides: Mapping[str, object]) -> None:
    """Drop the shipped top-level blocks that set one of `overrides`, then append them flat.

    Flink's YAML parser refuses a key that appears twice (nested ``rest: {port: ..}``
    and flat ``rest.port``), so a shipped block whose keys we override is removed whole
    and its other keys are written back flat.
    """
    import yaml  # PyYAML is a dependency of the project (and of Airflow)

    shipped = yaml.safe_load(path.read_text()) or {}
    flat: dict[str, object] = {}

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        else:
            flat[prefix] = value

    walk("", shipped)
    out = [f"{key}: {json.dumps(value)}" for key, value in flat.items() if key not in overrides]
    out += [f"{key}: {json.dumps(value)}" for key, value in overrides.items()]
    path.write_text("# written by tests/flink_tools.py from the shipped config.yaml\n" + "\n".join(out) + "\n")


def flink_env(flink_home: Path, conf_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment bin/flink (and bin/*.sh) need.

    FLINK_HOME and FLINK_CONF_DIR (else config.sh derives them from the script's path),
    JAVA_HOME and PATH (config.sh runs $JAVA_HOME/bin/java, else `java` on PATH), and
    FLINK_LOG_DIR / FLINK_PID_DIR: their defaults are ``$FLINK_HOME/log`` (inside the
    cached install) and ``/tmp`` (shared with any other Flink on the machine), so both
    go under ``conf_dir`` unless ``extra`` names others. No PYFLINK_* variable is needed
    by the scripts; ``flink run -py`` takes the job's interpreter from ``-pyexec`` or
    ``python.executable``.
    """
    java = java_home()
    env = dict(os.environ)
    # Variables of another Flink or of our own runtime must not leak into Flink's scripts.
    for name in ("FLINK_PROPERTIES", "FLINK_LIB_DIR", "FLINK_OPT_DIR", "FLINK_PLUGINS_DIR", "FLINK_BIN_DIR"):
        env.pop(name, None)
    env.update(
        FLINK_HOME=str(flink_home),
        FLINK_CONF_DIR=str(conf_dir),
        JAVA_HOME=str(java),
        PATH=f"{java / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        FLINK_LOG_DIR=str(conf_dir / "log"),
        FLINK_PID_DIR=str(conf_dir / "pid"),
    )
    env.update(extra or {})
    return env


# Every call of the CLI starts a JVM that loads some thousands of flink-dist's classes, and
# the suite makes about 25 calls. As tests/spark_cds.py does for Spark, the CLI's JVM maps
# those classes from a class-data-sharing archive (dynamic AppCDS), with quick-start JIT
# and GC flags: a `flink list` took 2.9 s of CPU instead of 5.2 (5.2-7.4 s wall instead of
# 10.5-13.8 on a machine at load 10). The archive is made once per machine by one
# `flink list` against a stub REST endpoint (the REST client's, Jackson's and Netty's
# classes are what every verb loads); a JVM the archive does not fit ignores it silently
# (-Xlog:cds=off). The options go in FLINK_ENV_JAVA_OPTS_CLI, which bin/config.sh passes
# to the CLI's JVM only and reads instead of the conf's env.java.opts.client.
CLI_QUICK_START = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xlog:cds=off -Xlog:cds+dynamic=off"


def cli_archive(flink_home: Path) -> Path:
    """Where the CLI's class-data-sharing archive for this JDK and install lives."""
    java = java_home()
    release = java / "release"
    jdk = release.read_text() if release.is_file() else ""
    key = hashlib.sha256(f"{java}\n{jdk}\n{flink_home}".encode()).hexdigest()[:16]
    return cache_root() / "flink-cli-cds" / f"flink-cli-{FLINK_VERSION}-{key}.jsa"


_NO_ARCHIVE: set[Path] = set()


class _NoJobs(http.server.BaseHTTPRequestHandler):
    """A stub of the REST API for the archive's run: every GET answers an empty job list."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = b'{"jobs": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def ensure_cli_archive(flink_home: Path) -> Path | None:
    """The CLI's archive, made first if missing; None if it cannot be made (the CLI then
    runs without it, only slower)."""
    archive = cli_archive(flink_home)
    if archive.is_file():
        return archive
    if archive in _NO_ARCHIVE:  # tried in this process already: not once per call
        return None
    archive.parent.mkdir(parents=True, exist_ok=True)
    with _locked(archive.with_name(archive.name + ".lock")):
        if archive.is_file():  # another process made it meanwhile
            return archive
        partial = archive.with_name(archive.name + ".partial")
        partial.unlink(missing_ok=True)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoJobs)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        conf = private_conf_dir(flink_home)
        env = flink_env(flink_home, conf)
        env["FLINK_ENV_JAVA_OPTS_CLI"] = f"{CLI_QUICK_START} -XX:ArchiveClassesAtExit={partial}"
        command = [str(flink_home / "bin" / "flink"), "list", "-a", "-m", f"127.0.0.1:{server.server_address[1]}"]
        try:
            subprocess.run(command, env=env, capture_output=True, timeout=180, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pass
        finally:
            server.shutdown()
            server.server_close()
            shutil.rmtree(conf, ignore_errors=True)
        if not partial.is_file():
            _NO_ARCHIVE.add(archive)
            print(
                f"tests/flink_tools.py: no archive for Flink's CLI at {archive}; it starts without one", file=sys.stderr
            )
            return None
        partial.rename(archive)  # complete archives only: a killed dump leaves .partial
    return archive


def flink_cli(
    flink_home: Path,
    args: Sequence[str],
    rest_address: str | None = None,
    timeout: float = 120.0,
    conf_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``$FLINK_HOME/bin/flink <args>`` and return its outcome (never raises on exit code).

    ``rest_address`` (``host:port``) is passed as ``-m`` right after a cluster action
    (run, list, info, cancel, stop, savepoint, checkpoint). Without ``conf_dir`` a
    private copy of the shipped conf is used, so the cached install is never written
    to. Raises FlinkToolError if the CLI does not finish within ``timeout`` seconds.
    """
    command = [str(flink_home / "bin" / "flink"), *args]
    if rest_address and args and args[0] in _CLUSTER_ACTIONS:
        command[2:2] = ["-m", rest_address]
    own_conf = conf_dir is None
    conf = private_conf_dir(flink_home) if conf_dir is None else conf_dir
    run_env = flink_env(flink_home, conf, env)
    if "FLINK_ENV_JAVA_OPTS_CLI" not in run_env:  # a caller's own options win
        archive = ensure_cli_archive(flink_home)
        sharing = f" -XX:SharedArchiveFile={archive}" if archive is not None else ""
        run_env["FLINK_ENV_JAVA_OPTS_CLI"] = CLI_QUICK_START + sharing
    try:
        return subprocess.run(
            command,
            env=run_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        parts = [p if isinstance(p, bytes) else p.encode() for p in (exc.stdout, exc.stderr) if p]
        output = b"".join(parts).decode(errors="replace")
        tail = "\n".join(output.strip().splitlines()[-25:])
        raise FlinkToolError(f"`{' '.join(command)}` did not finish within {timeout:.0f} s:\n{tail}") from exc
    finally:
        if own_conf:
            shutil.rmtree(conf, ignore_errors=True)


if __name__ == "__main__":  # `python tests/flink_tools.py`: install (or find) and time it
    began = time.monotonic()
    found = flink_home()
    print(f"FLINK_HOME={found} ({time.monotonic() - began:.1f} s)")
    print(f"CLI class-data-sharing archive: {ensure_cli_archive(found)}")
