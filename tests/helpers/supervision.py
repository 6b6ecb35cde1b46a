"""A parent for endpoints a test builds alone (rpc/supervision.py).

An endpoint nobody adopts has the top of its process as parent: a failure it cannot
handle ends the process, pytest included (with exit code 70, and the reason lost in
pytest's capture). A test whose endpoint fails on purpose gives it this parent, which
records what it is told and answers with the test's decision."""

from __future__ import annotations

from flink_runtime.rpc.supervision import Directive, Supervised


class RecordingSupervisor:
    """Answers every failure with `directive` and records it (`told`); records what is
    escalated to it (`escalated`) instead of ending the process."""

    name = "test"

    def __init__(self, directive: Directive = Directive.ESCALATE) -> None:
        self.directive = directive
        self.told: list[tuple[Supervised, BaseException]] = []
        self.escalated: list[tuple[Supervised, BaseException]] = []

    def child_failed(self, child: Supervised, error: BaseException) -> Directive:
        self.told.append((child, error))
        return self.directive

    def escalate_failure(self, child: Supervised, error: BaseException) -> None:
        self.escalated.append((child, error))
