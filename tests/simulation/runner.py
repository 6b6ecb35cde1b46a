"""Many seeds, over worker processes; failures come back with their seed and first violation."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from dataclasses import dataclass, field

from tests.simulation.schedule import run


@dataclass
class Summary:
    schedules: int = 0
    messages: int = 0
    failures: dict[int, list[str]] = field(default_factory=dict)
    job_states: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)

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
        for seed, violations in sorted(self.failures.items())[:20]:
            lines.append(f"  seed {seed}: {violations[0]}")
            lines.append(f"    replay: .venv/bin/python -m tests.simulation --seed {seed} --trace")
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


def run_many(start: int, count: int, workers: int = 1, transport_faults: bool = True) -> Summary:
    """Seeds start..start+count-1, interleaved over `workers` processes (fork)."""
    chunks = [(start + i, start + count, workers, transport_faults) for i in range(workers)]
    if workers == 1:
        return _run_range(chunks[0])
    summary = Summary()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for part in pool.map(_run_range, chunks):
            summary.add(part)
    return summary
