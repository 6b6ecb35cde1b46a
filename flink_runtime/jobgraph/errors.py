"""The one error a rejected JobGraph raises, shared by decoding, the graph rules and ordering."""

from __future__ import annotations

from collections.abc import Iterable


class InvalidJobGraph(ValueError):
    """A JobGraph was rejected. `errors` lists every problem found, one sentence each."""

    def __init__(self, errors: str | Iterable[str]) -> None:
        self.errors: list[str] = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("\n".join(self.errors))
