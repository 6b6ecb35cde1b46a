"""Small helpers that phrase validation messages: lists a reader can take in, "did you mean"."""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence


def duplicates(values: Sequence[str], describe: Callable[[str, list[int]], str]) -> list[str]:
    positions: dict[str, list[int]] = defaultdict(list)
    for position, value in enumerate(values):
        positions[value].append(position)
    return [describe(value, where) for value, where in positions.items() if len(where) > 1]


def listing(items: Iterable[str], limit: int = 10, separator: str = ", ") -> str:
    """Items joined for a message, at most `limit` of them: a message is read, not searched."""
    items = list(items)
    if len(items) > limit:
        return separator.join(items[:limit]) + f"{separator}and {len(items) - limit} more"
    return separator.join(items)


def quoted(names: Iterable[str]) -> str:
    return listing(f"'{name}'" for name in names)


# Fuzzy matching costs O(candidates) per call; on huge graphs a hint is not worth it.
_MAX_SUGGESTION_CANDIDATES = 1000


def did_you_mean(word: str, candidates: Collection[str]) -> str:
    if not candidates or len(candidates) > _MAX_SUGGESTION_CANDIDATES:
        return ""
    by_lower = {candidate.lower(): candidate for candidate in candidates}
    if word.lower() in by_lower:
        return f" (did you mean '{by_lower[word.lower()]}'?)"
    matches = difflib.get_close_matches(word, list(candidates), n=1)
    return f" (did you mean '{matches[0]}'?)" if matches else ""
