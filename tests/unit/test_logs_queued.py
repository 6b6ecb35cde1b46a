"""logs/queued.py: a TaskManager's log handlers fed by one writer thread. The lines in the
file are the ones the handlers wrote before, each with the tag of the thread that logged
it; nothing queued is lost when the process ends, not even through fail_hard."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import threading
from pathlib import Path

from flink_runtime.logs.context import LOG_FORMAT, TaskTagFilter, bind_task
from flink_runtime.logs.queued import QueuedHandlers
from flink_runtime.rpc.messages import TaskDeploymentDescriptor

LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO  test\.queued \[job=(\w+) vertex=v subtask=(\d+) attempt=0\] "
    r"Noop \((\d+)/8\)#0 \(e-\d+\) switched from (\w+) to (\w+)\.$"
)


def descriptor(subtask: int) -> TaskDeploymentDescriptor:
    return TaskDeploymentDescriptor(
        job_id="a" * 32,
        job_name="j",
        execution_id=f"e-{subtask}",
        jobmanager_id="jm",
        allocation_id="x",
        slot_index=subtask,
        data_namespace="a" * 32,
        vertex_id="v",
        task_name=f"Noop ({subtask + 1}/8)",
        subtask_index=subtask,
        parallelism=8,
        attempt_number=0,
        invokable="noop",
    )


def test_lines_of_many_task_threads_are_written_whole_tagged_and_in_order(tmp_path: Path) -> None:
    path = tmp_path / "tm.log"
    file_handler = logging.FileHandler(path, encoding="utf-8")
    file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
    file_handler.addFilter(TaskTagFilter())  # as logs/files.py sets it up
    queued = QueuedHandlers([file_handler])
    log = logging.getLogger("test.queued")
    log.propagate, log.level = False, logging.INFO
    log.addHandler(queued)
    states = ["DEPLOYING", "INITIALIZING", "RUNNING", "FINISHED"]

    def task(subtask: int) -> None:
        bind_task(descriptor(subtask))
        for _ in range(50):
            for old, new in zip(states, states[1:], strict=False):
                log.info("%s#0 (e-%d) switched from %s to %s.", f"Noop ({subtask + 1}/8)", subtask, old, new)

    try:
        threads = [threading.Thread(target=task, args=(subtask,)) for subtask in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        try:
            raise ValueError("the cause")
        except ValueError:
            log.exception("failed")
        queued.flush()  # returns once everything logged before is in the file
        lines = path.read_text().splitlines()
    finally:
        log.removeHandler(queued)
        queued.close()
        file_handler.close()
    matches = [LINE.match(line) for line in lines[: 8 * 150]]
    assert all(matches), [line for line, match in zip(lines, matches, strict=False) if not match][:3]
    for subtask in range(8):
        own = [m for m in matches if m is not None and m.group(2) == str(subtask)]
        assert {m.group(3) for m in own} == {str(subtask + 1)}, "a line tagged with another thread's task"
        assert [(m.group(4), m.group(5)) for m in own] == list(zip(states, states[1:], strict=False)) * 50
    assert lines[8 * 150].endswith("ERROR test.queued failed")  # no task bound: no tag
    assert lines[-1] == "ValueError: the cause"


def test_a_process_that_fails_hard_leaves_no_line_in_the_queue(tmp_path: Path) -> None:
    path = tmp_path / "tm.log"
    script = f"""
import logging
from flink_runtime.logs.queued import queued_root_handlers
from flink_runtime.rpc.supervision import fail_hard
handler = logging.FileHandler({str(path)!r})
handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
logging.getLogger().addHandler(handler)
logging.getLogger().setLevel(logging.INFO)
with queued_root_handlers():
    for n in range(2000):
        logging.getLogger("t").info("line %d", n)
    fail_hard("the test", RuntimeError("boom"))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 70, done.stderr
    lines = path.read_text().splitlines()
    assert lines[:2000] == [f"INFO line {n}" for n in range(2000)]
    assert lines[2000].startswith("CRITICAL the test: RuntimeError: boom; exiting with code 70")
