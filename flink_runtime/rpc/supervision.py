"""Supervision: what happens when an actor's handler raises.

As in Akka (and the seed's design), every actor has a parent. A handler that raises
is reported to the parent, whose strategy answers with a directive:

- RESUME: the failure concerned that one message; log it, keep the state, go on;
- RESTART: the child's state cannot be trusted; it starts afresh from what the
  parent knows (a JobMaster fails its job globally, a registration starts over);
- ESCALATE: the parent cannot handle it either; it fails in turn, up to the top.

What reaches the top of a process makes it exit non-zero with the reason logged
(`fail_hard`, as Dask's worker does), so systemd, Docker or Kubernetes restart it: a
process whose actors are in an unknown state must not go on serving.
"""

from __future__ import annotations

import enum
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)

# EX_SOFTWARE from sysexits.h: an internal error, not a usage error.
EXIT_INTERNAL_ERROR = 70


class Directive(enum.StrEnum):
    RESUME = "resume"
    RESTART = "restart"
    ESCALATE = "escalate"


class Supervised(Protocol):
    """A child: anything a supervisor can restart."""

    name: str

    def restart(self, error: BaseException) -> None:
        """Start afresh after `error`, from what the parent knows (raise to escalate)."""
        ...


class Supervisor(Protocol):
    def child_failed(self, child: Supervised, error: BaseException) -> Directive: ...


class ProcessSupervisor:
    """The parent of the endpoint at the top of a JobManager or TaskManager process
    started on its own (`flink-runtime jobmanager` / `taskmanager`). A failed handler of
    a message from outside concerned that one request: resume. A failed continuation of
    the endpoint's own (a timer, the result of its background work) or a failure its
    children escalated leaves its state unknown: the process exits."""

    name = "process"

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        return Directive.ESCALATE if getattr(child, "internal", True) else Directive.RESUME


class ResumingSupervisor:
    """The parent of endpoints hosted inside another program (a MiniCluster in pytest, in
    an Airflow worker or in a notebook), which must never exit for the cluster's sake:
    every failure is logged with its traceback, and the endpoint goes on."""

    name = "host"

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        return Directive.RESUME

    def escalate_failure(self, child: Supervised, error: BaseException) -> None:
        log.critical("%s failed beyond recovery; the host process goes on: %s", child.name, error, exc_info=error)


def supervise(supervisor: Supervisor | None, child: Supervised, error: BaseException) -> None:
    """Report a child's failure and carry out the directive. Without a supervisor (the
    top of the process) every failure escalates."""
    directive = supervisor.child_failed(child, error) if supervisor is not None else Directive.ESCALATE
    if directive is Directive.RESUME:
        log.error("%s: resuming after %s: %s", child.name, type(error).__name__, error, exc_info=error)
        return
    if directive is Directive.RESTART:
        log.error("%s: restarting after %s: %s", child.name, type(error).__name__, error, exc_info=error)
        try:
            child.restart(error)
            return
        except Exception as restart_error:  # noqa: BLE001 - a failed restart escalates
            error = restart_error
    escalate(supervisor, child, error)


def guarded(supervisor: Supervisor | None, child: Supervised, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, with what it raises reported as the child's failure (for callbacks
    that run in a parent's mailbox on a child's behalf)."""

    def call(*args: Any) -> Any:
        try:
            return function(*args)
        except Exception as error:
            supervise(supervisor, child, error)
            return None

    return call


def escalate(supervisor: Supervisor | None, child: Supervised, error: BaseException) -> None:
    parent_escalate = getattr(supervisor, "escalate_failure", None)
    if parent_escalate is not None:
        parent_escalate(child, error)
    else:
        fail_hard(f"{child.name} failed and nothing above it can handle it", error)


def fail_hard(reason: str, error: BaseException) -> None:
    """Log why and exit the process at once (no cleanup that could hang or hide it)."""
    log.critical("%s: %s: %s; exiting with code %d", reason, type(error).__name__, error, EXIT_INTERNAL_ERROR,
                 exc_info=error)  # fmt: skip
    logging.shutdown()
    sys.stderr.flush()
    os._exit(EXIT_INTERNAL_ERROR)
