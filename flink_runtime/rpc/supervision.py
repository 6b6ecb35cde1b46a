"""Supervision: what happens when an actor's handler raises.

As in Akka and Erlang/OTP (docs/architecture.md, Supervision), every actor has a parent. A handler
that raises is reported to the parent, whose strategy answers with a directive:

- RESUME: the failure concerned that one message; log it, keep the state, go on. A
  parent resumes only a failure it knows to be harmless: nothing here does by default;
- RESTART: the child's state cannot be trusted; it starts afresh from what the
  parent knows (a JobMaster fails its job globally, a registration starts over);
- ESCALATE: the parent cannot handle it either; it fails in turn, up to the top.

Escalation is the default. A handler that raised may have changed half of what it
meant to change, so an endpoint whose own handler failed serves no more (endpoint.py),
and what reaches the top of a process ends it (`fail_hard`, as Dask's worker does):
it exits with EXIT_INTERNAL_ERROR and the reason logged, for systemd, Docker,
Kubernetes or the embedded cluster's launcher to start it afresh. A process whose
actors are in an unknown state must not go on serving. An in-process MiniCluster is
the top of its endpoints instead: it stops and keeps the reason (minicluster.py),
since a library must not end the program that hosts it.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger(__name__)

# EX_SOFTWARE from sysexits.h: an internal error, not a usage error.
EXIT_INTERNAL_ERROR = 70


class Directive(enum.StrEnum):
    RESUME = "resume"
    RESTART = "restart"
    ESCALATE = "escalate"


@runtime_checkable
class Supervised(Protocol):
    """A child: anything a supervisor can restart."""

    @property
    def name(self) -> str:
        """Who failed, as logs and the reason a process ends with name it."""
        ...

    def restart(self, error: BaseException) -> None:
        """Start afresh after `error`, from what the parent knows (raise to escalate)."""
        ...


@runtime_checkable
class Supervisor(Protocol):
    """A parent: decides what a child's failure means, and takes up what it escalates."""

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        """The strategy: resume, restart or escalate `child` after `error`."""
        ...

    def escalate_failure(self, child: Supervised, error: BaseException) -> None:
        """`child` failed beyond repair (ESCALATE, or its restart failed): the parent
        fails in turn, which reaches its own parent, up to the top of the process."""
        ...


class ProcessSupervisor:
    """The top of a process: every endpoint's parent unless something adopts it (a
    MiniCluster adopts its own). What reaches it ends the process with the reason."""

    name = "process"

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        return Directive.ESCALATE

    def escalate_failure(self, child: Supervised, error: BaseException) -> None:
        fail_hard(f"{child.name} failed and nothing above it can handle it", error)


def supervise(supervisor: Supervisor, child: Supervised, error: BaseException) -> Directive:
    """Report a child's failure, carry out the directive, and return what was done
    (ESCALATE also when a restart failed)."""
    directive = supervisor.child_failed(child, error)
    if directive is Directive.RESUME:
        log.error("%s: resuming after %s: %s", child.name, type(error).__name__, error, exc_info=error)
        return directive
    if directive is Directive.RESTART:
        log.error("%s: restarting after %s: %s", child.name, type(error).__name__, error, exc_info=error)
        try:
            child.restart(error)
            return directive
        except Exception as restart_error:  # noqa: BLE001 - a failed restart escalates
            error = restart_error
    supervisor.escalate_failure(child, error)
    return Directive.ESCALATE


def guarded(supervisor: Supervisor, child: Supervised, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, with what it raises reported as the child's failure (for callbacks
    that run in a parent's mailbox on a child's behalf)."""

    def call(*args: Any) -> Any:
        try:
            return function(*args)
        except Exception as error:
            supervise(supervisor, child, error)
            return None

    return call


def fail_hard(reason: str, error: BaseException) -> None:
    """Log why and exit the process at once, flushed (no cleanup that could hang or hide
    it: the kernel closes the sockets and releases the locks, a planner and a Spark JVM
    end with their parent)."""
    log.critical("%s: %s: %s; exiting with code %d", reason, type(error).__name__, error, EXIT_INTERNAL_ERROR,
                 exc_info=error)  # fmt: skip
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed or gone: nothing more can be said there
            stream.flush()
    os._exit(EXIT_INTERNAL_ERROR)
