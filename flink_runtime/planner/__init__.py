"""Where a job's own code runs on the JobManager's behalf: a separate planner process.

Preparing a job imports its code (invokable classes, transform functions, uploaded
libraries) and resolves its Spark plan; publishing a finished job's output calls its
invokables' hooks. None of that may run inside the JobManager process: a transform
that calls `sys.exit`, crashes the interpreter or loops for ever would take the
JobManager (and every job it runs) with it. See pool.py.
"""

from flink_runtime.planner.pool import InProcessPlanner, Planner, PlannerPool, PlanningError

__all__ = ["InProcessPlanner", "Planner", "PlannerPool", "PlanningError"]
