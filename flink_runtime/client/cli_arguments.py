"""The `flink-runtime` command line's arguments (client/cli.py runs the commands).

The global options (-c, -D, --log-level) are accepted after every subcommand, as in
`flink run -D ...`; client commands take the REST address as `-m host:port`, as Flink's
CLI does. A usage error exits 2 with argparse's message and a hint to --help.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from flink_runtime import __version__
from flink_runtime.client.cli_embedded import add_embedded_parser

EXIT_USAGE = 2


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse's own format ("prog: error: ..."), but with the hint to --help.
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int_at_least(minimum: int, expected: str) -> Callable[[str], int]:
    """An argparse type: an integer >= `minimum`, else "expected <expected>, got ..."."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_subtask_index = _int_at_least(0, "a subtask index (0, 1, ...)")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    # The global options are accepted after every subcommand, as in `flink run -D ...`.
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("global options")
    group.add_argument(
        "-c", "--config", metavar="FILE", help="configuration YAML (default: $FLINK_CONF_DIR/config.yaml)"
    )
    group.add_argument(
        "-D",
        dest="properties",
        metavar="key=value",
        action="append",
        default=[],
        help="set a configuration option, e.g. -D rest.port=8081 (repeatable)",
    )
    group.add_argument(
        "--log-level",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level on stderr (default: INFO for cluster processes, WARNING for client commands)",
    )

    # The REST address of client commands.
    address = argparse.ArgumentParser(add_help=False)
    address.add_argument(
        "-m",
        "--jobmanager",
        metavar="host:port",
        help="REST address of the JobManager (host:port or http://host:port; "
        "default: rest.address:rest.port from the configuration)",
    )
    address.add_argument(
        "--token",
        metavar="TOKEN",
        help="bearer token of the REST API (default: security.rest.token or security.rest.token-file "
        "from the configuration, FLINK_PROPERTIES or -D; those keep it out of the process list)",
    )

    parser = ArgumentParser(
        prog="flink-runtime",
        description="Run a flink-runtime cluster, and submit, follow, list and cancel jobs.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=ArgumentParser)

    def add(name: str, help_text: str, *parents: argparse.ArgumentParser) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help_text, description=help_text, parents=[common, *parents])

    add("jobmanager", "Run a JobManager (with its REST API) in the foreground.")

    add("taskmanager", "Run a TaskManager in the foreground; it registers with jobmanager.rpc.address.")

    minicluster = add("minicluster", "Run a JobManager and TaskManagers in one process, in the foreground.")
    minicluster.add_argument("-n", "--taskmanagers", type=_positive_int, metavar="N", help="number of TaskManagers")
    minicluster.add_argument("-s", "--slots", type=_positive_int, metavar="N", help="slots per TaskManager")

    run = add("run", "Submit a JobGraph (.json) and follow it until it ends, or detach with -d.", address)
    run.add_argument("-d", "--detached", action="store_true", help="print the job id and return at once")
    run.add_argument("--job-id", metavar="ID", help="job id to use (32 hex digits; default: the file's, or a new one)")
    run.add_argument(
        "-s",
        "--fromSavepoint",
        dest="from_savepoint",
        metavar="PATH",
        help="resume the job from this savepoint (a path as the JobManager sees it)",
    )
    run.add_argument(
        "-n",
        "--allowNonRestoredState",
        dest="allow_non_restored_state",
        action="store_true",
        help="with -s: start even if the savepoint holds state that no vertex of the job claims",
    )
    run.add_argument("file", metavar="FILE.json", help="the JobGraph as JSON")

    application = add(
        "run-application",
        "Application mode: run one job on a JobManager of its own that starts its TaskManagers on demand "
        "(resourcemanager.driver process, or docker) and stops everything when the job ends.",
    )
    application.add_argument("file", metavar="FILE.json", help="the JobGraph as JSON")

    list_ = add("list", "List jobs (by default those not finished yet).", address)
    which = list_.add_mutually_exclusive_group()
    which.add_argument("-a", "--all", action="store_true", help="all jobs, finished ones included")
    which.add_argument("-r", "--running", action="store_true", help="only running jobs")
    list_.add_argument("--json", action="store_true", help="print the REST API's JSON")

    info = add("info", "Show a job: state, vertices, root exception.", address)
    info.add_argument("job_id", metavar="JOB_ID")
    info.add_argument("--json", action="store_true", help="print the REST API's JSON")

    logs = add("logs", "Print a job's task log lines, from every TaskManager (-f: follow them).", address)
    logs.add_argument("job_id", metavar="JOB_ID")
    logs.add_argument("--vertex", metavar="VERTEX_ID", help="only the lines of this vertex")
    logs.add_argument("--subtask", type=_subtask_index, metavar="N", help="only the lines of subtask N (from 0)")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing new lines until the job ends (or Ctrl-C)"
    )

    cancel = add("cancel", "Cancel a job.", address)
    cancel.add_argument("job_id", metavar="JOB_ID")

    wait_help = "give up waiting after this many seconds (default: wait until the savepoint is written)"
    savepoint = add("savepoint", "Trigger a savepoint of a running job and wait until it is written.", address)
    savepoint.add_argument("job_id", metavar="JOB_ID")
    savepoint.add_argument(
        "target_directory",
        metavar="TARGET_DIRECTORY",
        nargs="?",
        help="directory for the savepoint (default: state.savepoints.dir of the JobManager)",
    )
    savepoint.add_argument("--timeout", type=_positive_float, metavar="SECONDS", help=wait_help)

    stop = add("stop", "Stop a running job with a savepoint; resume it later with run -s.", address)
    stop.add_argument(
        "-p",
        "--savepointPath",
        dest="savepoint_path",
        metavar="DIR",
        help="directory for the savepoint (default: state.savepoints.dir of the JobManager)",
    )
    stop.add_argument(
        "-d", "--drain", action="store_true", help="let the sources reach the end of their input before stopping"
    )
    stop.add_argument("job_id", metavar="JOB_ID")
    stop.add_argument("--timeout", type=_positive_float, metavar="SECONDS", help=wait_help)

    add_embedded_parser(add, _positive_float)
    return parser
