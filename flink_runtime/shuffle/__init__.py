"""Fetching result partitions from the TaskManager that serves them (Flink's shuffle
client side): consumers fetch their subpartitions (taskmanager/partition_service.py),
the JobManager fetches whole partitions into a savepoint (checkpoint/served_partitions.py).

partition_client.py   asking a serving TaskManager, copying files slice by slice

Below the jobmanager and taskmanager packages: both use it, it uses neither.
"""
