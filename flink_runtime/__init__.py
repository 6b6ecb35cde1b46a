"""flink-runtime: a Flink-style JobManager/TaskManager runtime in Python whose tasks run PySpark."""

__version__ = "0.1.0"
