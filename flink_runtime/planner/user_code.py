"""What the job's code raised, as the planner and a TaskManager resolving a plan for it
(taskmanager/plan_resolution.py) report it: in words a submitter can act on, with the
exception's name and traceback as text (a user's exception class may not survive
pickling, and its module is not importable in the JobManager on purpose)."""

from __future__ import annotations

import traceback
from typing import Any

from flink_runtime.planner import guard


class UserCodeError(RuntimeError):
    """The job's code failed; `cause_name` and `cause_trace` describe what it raised."""

    def __init__(self, message: str, cause_name: str = "", cause_trace: str = "") -> None:
        super().__init__(message)
        self.cause_name = cause_name
        self.cause_trace = cause_trace

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.cause_name, self.cause_trace)

    @classmethod
    def wrapping(cls, message: str, exc: BaseException) -> UserCodeError:
        if isinstance(exc, UserCodeError):  # described already (on a TaskManager): its name and traceback
            return cls(f"{message}: {exc}", exc.cause_name, exc.cause_trace)
        return cls(f"{message}: {describe(exc)}", type(exc).__name__, "".join(traceback.format_exception(exc)))


def describe(exc: BaseException) -> str:
    """What the job's code raised, in words a submitter can act on."""
    # SystemExit and its kind say nothing by themselves ("3", or a DataFrame's repr).
    text = str(exc) if isinstance(exc, Exception) else f"the job's code raised {type(exc).__name__}: {exc}"
    if guard.memory_limited() and _caused_by(exc, MemoryError):
        # The planner's own limit, whatever wrapped it (an operator's error names the operator).
        return guard.memory_limit_reason() if isinstance(exc, MemoryError) else f"{text}: {guard.memory_limit_reason()}"
    return text


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
