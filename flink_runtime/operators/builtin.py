"""Invokables shipped with the runtime: tiny, dependency-free tasks.

They exercise every runtime path (splits, partitions, cancellation, failure) without
Spark, so the runtime is tested and benchmarked on its own. Data work proper is done
by the PySpark operators.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from flink_runtime.invokable import AbstractInvokable, TaskCancelledError
from flink_runtime.io.metrics import IOMetrics
from flink_runtime.io.splits import InputSplit


class NoOpInvokable(AbstractInvokable):
    def invoke(self) -> None:
        pass


class SleepInvokable(AbstractInvokable):
    """Sleeps `seconds`; with `ignore_cancel` it does not look at the cancel flag."""

    def invoke(self) -> None:
        deadline = time.monotonic() + float(self.environment.config.get("seconds", 1.0))
        ignore_cancel = bool(self.environment.config.get("ignore_cancel", False))
        while (remaining := deadline - time.monotonic()) > 0:
            if not ignore_cancel:
                self.environment.check_cancelled()
            time.sleep(min(remaining, 0.05))


class FailingInvokable(AbstractInvokable):
    """Fails with `message` after `after_seconds` (only subtask `subtask`, if given; only
    its first `attempts` attempts, if given: a task that recovers after a restart)."""

    def invoke(self) -> None:
        config = self.environment.config
        time.sleep(float(config.get("after_seconds", 0)))
        if "attempts" in config and self.environment.attempt_number >= int(config["attempts"]):
            return
        if config.get("subtask") in (None, self.environment.subtask_index):
            raise RuntimeError(config.get("message", "task failed on purpose"))


class NumberSource(AbstractInvokable):
    """Emits {"n": n, "key": n % modulo} for n in [0, count), split into ranges.

    config: count, splits (default: parallelism), modulo (default 10),
    hosts (optional list of host names the splits are local to, round robin),
    seconds_per_split (optional, to make a source slow).
    """

    @classmethod
    def create_input_splits(cls, config: dict[str, Any], parallelism: int) -> list[InputSplit]:
        count = int(config.get("count", 100))
        number_of_splits = max(1, int(config.get("splits", parallelism)))
        hosts = list(config.get("hosts", []))
        bounds = [count * i // number_of_splits for i in range(number_of_splits + 1)]
        return [
            InputSplit(
                split_number=i,
                hosts=[hosts[i % len(hosts)]] if hosts else [],
                payload=[bounds[i], bounds[i + 1]],
            )
            for i in range(number_of_splits)
        ]

    def invoke(self) -> None:
        modulo = int(self.environment.config.get("modulo", 10))
        pause = float(self.environment.config.get("seconds_per_split", 0))
        for split in self.environment.input_splits():
            start, end = split.payload
            for output in self.environment.outputs:
                output.emit_all({"n": n, "key": n % modulo} for n in range(start, end))
            if pause:
                time.sleep(pause)
        self.environment.check_cancelled()


class ModuloSum(AbstractInvokable):
    """Sums "n" per "key" over all inputs; emits {"key", "sum", "count"}.

    pause (optional, seconds): wait before emitting, to make the stage slow."""

    def invoke(self) -> None:
        sums: dict[Any, int] = defaultdict(int)
        counts: dict[Any, int] = defaultdict(int)
        for gate in self.environment.inputs:
            for record in gate.records():
                sums[record["key"]] += record["n"]
                counts[record["key"]] += 1
        deadline = time.monotonic() + float(self.environment.config.get("pause", 0))
        while time.monotonic() < deadline:
            self.environment.check_cancelled()
            time.sleep(0.05)
        self.environment.check_cancelled()
        for output in self.environment.outputs:
            output.emit_all({"key": k, "sum": sums[k], "count": counts[k]} for k in sorted(sums))


class CollectSink(AbstractInvokable):
    """Writes every input record to `<path>/part-<subtask>.json`, atomically."""

    def invoke(self) -> None:
        records = [record for gate in self.environment.inputs for record in gate.records()]
        if self.environment.cancelled.is_set():
            raise TaskCancelledError("cancelled before commit")
        target_dir = Path(self.environment.config["path"])
        target = target_dir / f"part-{self.environment.subtask_index}.json"
        attempt = f"{self.environment.subtask_index}.{self.environment.attempt_number}.{uuid.uuid4().hex[:8]}"
        staging = target_dir / f".part-{attempt}.tmp"
        # security.allowed-directories, links resolved: before writing and before the rename.
        self.environment.allowed_directories.check(str(staging), "collect-sink path")
        target_dir.mkdir(parents=True, exist_ok=True)
        staging.write_text(json.dumps(records))
        self.environment.allowed_directories.check(str(target), "collect-sink path")
        os.replace(staging, target)
        # Its output is a file of its own, not a partition the Task counts.
        self.environment.io_metrics += IOMetrics(records_out=len(records), bytes_out=target.stat().st_size)
