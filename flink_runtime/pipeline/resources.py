"""Resources in the Pipeline API (Flink's fine-grained resource management, FLIP-169):

    p = Pipeline("etl", parallelism=4)
    heavy = p.slot_sharing_group("heavy").resources(cpu=2, heap="1g")
    rows = p.read_parquet("in/").select("*").resources(cpu=0.5, heap="256m")
    rows.key_by("k").agg("count(*) AS n").slot_sharing_group(heavy).write_parquet("out/")

An operator's ``.resources(...)`` is what one of its subtasks needs; the operators
chained into one vertex add up to the vertex's resources (those without resources add
nothing). A slot sharing group's ``.resources(...)`` is what one slot of the group
holds, whatever its vertices say (Flink's ``SlotSharingGroup`` with resources). What
nobody specified is UNKNOWN: a slot of the TaskManager's default size.
"""

from __future__ import annotations

import math
from typing import Any, Self

from flink_runtime.config_values import parse_size_bytes
from flink_runtime.jobgraph.jobgraph import ResourceProfile

__all__ = ["SlotSharingGroup", "resource_spec", "add_specs"]

# As the JobGraph's Identifier: group names are slot sharing group ids.
_MAX_GROUP_NAME = 128


def resource_spec(cpu: Any, heap: Any, managed: Any, where: str) -> ResourceProfile:
    """A JobGraph ResourceProfile from user arguments: cores as a number, memory as a size
    ("512m", "1g", or bytes), rounded up to whole MiB. None leaves a dimension at 0."""
    if cpu is None and heap is None and managed is None:
        raise ValueError(f"{where} needs at least one of cpu=, heap=, managed=, e.g. {where}(cpu=1, heap='512m').")
    cores = 0.0
    if cpu is not None:
        if isinstance(cpu, bool) or not isinstance(cpu, int | float) or not math.isfinite(cpu) or cpu <= 0:
            raise ValueError(f"{where}: cpu must be a positive number of cores (fractions allowed), got {cpu!r}.")
        cores = float(cpu)
    return ResourceProfile(
        cpu_cores=cores,
        task_heap_memory_mb=_mib(heap, f"{where}: heap"),
        managed_memory_mb=_mib(managed, f"{where}: managed"),
    )


def _mib(value: Any, where: str) -> int:
    if value is None:
        return 0
    size = parse_size_bytes(value, where, minimum=1)
    return math.ceil(size / 2**20)


def add_specs(specs: list[ResourceProfile]) -> ResourceProfile:
    """The sum of the specified ones (what the chained operators of one vertex need)."""
    return ResourceProfile(
        cpu_cores=float(sum(spec.cpu_cores for spec in specs)),
        task_heap_memory_mb=sum(spec.task_heap_memory_mb for spec in specs),
        managed_memory_mb=sum(spec.managed_memory_mb for spec in specs),
    )


class SlotSharingGroup:
    """A named slot sharing group of a Pipeline; ``Pipeline.slot_sharing_group(name)``
    makes or finds it, an operator's ``.slot_sharing_group(group)`` puts it there."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"slot_sharing_group() needs a non-empty name, got {name!r}.")
        name = name.strip()
        if len(name) > _MAX_GROUP_NAME or not (name[0].isalnum() and all(c.isalnum() or c in "_.-" for c in name)):
            raise ValueError(
                f"slot sharing group name {name!r} must be 1-{_MAX_GROUP_NAME} letters, digits, '_', '.' or '-', "
                "starting with a letter or digit."
            )
        self.name = name
        self.spec: ResourceProfile | None = None

    def resources(
        self, cpu: float | None = None, heap: int | str | None = None, managed: int | str | None = None
    ) -> Self:
        """What one slot of this group holds: ``cpu`` cores, ``heap`` task heap and
        ``managed`` memory (sizes such as "512m"). Replaces the sum of its vertices'."""
        self.spec = resource_spec(cpu, heap, managed, "SlotSharingGroup.resources")
        return self

    def __repr__(self) -> str:
        return f"SlotSharingGroup({self.name!r})"
