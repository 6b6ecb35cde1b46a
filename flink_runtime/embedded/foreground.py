"""The embedded cluster's own process: a MiniCluster in the foreground that knows its state dir.

``ensure_embedded_cluster`` (launcher.py) starts it detached as::

    python -m flink_runtime.embedded.foreground --state-dir DIR -n 2 -s 2 --port 18081 \\
        --idle-timeout 3600 [-D key=value ...] [--secrets-on-stdin]

(options whose key names a secret come as a JSON object on stdin, never on the command
line, where every user of the host may read them).

It differs from ``flink-runtime minicluster`` in what it takes from the state dir
(log files, job store, savepoints) and in how it stops for being idle: under the
state dir's lock, removing its state file first (state.release_for_idle_stop).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flink_runtime import configuration as cfg
from flink_runtime import entrypoints
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.embedded.state import release_for_idle_stop

log = logging.getLogger(__name__)

# How long an idle stop may take. Callers wait on the lock it holds until the process
# is gone; a shutdown that hangs (a Spark stop, say) must not hang every Airflow task.
SHUTDOWN_GRACE_SECONDS = 60.0


def embedded_defaults(directory: Path, port: int, idle_timeout: float) -> dict[str, Any]:
    """What the embedded cluster's configuration holds unless told otherwise."""
    return {
        # A fixed port: a restarted cluster answers at the same URL (ports.py says why this one).
        cfg.REST_PORT.key: port,
        # Internal (TaskManagers in the same process dial it): any free port will do.
        cfg.JOBMANAGER_RPC_PORT.key: 0,
        cfg.MINICLUSTER_IDLE_TIMEOUT.key: f"{idle_timeout:g} s",
        # Savepoints without a target directory work.
        "state.savepoints.dir": str(directory / "savepoints"),
        # Checkpoints (and the ones a FAILED job keeps for a repair) live with the rest of
        # its state, not in the system temp dir, which a reboot or tmp cleaner empties.
        "state.checkpoints.dir": str(directory / "checkpoints"),
        # Log files, so a failed task's log can show the failing subtask's lines.
        cfg.LOG_DIR.key: str(directory / "log"),
        # A job store, so the job history (and the extra links to it) survive a restart.
        "jobstore.url": f"sqlite:///{directory / 'jobstore.db'}",
    }


def run(directory: Path, taskmanagers: int, slots: int, port: int, idle_timeout: float, config: Configuration) -> None:
    """Serve the embedded cluster of ``directory`` until a signal or its idle timeout."""
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in embedded_defaults(directory, port, idle_timeout).items():
        if key not in config:
            config.set(key, value)
    config.set(cfg.TASKMANAGER_SLOTS.key, slots)

    def may_stop_idle(still_idle: Callable[[], bool]) -> bool:
        if not release_for_idle_stop(directory, still_idle):
            return False
        watchdog = threading.Timer(SHUTDOWN_GRACE_SECONDS, _exit_now)
        watchdog.daemon = True
        watchdog.start()
        return True

    entrypoints.run_minicluster(config, num_taskmanagers=taskmanagers, may_stop_idle=may_stop_idle)


def _exit_now() -> None:
    log.error("The idle stop took over %g s; killing the process (and its Spark JVM)", SHUTDOWN_GRACE_SECONDS)
    logging.shutdown()
    if os.getpgid(0) == os.getpid():  # started by the launcher: its own group, children included
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(1)


def _secrets_from_stdin() -> dict[str, str]:
    """The options the launcher kept off the command line (secrets): a JSON object of texts."""
    try:
        values = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        raise ConfigurationError(f"--secrets-on-stdin: not a JSON object: {exc}") from None
    if not isinstance(values, dict) or not all(isinstance(value, str) for value in values.values()):
        raise ConfigurationError("--secrets-on-stdin: expected a JSON object of key: text")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flink_runtime.embedded.foreground")
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("-n", "--taskmanagers", type=int, default=2)
    parser.add_argument("-s", "--slots", type=int, default=2)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle-timeout", type=float, default=0.0, help="seconds; 0: never")
    parser.add_argument("-D", dest="properties", action="append", default=[], metavar="key=value")
    parser.add_argument(
        "--secrets-on-stdin", action="store_true", help="read more options, as one JSON object, from stdin"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s"
    )
    try:
        config = Configuration.load(None, args.properties)
        if args.secrets_on_stdin:
            for key, value in _secrets_from_stdin().items():
                config.set(key, value)
        run(args.state_dir, args.taskmanagers, args.slots, args.port, args.idle_timeout, config)
    except (ConfigurationError, OSError) as exc:
        # One line the launcher quotes from the log (a taken port among them).
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
