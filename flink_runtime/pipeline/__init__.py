"""The Pipeline API: build a JobGraph of PySpark tasks from DataFrame-style calls.

See `pipeline.py` for the user-facing classes and `translate.py` for how operators
become chained vertices and exchanges.
"""

from flink_runtime.pipeline.pipeline import DataSet, KeyedDataSet, Pipeline, Sink
from flink_runtime.pipeline.resources import SlotSharingGroup

__all__ = ["DataSet", "KeyedDataSet", "Pipeline", "Sink", "SlotSharingGroup"]
