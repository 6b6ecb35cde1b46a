"""Tests of the Airflow provider (flink_runtime.airflow) and the example DAGs."""
