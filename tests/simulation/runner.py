"""Many seeds, over worker processes; failures come back with their seed and first violation.

Schedules always run in worker processes started with `spawn`: a run patches the
process's clocks and uuid4 (clock.deterministic), which would derail any other thread of
the calling process (a pytest session's MiniCluster), and a forked copy of a process
with threads may inherit a lock some thread held.

Every process that runs schedules has PYTHONHASHSEED=0 (HASH_SEED): the runtime keeps
some strings in sets (a TaskManager's unanswered final states), whose order follows the
strings' hashes, randomized per process otherwise; a seed that failed in a worker then
replays the same in `python -m tests.simulation --seed n`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.simulation.schedule import Result, run

T = TypeVar("T")

HASH_SEED = "0"


@contextlib.contextmanager
def _hash_seed_pinned() -> Iterator[None]:
    """Processes spawned inside (a Pool's workers) get PYTHONHASHSEED=HASH_SEED; this
    process's environment is as it was afterwards."""
    saved = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = HASH_SEED
    try:
        yield
    finally:
        if saved is None:
            del os.environ["PYTHONHASHSEED"]
        else:
            os.environ["PYTHONHASHSEED"] = saved


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
    # A ProcessPoolExecutor, not a Pool: a worker that dies (killed, out of memory) fails
    # the run with BrokenProcessPool instead of leaving map waiting for ever.
    context = multiprocessing.get_context("spawn")
    with _hash_seed_pinned(), ProcessPoolExecutor(workers, mp_context=context) as pool:
        for part in pool.map(_run_range, chunks):
            summary.add(part)
    return summary


class BackgroundRun:
    """run_many in a child process (and its spawned workers) at lower CPU priority, started
    when a pytest session begins so that the schedules use the CPU its other tests leave idle
    (they mostly wait on processes, JVMs and sockets); test_schedules collects the result.

    The child is a new session (process group) so that kill() ends it and its workers at
    once; it inherits this process's environment, FLINK_RUNTIME_TEST_RUN included, so the
    run's leftover check (tests/helpers/leftovers.py) sees it if it outlived the run.
    """

    def __init__(self, start: int, count: int, workers: int, niceness: int = 10) -> None:
        self._directory = Path(tempfile.mkdtemp(prefix="flink-runtime-simulation-"))
        self._output = self._directory / "summary.pickle"
        self._log_path = self._directory / "output.log"
        root = str(Path(__file__).resolve().parents[2])
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [root, environment.get("PYTHONPATH")]))
        environment["PYTHONHASHSEED"] = HASH_SEED
        # Niced first thing (imports take seconds on a busy machine); the workers inherit it.
        code = (
            f"import os; os.nice({int(niceness)}); import sys; "
            "from tests.simulation.runner import _background_main; _background_main(sys.argv[1:])"
        )
        arguments = [str(self._output), str(start), str(count), str(workers)]
        with self._log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-c", code, *arguments],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=root,
                start_new_session=True,
            )

    def result(self, timeout: float | None = None) -> Summary:
        """Waits for the run; its Summary, or RuntimeError with the child's output."""
        try:
            code = self._process.wait(timeout)
            if code != 0 or not self._output.exists():
                output = self._log_path.read_text(errors="replace")[-5000:]
                raise RuntimeError(f"the background simulation run exited with {code}:\n{output}")
            with self._output.open("rb") as file:
                summary: Summary = pickle.load(file)
            return summary
        finally:
            if self._process.poll() is not None:
                shutil.rmtree(self._directory, ignore_errors=True)

    def kill(self) -> None:
        """Ends the child and its workers (its whole process group: the group outlives a
        child that already exited while any worker still runs)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        shutil.rmtree(self._directory, ignore_errors=True)


# The session's BackgroundRun, if tests/simulation/conftest.py started one.
background: BackgroundRun | None = None


def collect_background() -> Summary | None:
    """The background run's Summary (waiting for it), or None when none was started.
    Forgotten only once collected: a wait that fails leaves it for the session to kill."""
    global background
    if background is None:
        return None
    summary = background.result()
    background = None
    return summary


def kill_background() -> None:
    """Ends the background run if one is still there (the session ends without collecting it)."""
    global background
    if background is not None:
        background.kill()
        background = None


def _background_main(argv: list[str]) -> None:
    """BackgroundRun's child (already niced): output, start, count, workers."""
    output, start, count, workers = argv
    summary = run_many(int(start), int(count), int(workers))
    partial = Path(output + ".partial")
    partial.write_bytes(pickle.dumps(summary))
    partial.replace(output)


def in_subprocess(function: Callable[..., T], *args: Any) -> T:
    """Call `function(*args)` (importable, picklable arguments) in a spawned process."""
    with _hash_seed_pinned(), multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def replay(seed: int, transport_faults: bool = False, continuous: bool = False) -> Result:
    """A pinned seed's schedule as its replay test knows it (before continuous sources
    were drawn, unless `continuous`)."""
    return run(seed, record=True, transport_faults=transport_faults, continuous=continuous)


def replay_continuous(seed: int) -> Result:
    """A seed as test_schedules runs it, continuous sources included."""
    return replay(seed, continuous=True)


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
