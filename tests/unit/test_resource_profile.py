"""ResourceProfile.total: the merge of many profiles, one profile made."""

from __future__ import annotations

from flink_runtime.scheduler.resource_profile import ResourceProfile


def test_total_is_merge_over_all_of_them() -> None:
    a, b = ResourceProfile(1, 100, 10), ResourceProfile(0.5, 50, 0)
    assert ResourceProfile.total([a, b]) == a.merge(b)
    assert ResourceProfile.total([]) == ResourceProfile.ZERO
    assert ResourceProfile.total([a, ResourceProfile.ANY, ResourceProfile.UNKNOWN]) == ResourceProfile.UNKNOWN
    assert ResourceProfile.total([a, ResourceProfile.ANY]) == ResourceProfile.ANY
