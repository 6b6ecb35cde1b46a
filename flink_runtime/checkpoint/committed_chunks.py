"""Which committed chunks a checkpoint holds, and what it may claim without them.

A checkpoint claims work done: completed splits (their files are not read again after a
restore), finished subtasks (not run again), final keyed state. Each claim is only as
good as the chunks holding that work's output, so they are listed together here (in a
worker thread, from what ProgressTracker.view captured in the mailbox):

- a partition the JobManager can see (one data directory, a shared filesystem, a
  Hadoop URI) is listed where it lies;
- one only its TaskManager holds (`taskmanager.network.partition-serving: network`)
  is listed by that TaskManager for a savepoint, which then copies it
  (served_partitions.py); a checkpoint copies nothing and cannot refer to it;
- whatever cannot be listed is UNAVAILABLE: its subtask's claims are left out (not
  finished, its splits not completed, its final state not kept), so a job restored
  from the checkpoint does that work again instead of skipping it and losing its
  output. Doing work twice costs time; skipping it would be a wrong result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flink_runtime.checkpoint.served_partitions import ServedPartitions
from flink_runtime.io import filesystem


@dataclass
class ChunkListing:
    # result id -> partition number (as a string) -> chunk paths, or served locators
    chunks: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # subtasks (= partition numbers) with a partition that could not be listed
    unavailable: set[int] = field(default_factory=set)
    # one line per unavailable partition, for the log and errors
    reasons: list[str] = field(default_factory=list)


@dataclass
class Claims:
    """What a vertex's checkpoint entry may claim, given its unavailable subtasks."""

    completed: dict[int, int]  # split -> the subtask that completed it
    finished: list[int]
    files: list[str]
    states: dict[str, dict[str, Any]]


def committed_chunks(
    data: dict[str, Any], restored: dict[str, dict[int, list[str]]], served: ServedPartitions | None
) -> ChunkListing:
    """Chunks of finished subtasks (all) and of completed splits (by their subtask)."""
    listing = ChunkListing()
    owner = data["completed"]  # split -> subtask
    for result, partitions in data["partitions"].items():
        for partition, (location, address) in partitions.items():
            finished = partition in data["finished"]
            found = list(restored.get(result, {}).get(partition, [])) if finished else []
            entries = _local_entries(location)
            if entries is None and address:  # only the producing TaskManager has it
                entries = served.chunks(address, result, partition) if served is not None else None
                if entries is None:
                    listing.unavailable.add(partition)
                    listing.reasons.append(f"partition {result}#{partition} is held by the TaskManager at {address}")
                    continue
            for name, path in entries or []:
                if finished or (
                    name.startswith("split-") and owner.get(int(name[6:]) if name[6:].isdigit() else -1) == partition
                ):
                    found.append(path)
            if found:
                listing.chunks.setdefault(result, {})[str(partition)] = found
    return listing


def _local_entries(location: str | None) -> list[tuple[str, str]] | None:
    """(name, path) of the committed chunks at `location`, or None when it is not visible here."""
    if not location:
        return None
    fs = filesystem.filesystem_for(location)
    if not fs.exists(location):
        return None
    entries = []
    for status in fs.glob(filesystem.join(location, "*")):
        name = status.path.rstrip("/").rsplit("/", 1)[-1]
        if not name.startswith((".", "_")):  # in progress, or the partition's manifest
            entries.append((name, status.path))
    return entries


def claims(data: dict[str, Any], unavailable: set[int]) -> Claims:
    """The vertex's claims without those of its `unavailable` subtasks. Such a subtask
    keeps only the state it was restored with (the start of the work it does again)."""
    completed = {split: subtask for split, subtask in data["completed"].items() if subtask not in unavailable}
    files = {f for split in completed for f in data["split_files"].get(split, [])} | set(data["earlier_files"])
    states = dict(data["restored_states"])
    states.update(
        {subtask: handle for subtask, handle in data["final_states"].items() if int(subtask) not in unavailable}
    )
    return Claims(
        completed=completed,
        finished=[subtask for subtask in data["finished"] if subtask not in unavailable],
        files=sorted(files),
        states=states,
    )


def sink_chunks(root: str | None, completed: dict[int, int], finished: list[int]) -> list[str]:
    """A sink's staged chunks that belong to completed splits and finished subtasks."""
    if not root:
        return []
    fs = filesystem.filesystem_for(root)
    if not fs.exists(root):
        return []
    names = [status.path.rstrip("/").rsplit("/", 1)[-1] for status in fs.glob(filesystem.join(root, "*"))]
    keep = {f"split-{n}" for n in completed} | {f"subtask-{i}" for i in finished}
    keep |= {name for name in names if name.startswith("restored-")}
    return [filesystem.join(root, name) for name in sorted(names) if name in keep]
