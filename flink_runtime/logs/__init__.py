"""Log files of the cluster processes, and serving them.

- files.py: where a process logs (`env.log.dir`), Flink's file names, size rotation,
  the `.out` copy of stdout;
- context.py: the `[job=... vertex=... subtask=N attempt=N]` tag of a task's lines;
- reading.py: listing, bounded and confined reads, a job's tagged lines;
- ranges.py: HTTP Range headers against a log file;
- queued.py: a TaskManager's handlers fed by one writer thread (task threads only queue);
- batch_write.py: the records of one writer turn written with one write per handler.

The TaskManager answers for its files over RPC (taskmanager/log_service.py); the REST
API serves the JobManager's own and fetches a TaskManager's (rest/log_routes.py).
"""

from flink_runtime.logs.context import LOG_FORMAT, TaskLogContext, TaskTagFilter, bind_task, current_task
from flink_runtime.logs.files import ProcessLogs, acquire, active, default_log_dir, process_id_for, release
from flink_runtime.logs.queued import QueuedHandlers, queued_root_handlers

__all__ = [
    "LOG_FORMAT",
    "ProcessLogs",
    "QueuedHandlers",
    "TaskLogContext",
    "TaskTagFilter",
    "acquire",
    "active",
    "bind_task",
    "current_task",
    "default_log_dir",
    "process_id_for",
    "queued_root_handlers",
    "release",
]
