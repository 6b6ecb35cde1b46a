"""Flink's metric answer shapes (rest/metric_routes.py), without a cluster."""

from __future__ import annotations

import pytest

from flink_runtime.rest.errors import RestError
from flink_runtime.rest.metric_routes import aggregated_list, metric_list

VALUES = {"numRunningJobs": 2.0, "uptime": 1234.5, "numRestarts": 0}


def test_without_get_the_names_are_listed() -> None:
    assert metric_list(VALUES, None) == [{"id": "numRunningJobs"}, {"id": "uptime"}, {"id": "numRestarts"}]


def test_get_answers_the_values_as_text_and_leaves_unknown_names_out() -> None:
    assert metric_list(VALUES, "uptime, numRunningJobs,nope") == [
        {"id": "uptime", "value": "1234.5"},
        {"id": "numRunningJobs", "value": "2"},
    ]


SUBTASKS = [{"numRecordsOut": 10.0, "numBytesOut": 100.0}, {"numRecordsOut": 30.0, "numBytesOut": 300.0}]


def test_aggregation_over_subtasks() -> None:
    assert aggregated_list(SUBTASKS, "numRecordsOut", None) == [
        {"id": "numRecordsOut", "min": 10.0, "max": 30.0, "avg": 20.0, "sum": 40.0}
    ]
    assert aggregated_list(SUBTASKS, "numBytesOut,x", "sum,max") == [{"id": "numBytesOut", "sum": 400.0, "max": 300.0}]
    assert aggregated_list(SUBTASKS, None, None) == [{"id": "numRecordsOut"}, {"id": "numBytesOut"}]


def test_an_unknown_aggregation_is_a_400_naming_the_choices() -> None:
    with pytest.raises(RestError) as refused:
        aggregated_list(SUBTASKS, "numRecordsOut", "median")
    assert refused.value.status == 400 and "min, max, avg, sum" in str(refused.value)
