"""Part of the flink-runtime Airflow provider; see flink_runtime.airflow."""
