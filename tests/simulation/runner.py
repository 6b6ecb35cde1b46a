"""Many seeds, over worker processes; failures come back with their seed and first violation.

Schedules always run in worker processes started with `spawn`: a run patches the
process's clocks and uuid4 (clock.deterministic), which would derail any other thread of
the calling process (a pytest session's MiniCluster), and a forked copy of a process
with threads may inherit a lock some thread held.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tests.simulation.schedule import Result, run

T = TypeVar("T")


@dataclass
class Summary:
    schedules: int = 0
    messages: int = 0
    failures: dict[int, list[str]] = field(default_factory=dict)
    job_states: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    replay_flags: str = ""

    def kinds(self) -> Counter[str]:
        """How many failing seeds broke each kind of invariant (their first violation's)."""
        return Counter(violations[0].split("]", 1)[0].lstrip("[") for violations in self.failures.values())

    def add(self, other: Summary) -> None:
        self.schedules += other.schedules
        self.messages += other.messages
        self.failures.update(other.failures)
        self.job_states.update(other.job_states)
        self.notes.update(other.notes)

    def describe(self) -> str:
        lines = [
            f"{self.schedules} schedules, {self.messages} messages delivered, jobs ended "
            f"{dict(sorted(self.job_states.items()))}, {len(self.failures)} failing seeds"
        ]
        lines += [f"  note: {note}: in {count} schedules" for note, count in sorted(self.notes.items())]
        lines += [f"  broken: {kind}: {count} seeds" for kind, count in sorted(self.kinds().items())]
        for seed, violations in sorted(self.failures.items())[:20]:
            lines.append(f"  seed {seed}: {violations[0]}")
            lines.append(f"    replay: .venv/bin/python -m tests.simulation --seed {seed} --trace{self.replay_flags}")
        return "\n".join(lines)


def _run_range(arguments: tuple[int, int, int, bool]) -> Summary:
    start, stop, step, transport_faults = arguments
    summary = Summary()
    for seed in range(start, stop, step):
        result = run(seed, record=False, transport_faults=transport_faults)
        summary.schedules += 1
        summary.messages += result.delivered
        summary.job_states.update(result.job_states.values())
        summary.notes.update({note: 1 for note in result.notes})
        if not result.ok:
            summary.failures[seed] = result.violations
    return summary


def run_many(start: int, count: int, workers: int = 1, transport_faults: bool = False) -> Summary:
    """Seeds start..start+count-1, interleaved over `workers` processes."""
    chunks = [(start + i, start + count, workers, transport_faults) for i in range(workers)]
    summary = Summary(replay_flags=" --transport-faults" if transport_faults else "")
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for part in pool.map(_run_range, chunks):
            summary.add(part)
    return summary


def in_subprocess(function: Callable[..., T], *args: Any) -> T:
    """Call `function(*args)` (importable, picklable arguments) in a spawned process."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def replay(seed: int, transport_faults: bool = False) -> Result:
    return run(seed, record=True, transport_faults=transport_faults)


def failing_seeds_with_lost_splits(seeds: int, enough: int = 3) -> list[tuple[int, list[str]]]:
    """A mutant JobMaster that never hands out again the splits of an attempt that did not
    finish: the first `enough` of `seeds` seeds whose invariants catch it (the simulator's
    own test)."""
    from flink_runtime.scheduler.source_splits import SourceSplits

    SourceSplits.attempt_stopped = lambda self, vertex_id, execution_id, subtask_index: None  # type: ignore[method-assign]
    caught = []
    for seed in range(seeds):
        result = run(seed, record=False)
        if not result.ok:
            caught.append((seed, result.violations))
            if len(caught) == enough:
                break
    return caught


def replays_exactly(seed: int) -> tuple[bool, int]:
    """Whether two runs of a seed take the very same steps (every delivery), and how many."""
    first, second = run(seed, verbose=True), run(seed, verbose=True)
    return first.trace == second.trace, len(first.trace)
