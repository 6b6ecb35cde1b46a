"""The PySpark side of Spark vertices: the task, its operator chain, I/O, plan resolution, the session."""
