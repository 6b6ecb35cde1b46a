"""The `flink-runtime` command line, modelled on Flink's `bin/flink` and cluster scripts.

Processes::

    flink-runtime jobmanager  [-c FILE] [-D key=value ...]
    flink-runtime taskmanager [-c FILE] [-D key=value ...]
    flink-runtime minicluster [-n TASKMANAGERS] [-s SLOTS]
    flink-runtime run-application [-D key=value ...] job.json   (application mode)

Jobs (`-m host:port` is the REST address, as in Flink; default rest.address:rest.port)::

    flink-runtime run [-m ADDR] [-d] [--job-id ID] [-s SAVEPOINT [-n]] job.json
    flink-runtime list [-m ADDR] [-a | -r] [--json]
    flink-runtime info [-m ADDR] [--json] JOB_ID
    flink-runtime logs [-m ADDR] [--vertex V] [--subtask N] [-f] JOB_ID
    flink-runtime cancel [-m ADDR] JOB_ID
    flink-runtime savepoint [-m ADDR] JOB_ID [TARGET_DIRECTORY]
    flink-runtime stop [-m ADDR] [-p DIR] [-d] JOB_ID

The embedded cluster (client/cli_embedded.py)::

    flink-runtime embedded status|stop [--state-dir DIR]

Exit codes: 0 success; 1 the job failed or was cancelled, or the cluster answered an
error or could not be reached; 2 bad usage (arguments, configuration, input file);
130 interrupted (Ctrl-C; an attached `run` detaches and the job keeps running).
Every failure is one "error: ..." line on stderr (and at most a one-line hint), never
a traceback: neither the CLI's own (unless --log-level DEBUG asks for one) nor the
server's that a JobManager sends with an error (FLINK_RUNTIME_CLI_VERBOSE=1 or
--log-level DEBUG shows it; cli_output.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from flink_runtime import configuration as cfg
from flink_runtime.client.cli_arguments import EXIT_USAGE, build_parser
from flink_runtime.client.cli_embedded import cmd_embedded
from flink_runtime.client.cli_logs import print_job_log
from flink_runtime.client.cli_output import (
    format_bytes,
    format_duration,
    format_time,
    new_console,
    print_failure,
    server_details,
    styled_state,
    verbose_requested,
)
from flink_runtime.client.cli_progress import follow_job, task_counts
from flink_runtime.client.job_client import (
    ClusterUnreachable,
    JobClient,
    RestClientError,
    SavepointFailed,
    normalize_rest_url,
)
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.executiongraph.states import JobStatus
from flink_runtime.logs.context import LineFormatter
from flink_runtime.security import client_verify, rest_token

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130

# `list -r`: jobs that hold (or are about to give back) slots.
_RUNNING_STATES = {JobStatus.RUNNING, JobStatus.FAILING, JobStatus.RESTARTING, JobStatus.CANCELLING}

# How often `savepoint` and `stop` ask whether the savepoint is written.
_SAVEPOINT_POLL_SECONDS = 0.2


class CliError(Exception):
    """A failure to report as one `error: ...` line, with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# -- entry point ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse reported
        return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_USAGE)
    handler = _COMMANDS[args.command]
    try:
        return handler(args)
    except CliError as exc:
        return _fail(str(exc), exc.exit_code, exc, args)
    except ConfigurationError as exc:
        return _fail(f"configuration: {exc}", EXIT_USAGE)
    except ClusterUnreachable as exc:
        return _fail(str(exc), EXIT_FAILURE)
    except RestClientError as exc:
        return _fail(_describe_rest_error(exc), EXIT_FAILURE, exc, args)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except Exception as exc:
        # A bug, or something nobody foresaw: still one line, the traceback only on request.
        log.debug("unexpected error", exc_info=True)
        return _fail(f"unexpected {type(exc).__name__}: {exc} (--log-level DEBUG shows the traceback)", EXIT_FAILURE)


def _fail(message: str, exit_code: int, error: BaseException | None = None, args: Any = None) -> int:
    print_failure(message, server_details(error), verbose_requested(getattr(args, "log_level", None)))
    return exit_code


def _describe_rest_error(exc: RestClientError) -> str:
    if len(exc.errors) == 1:
        return exc.errors[0]
    # Several problems (an invalid JobGraph): a header line, then one problem per line.
    listing = "\n".join(f"  - {error}" for error in exc.errors)
    return f"the JobManager answered {exc.status_code} with {len(exc.errors)} problems:\n{listing}"


# -- shared helpers ------------------------------------------------------------------------------


def _load_config(args: argparse.Namespace) -> Configuration:
    try:
        return Configuration.load(args.config, args.properties)
    except OSError as exc:
        raise CliError(f"cannot read config file {args.config}: {exc.strerror or exc}", EXIT_USAGE) from None


def _setup_logging(args: argparse.Namespace, default: str) -> None:
    level = getattr(logging, args.log_level or default)
    # basicConfig leaves existing handlers alone (an embedding program's, or pytest's).
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(LineFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[stderr])
    if args.log_level:
        logging.getLogger().setLevel(level)


def _client(args: argparse.Namespace) -> JobClient:
    config = _load_config(args)
    tls = config.get(cfg.SSL_REST_ENABLED)
    address = args.jobmanager or f"{config.get(cfg.REST_ADDRESS)}:{config.get(cfg.REST_PORT)}"
    if tls and "://" not in address:
        address = "https://" + address
    try:
        url = normalize_rest_url(address)
    except ValueError as exc:
        raise CliError(f"-m: {exc}", EXIT_USAGE) from None
    return JobClient(url, token=args.token or rest_token(config), verify=client_verify(config))


def _root_exception(client: JobClient, job_id: str) -> str | None:
    root = client.exceptions(job_id).get("root-exception")
    return str(root).rstrip() if root else None


# -- cluster processes -----------------------------------------------------------------------------


def _cmd_jobmanager(args: argparse.Namespace) -> int:
    from flink_runtime import entrypoints

    config = _load_config(args)
    _setup_logging(args, "INFO")
    with _job_store_errors():
        entrypoints.run_jobmanager(config)
    return EXIT_OK


@contextlib.contextmanager
def _job_store_errors() -> Iterator[None]:
    """A JobManager that cannot open its job store (its URL, its database, or another
    JobManager holding it) is one line, not an unexpected error."""
    from flink_runtime.highavailability.exclusive_store import JobStoreInUse
    from flink_runtime.jobmanager.jobstore import JobStoreError

    try:
        yield
    except (JobStoreError, JobStoreInUse) as exc:
        raise CliError(f"cannot start the JobManager: {exc}") from exc


def _cmd_taskmanager(args: argparse.Namespace) -> int:
    from flink_runtime import entrypoints

    config = _load_config(args)
    _setup_logging(args, "INFO")
    entrypoints.run_taskmanager(config)
    return EXIT_OK


def _cmd_minicluster(args: argparse.Namespace) -> int:
    from flink_runtime import entrypoints

    config = _load_config(args)
    if args.slots is not None:
        config.set(cfg.TASKMANAGER_SLOTS.key, args.slots)
    if cfg.REST_PORT.key not in config:
        # MiniCluster picks a random port unless told; from the command line the
        # configured one (default 8081) is what `flink-runtime run` will look for.
        config.set(cfg.REST_PORT.key, config.get(cfg.REST_PORT))
    _setup_logging(args, "INFO")
    with _job_store_errors():
        entrypoints.run_minicluster(config, num_taskmanagers=args.taskmanagers)
    return EXIT_OK


def _cmd_run_application(args: argparse.Namespace) -> int:
    """Exit 0 if the job FINISHED, 1 if it failed or was cancelled, 2 if it was not accepted."""
    from flink_runtime import entrypoints
    from flink_runtime.client.job_graph_source import load_job_graph_document

    config = _load_config(args)
    try:
        document = load_job_graph_document(args.file)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    _setup_logging(args, "INFO")
    outcome = entrypoints.run_application(config, document)
    if not isinstance(outcome, JobStatus):  # JobStatus is a str too: test it first
        raise CliError(f"the job was not run: {outcome}", EXIT_USAGE)
    print(f"Job ended {outcome.value}", flush=True)
    return EXIT_OK if outcome is JobStatus.FINISHED else EXIT_FAILURE


# -- jobs --------------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    _setup_logging(args, "WARNING")
    if args.allow_non_restored_state and not args.from_savepoint:
        raise CliError("-n/--allowNonRestoredState needs -s/--fromSavepoint PATH", EXIT_USAGE)
    with _client(args) as client:
        try:
            job_id = client.submit(
                args.file,
                job_id=args.job_id,
                savepoint_path=args.from_savepoint,
                allow_non_restored_state=args.allow_non_restored_state,
            )
        except ValueError as exc:  # the local file: missing, unreadable, not JSON
            raise CliError(str(exc), EXIT_USAGE) from None
        if args.detached:
            # Only the id on stdout, so `JOB=$(flink-runtime run -d job.json)` works.
            print(job_id, flush=True)
            return EXIT_OK
        console = new_console()
        console.print(f"Job has been submitted with JobID {job_id}")
        try:
            state = follow_job(client, job_id, console)
        except KeyboardInterrupt:
            print(
                f"Detached from job {job_id}; it keeps running. "
                f"Cancel it with: flink-runtime cancel -m {client.rest_url} {job_id}",
                file=sys.stderr,
                flush=True,
            )
            return EXIT_INTERRUPTED
        details = client.details(job_id)
        finished, total = task_counts(details)
        summary = Text.assemble(
            f"Job {job_id} ",
            styled_state(state.value),
            f" after {format_duration(details.get('duration'))} ({finished}/{total} tasks finished).",
        )
        console.print(summary)
        if state is JobStatus.FINISHED:
            return EXIT_OK
        if state is JobStatus.FAILED:
            root = _root_exception(client, job_id)
            if root:
                print(f"Root exception:\n{root}", file=sys.stderr, flush=True)
        return EXIT_FAILURE


def _cmd_list(args: argparse.Namespace) -> int:
    _setup_logging(args, "WARNING")
    with _client(args) as client:
        jobs = client.list_jobs()
    if args.running:
        jobs = [job for job in jobs if JobStatus(job["state"]) in _RUNNING_STATES]
    elif not args.all:
        jobs = [job for job in jobs if not JobStatus(job["state"]).is_globally_terminal]
    jobs.sort(key=lambda job: job.get("start-time", 0), reverse=True)
    if args.json:
        print(json.dumps({"jobs": jobs}, indent=2))
        return EXIT_OK
    console = new_console()
    if not jobs:
        kind = "running " if args.running else "" if args.all else "unfinished "
        console.print(f"No {kind}jobs." + ("" if args.all else " (-a lists finished ones too)"))
        return EXIT_OK
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("JOB ID", no_wrap=True)
    table.add_column("NAME", overflow="fold")
    table.add_column("STATE", no_wrap=True)
    table.add_column("START", no_wrap=True)
    table.add_column("DURATION", no_wrap=True, justify="right")
    table.add_column("TASKS", no_wrap=True, justify="right")
    for job in jobs:
        tasks = job.get("tasks", {})
        table.add_row(
            job["jid"],
            job.get("name", ""),
            styled_state(job["state"]),
            format_time(job.get("start-time")),
            format_duration(job.get("duration")),
            f"{tasks.get('finished', 0)}/{tasks.get('total', 0)}",
        )
    console.print(table)
    return EXIT_OK


def _cmd_info(args: argparse.Namespace) -> int:
    _setup_logging(args, "WARNING")
    with _client(args) as client:
        details = client.details(args.job_id)
        if args.json:
            print(json.dumps(details, indent=2))
            return EXIT_OK
        root = _root_exception(client, args.job_id)
    console = new_console()
    finished, total = task_counts(details)
    console.print(Text.assemble(("Job:      ", "bold"), f"{details.get('name', '')} ({details['jid']})"))
    console.print(Text.assemble(("State:    ", "bold"), styled_state(details["state"])))
    console.print(Text.assemble(("Start:    ", "bold"), format_time(details.get("start-time"))))
    console.print(Text.assemble(("Duration: ", "bold"), format_duration(details.get("duration"))))
    console.print(Text.assemble(("Tasks:    ", "bold"), f"{finished}/{total} finished"))
    table = Table(box=None, header_style="bold", pad_edge=False, title_justify="left")
    table.add_column("VERTEX", overflow="fold")
    table.add_column("ID", no_wrap=True)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("PARALLELISM", no_wrap=True, justify="right")
    table.add_column("FINISHED", no_wrap=True, justify="right")
    table.add_column("DURATION", no_wrap=True, justify="right")
    table.add_column("RECORDS IN/OUT", no_wrap=True, justify="right")
    table.add_column("BYTES IN/OUT", no_wrap=True, justify="right")
    for vertex in details.get("vertices", []):
        io = vertex.get("metrics") or {}
        table.add_row(
            vertex.get("name", ""),
            vertex.get("id", ""),
            styled_state(vertex.get("status", "")),
            str(vertex.get("parallelism", "")),
            f"{vertex.get('tasks', {}).get('FINISHED', 0)}/{vertex.get('parallelism', 0)}",
            format_duration(vertex.get("duration")),
            f"{io.get('read-records', 0):,} / {io.get('write-records', 0):,}",
            f"{format_bytes(io.get('read-bytes', 0))} / {format_bytes(io.get('write-bytes', 0))}",
        )
    console.print()
    console.print(table)
    if root:
        console.print()
        console.print(Text("Root exception:", style="bold red"))
        console.print(root)
    return EXIT_OK


def _cmd_logs(args: argparse.Namespace) -> int:
    _setup_logging(args, "WARNING")
    with _client(args) as client:
        return print_job_log(client, args.job_id, args.vertex, args.subtask, follow=args.follow)


def _cmd_cancel(args: argparse.Namespace) -> int:
    _setup_logging(args, "WARNING")
    with _client(args) as client:
        client.cancel(args.job_id)
    print(f"Cancelled job {args.job_id}.", flush=True)
    return EXIT_OK


# -- savepoints ------------------------------------------------------------------------------------


def _cmd_savepoint(args: argparse.Namespace) -> int:
    _setup_logging(args, "WARNING")
    with _client(args) as client:
        print(f"Triggering savepoint for job {args.job_id}.", flush=True)
        request_id = client.trigger_savepoint(args.job_id, args.target_directory)
        print("Waiting for response...", flush=True)
        location = _await_savepoint(client, args.job_id, request_id, args.timeout)
    print(f"Savepoint completed. Path: {location}", flush=True)
    print("You can resume your program from this savepoint with the run command.", flush=True)
    return EXIT_OK


def _cmd_stop(args: argparse.Namespace) -> int:
    _setup_logging(args, "WARNING")
    with _client(args) as client:
        verb = "Draining" if args.drain else "Suspending"
        print(f'{verb} job "{args.job_id}" with a savepoint.', flush=True)
        request_id = client.stop_with_savepoint(args.job_id, args.savepoint_path, drain=args.drain)
        location = _await_savepoint(client, args.job_id, request_id, args.timeout)
    print(f"Savepoint completed. Path: {location}", flush=True)
    return EXIT_OK


def _await_savepoint(client: JobClient, job_id: str, request_id: str, timeout: float | None) -> str:
    """The savepoint's location; CliError when it failed or took too long."""
    try:
        return client.wait_for_savepoint(job_id, request_id, timeout=timeout, poll_interval=_SAVEPOINT_POLL_SECONDS)
    except SavepointFailed as exc:
        raise CliError(str(exc)) from exc  # its failure-cause: the server's traceback, shown on request
    except TimeoutError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        # Only the waiting stops: the JobManager goes on writing the savepoint.
        print(
            f"Stopped waiting; savepoint request {request_id} of job {job_id} goes on. "
            f"Its status: GET {client.rest_url}/jobs/{job_id}/savepoints/{request_id}",
            file=sys.stderr,
            flush=True,
        )
        raise


# What each subcommand of cli_arguments.build_parser runs.
_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "jobmanager": _cmd_jobmanager,
    "taskmanager": _cmd_taskmanager,
    "minicluster": _cmd_minicluster,
    "run-application": _cmd_run_application,
    "run": _cmd_run,
    "list": _cmd_list,
    "info": _cmd_info,
    "logs": _cmd_logs,
    "cancel": _cmd_cancel,
    "savepoint": _cmd_savepoint,
    "stop": _cmd_stop,
    "embedded": cmd_embedded,
}


if __name__ == "__main__":  # `python -m flink_runtime.client.cli`, as StandaloneCluster starts it
    sys.exit(main())
