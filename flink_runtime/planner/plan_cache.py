"""Resolved Spark plans kept between submissions, as Flink's SQL Gateway keeps its plans.

A pipeline submitted again (the next run of a scheduled DAG, a backfill's runs, a
retry) is checked against the same input schemas with the same operators: Spark's
analyzer would give the same answer again, at ~10-20 ms per vertex (issue 26: the plan
check was most of a warm small job's time before its first task). The cache keeps
each vertex's answer under `plan.plan_key`, a digest of everything that answer depends
on, so it is reused only where it cannot differ; the vertices whose answer could
depend on more (an `sql` or `transform` operator, a job with libraries) are checked
every time.

`jobmanager.planner.plan-cache.size` answers are kept at most, least recently used
out first, each for `jobmanager.planner.plan-cache.ttl` (Flink's
`sql-gateway.session.plan-cache.*`). A failed check is never kept. The cache lives in
the process that prepares jobs (the planner process, or a MiniCluster's own), so a
planner replaced when idle starts empty.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

from cachetools import TTLCache

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration

# (config, input schemas, files) -> (resolved, output schema): MasterContext.plan_resolver's shape.
Resolver = Callable[[dict[str, Any], list[Any], list[str]], tuple[dict[str, Any], str]]
KeyOf = Callable[[dict[str, Any], list[Any], list[str]], str | None]


class PlanCache:
    """Plan answers by key, at most `size` of them for `ttl` seconds each; thread-safe
    (a MiniCluster prepares concurrent submissions in worker threads)."""

    def __init__(self, size: int = 100, ttl: float = 3600.0, timer: Callable[[], float] = time.monotonic) -> None:
        self._timer = timer
        self._lock = threading.Lock()
        self._entries = self._new(size, ttl)
        self.hits = 0
        self.misses = 0

    def _new(self, size: int, ttl: float) -> TTLCache | None:
        return TTLCache(maxsize=size, ttl=ttl, timer=self._timer) if size > 0 and ttl > 0 else None

    def configure(self, size: int, ttl: float) -> None:
        """Apply the configured bounds; a change of either starts the cache afresh."""
        with self._lock:
            current = self._entries
            if current is None and (size <= 0 or ttl <= 0):
                return
            if current is not None and (current.maxsize, current.ttl) == (size, ttl):
                return
            self._entries = self._new(size, ttl)

    def resolver(self, key_of: KeyOf, resolve: Resolver) -> Resolver:
        """`resolve`, answering from the cache where `key_of` gives a key it holds."""

        def cached(config: dict[str, Any], input_schemas: list[Any], files: list[str]) -> tuple[dict[str, Any], str]:
            key = key_of(config, input_schemas, files) if self._entries is not None else None
            if key is not None:
                with self._lock:
                    found = self._entries.get(key) if self._entries is not None else None
                    if found is not None:
                        self.hits += 1
                        return copy.deepcopy(found)
                    self.misses += 1
            answer = resolve(config, input_schemas, files)
            if key is not None:
                with self._lock:
                    if self._entries is not None:
                        self._entries[key] = copy.deepcopy(answer)
            return answer

        return cached

    def __len__(self) -> int:
        with self._lock:
            return 0 if self._entries is None else len(self._entries)


def configure_from(cache: PlanCache, config: Configuration) -> PlanCache:
    cache.configure(config.get(cfg.PLANNER_PLAN_CACHE_SIZE), config.get_seconds(cfg.PLANNER_PLAN_CACHE_TTL))
    return cache
