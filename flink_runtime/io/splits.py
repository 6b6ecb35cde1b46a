"""The unit of source input a JobManager hands a source subtask (Flink's ``InputSplit``).

It lives in io/, below the scheduler that assigns splits, the RPC messages that carry
them and the tasks that read them, so that each of those can name it without reaching
up into another.
"""

from __future__ import annotations

from typing import Any

import msgspec


class InputSplit(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One unit of source input; sent to a TaskManager in ``NextInputSplit``."""

    split_number: int
    # Hosts storing the split's data; empty when location does not matter.
    hosts: list[str] = []
    # What the source needs to read the split (a path and range, a query, ...).
    payload: Any = None
