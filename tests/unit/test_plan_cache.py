"""The planner's plan cache (planner/plan_cache.py) and what its key depends on
(operators/spark/plan.py plan_key): answers reused only where Spark's could not differ."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.operators.spark.plan import plan_key
from flink_runtime.planner.plan_cache import PlanCache, configure_from

VALUE = '{"type":"struct","fields":[{"name":"value","type":"string","nullable":true,"metadata":{}}]}'
WORD_COUNT = [
    {"op": "select", "exprs": ["explode(split(value, ' ')) AS word"]},
    {"op": "aggregate", "keys": ["word"], "aggregates": ["count(*) AS n"], "phase": "partial"},
]


def text_source(*paths: str) -> dict[str, Any]:
    return {"source": {"format": "text", "paths": list(paths)}, "operators": WORD_COUNT}


class CountingResolver:
    """Stands in for Spark's analyzer: answers from the config, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, config: dict[str, Any], inputs: list[Any], files: list[str]) -> tuple[dict[str, Any], str]:
        self.calls += 1
        return {"source_schema": VALUE, "calls": [self.calls]}, f"schema of {len(config['operators'])} operators"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- the key ----------------------------------------------------------------------------------


def test_the_same_pipeline_on_other_text_files_has_the_same_key() -> None:
    monday = plan_key(text_source("/data/2026-11-30/*.txt"), [], ["/data/2026-11-30/a.txt"])
    tuesday = plan_key(text_source("/data/2026-12-01/*.txt"), [], ["/data/2026-12-01/b.txt"])
    assert monday is not None and monday == tuesday


def test_another_operator_or_input_schema_has_another_key() -> None:
    base = {"operators": [{"op": "filter", "condition": "n > 1"}]}
    other = {"operators": [{"op": "filter", "condition": "n > 2"}]}
    two_columns = VALUE.replace("]}", ',{"name":"n","type":"long","nullable":true,"metadata":{}}]}')
    keys = {plan_key(base, [VALUE], []), plan_key(other, [VALUE], []), plan_key(base, [two_columns], [])}
    assert None not in keys and len(keys) == 3


@pytest.mark.parametrize("op", [{"op": "sql", "query": "SELECT * FROM input"}, {"op": "transform", "function": "m:f"}])
def test_sql_and_transform_operators_are_never_cached(op: dict[str, Any]) -> None:
    assert plan_key({"operators": [{"op": "select", "exprs": ["value"]}, op]}, [VALUE], []) is None


def test_an_inferred_schema_is_keyed_by_the_first_files_size_and_time(tmp_path: Path) -> None:
    first = tmp_path / "part-0.json"
    first.write_text('{"a": 1}\n')
    config = {"source": {"format": "json", "paths": [str(tmp_path)]}, "operators": []}
    before = plan_key(config, [], [str(first)])
    assert before is not None and plan_key(config, [], [str(first)]) == before
    first.write_text('{"a": 1, "b": "two"}\n')  # rewritten in place: new size and time
    os.utime(first, ns=(1, 1))
    assert plan_key(config, [], [str(first)]) not in (None, before)


def test_an_inferred_schema_without_a_local_first_file_is_never_cached(tmp_path: Path) -> None:
    config = {"source": {"format": "parquet", "paths": ["s3a://bucket/in"]}, "operators": []}
    assert plan_key(config, [], ["s3a://bucket/in/part-0.parquet"]) is None
    assert plan_key(config, [], []) is None  # no file: the check itself says so
    assert plan_key(config, [], [str(tmp_path / "gone.parquet")]) is None


def test_a_declared_schema_needs_no_file() -> None:
    config = {"source": {"format": "csv", "paths": ["s3a://bucket/in"], "schema": "a INT"}, "operators": []}
    assert plan_key(config, [], ["s3a://bucket/in/part-0.csv"]) is not None


# -- the cache --------------------------------------------------------------------------------


def test_a_second_check_of_the_same_plan_is_answered_from_the_cache() -> None:
    cache, resolve = PlanCache(), CountingResolver()
    cached = cache.resolver(plan_key, resolve)
    first = cached(text_source("/in/a.txt"), [], ["/in/a.txt"])
    first[0]["calls"].append("changed by its caller")
    second = cached(text_source("/in/b.txt"), [], ["/in/b.txt"])
    assert resolve.calls == 1 and (cache.hits, cache.misses) == (1, 1)
    assert second == ({"source_schema": VALUE, "calls": [1]}, "schema of 2 operators")  # a copy, unchanged


def test_uncacheable_plans_and_failed_checks_are_resolved_every_time() -> None:
    cache, resolve = PlanCache(), CountingResolver()
    cached = cache.resolver(plan_key, resolve)
    sql = {"operators": [{"op": "sql", "query": "SELECT * FROM input"}]}
    cached(sql, [VALUE], [])
    cached(sql, [VALUE], [])
    assert resolve.calls == 2 and len(cache) == 0

    def refuse(config: dict[str, Any], inputs: list[Any], files: list[str]) -> tuple[dict[str, Any], str]:
        raise ValueError("unknown column")

    failing = cache.resolver(plan_key, refuse)
    for _ in range(2):
        with pytest.raises(ValueError, match="unknown column"):
            failing({"operators": [{"op": "filter", "condition": "nope > 1"}]}, [VALUE], [])
    assert len(cache) == 0


def test_entries_expire_after_the_ttl_and_the_least_recently_used_go_first() -> None:
    clock, resolve = Clock(), CountingResolver()
    cache = PlanCache(size=2, ttl=60, timer=clock)
    cached = cache.resolver(plan_key, resolve)
    plans = [{"operators": [{"op": "filter", "condition": f"n > {n}"}]} for n in range(3)]
    cached(plans[0], [VALUE], [])
    cached(plans[1], [VALUE], [])
    cached(plans[0], [VALUE], [])  # plans[1] is now the least recently used
    cached(plans[2], [VALUE], [])  # and goes
    assert resolve.calls == 3
    cached(plans[0], [VALUE], [])
    assert resolve.calls == 3
    cached(plans[1], [VALUE], [])
    assert resolve.calls == 4
    clock.now = 61
    cached(plans[0], [VALUE], [])
    assert resolve.calls == 5


@pytest.mark.parametrize(
    "setting", [{"jobmanager.planner.plan-cache.size": 0}, {"jobmanager.planner.plan-cache.ttl": "0 s"}]
)
def test_a_size_or_ttl_of_zero_turns_the_cache_off(setting: dict[str, Any]) -> None:
    cache, resolve = configure_from(PlanCache(), Configuration(setting)), CountingResolver()
    cached = cache.resolver(plan_key, resolve)
    cached(text_source("/in/a.txt"), [], [])
    cached(text_source("/in/a.txt"), [], [])
    assert resolve.calls == 2 and len(cache) == 0
    configure_from(cache, Configuration({}))  # back on, with the defaults
    cached(text_source("/in/a.txt"), [], [])
    cached(text_source("/in/a.txt"), [], [])
    assert resolve.calls == 3


def test_new_bounds_start_the_cache_afresh_and_the_same_bounds_keep_it() -> None:
    cache, resolve = PlanCache(), CountingResolver()
    cached = cache.resolver(plan_key, resolve)
    cached(text_source("/in/a.txt"), [], [])
    configure_from(cache, Configuration({}))
    assert len(cache) == 1
    configure_from(cache, Configuration({"jobmanager.planner.plan-cache.size": 5}))
    assert len(cache) == 0


def test_a_negative_size_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigurationError, match="jobmanager.planner.plan-cache.size"):
        configure_from(PlanCache(), Configuration({"jobmanager.planner.plan-cache.size": -1}))
