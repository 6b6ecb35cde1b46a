"""ResourceProfile: how much of a TaskManager a slot holds or a slot request needs
(Flink's ``ResourceProfile``, flink-runtime ``clusterframework/types``).

Three dimensions, as a TaskManager here has them: CPU cores, task heap (the Spark JVM's
heap the tasks share) and managed memory. Memory is in MiB (Flink keeps bytes; a MiB is
the unit the JobGraph and the configuration speak).

Two special profiles, with Flink's meaning:

* ``UNKNOWN``: the requirement was not specified. A request with it takes a slot of the
  TaskManager's *default slot profile* (its total divided by
  ``taskmanager.numberOfTaskSlots``), so jobs that specify nothing are scheduled exactly
  as by slot count. Any arithmetic with UNKNOWN gives UNKNOWN (a slot sharing group with
  one unspecified vertex has an unspecified requirement, as in Flink).
* ``ANY``: a slot or TaskManager whose size is not known matches every requirement (a
  TaskManager of an older version that did not report its resources).

Pure value type, frozen, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["ResourceProfile"]

# Sums of divided profiles (a third of a core, three times) must still fit the whole.
_EPSILON = 1e-6


@dataclass(frozen=True, slots=True)
class ResourceProfile:
    cpu_cores: float = 0.0
    task_heap_memory_mb: float = 0.0
    managed_memory_mb: float = 0.0
    # Set only on UNKNOWN: its numbers mean nothing.
    unknown: bool = False

    UNKNOWN: ClassVar[ResourceProfile]
    ANY: ClassVar[ResourceProfile]
    ZERO: ClassVar[ResourceProfile]

    def __post_init__(self) -> None:
        # Profiles are made per slot allocation and release: check the common case in one
        # expression (a NaN compares False, so it takes the slow path too).
        if self.cpu_cores >= 0 and self.task_heap_memory_mb >= 0 and self.managed_memory_mb >= 0:
            return
        for name in ("cpu_cores", "task_heap_memory_mb", "managed_memory_mb"):
            value = getattr(self, name)
            if math.isnan(value) or value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")

    # ----------------------------------------------------------------- building

    @classmethod
    def of(
        cls, cpu_cores: float = 0.0, task_heap_memory_mb: float = 0.0, managed_memory_mb: float = 0.0
    ) -> ResourceProfile:
        """A specified profile; all zeros is UNKNOWN (nothing was specified), as the
        JobGraph's zero defaults mean."""
        if cpu_cores == 0 and task_heap_memory_mb == 0 and managed_memory_mb == 0:
            return cls.UNKNOWN
        return cls(float(cpu_cores), float(task_heap_memory_mb), float(managed_memory_mb))

    @classmethod
    def from_spec(cls, spec: Any) -> ResourceProfile:
        """From a JobGraph ``ResourceProfile`` struct (or anything with its field names)."""
        return cls.of(
            getattr(spec, "cpu_cores", 0.0),
            getattr(spec, "task_heap_memory_mb", 0.0),
            getattr(spec, "managed_memory_mb", 0.0),
        )

    @classmethod
    def from_dict(cls, data: dict[str, float] | None) -> ResourceProfile:
        """From the dict a TaskManager registers (``RegisterTaskManager.total_resource``):
        empty means the TaskManager did not say, which is ANY."""
        if not data:
            return cls.ANY
        return cls(
            float(data.get("cpu_cores", 0.0)),
            float(data.get("task_heap_memory_mb", 0.0)),
            float(data.get("managed_memory_mb", 0.0)),
        )

    def to_dict(self) -> dict[str, float]:
        if self.unknown:
            return {}
        return {
            "cpu_cores": self.cpu_cores,
            "task_heap_memory_mb": self.task_heap_memory_mb,
            "managed_memory_mb": self.managed_memory_mb,
        }

    # ------------------------------------------------------------------ queries

    @property
    def is_unknown(self) -> bool:
        return self.unknown

    @property
    def is_any(self) -> bool:
        return math.isinf(self.cpu_cores)

    def fits(self, required: ResourceProfile) -> bool:
        """Whether this (a slot, or a TaskManager's free resources) holds ``required``:
        every dimension at least as large (Flink's ``allFieldsNoLessThan``). UNKNOWN is
        held by anything (it takes a default-sized slot, checked by the caller); ANY or an
        UNKNOWN slot holds everything."""
        if required.unknown or self.unknown or self.is_any:
            return True
        if required.is_any:
            return False
        return (
            self.cpu_cores + _EPSILON >= required.cpu_cores
            and self.task_heap_memory_mb + _EPSILON >= required.task_heap_memory_mb
            and self.managed_memory_mb + _EPSILON >= required.managed_memory_mb
        )

    def short_description(self) -> str:
        """For messages: ``1.5 cores, 512 MB task heap, 0 MB managed memory``."""
        if self.unknown:
            return "an unspecified (UNKNOWN) profile"
        if self.is_any:
            return "any profile"
        return (
            f"{self.cpu_cores:g} cores, {self.task_heap_memory_mb:g} MB task heap, "
            f"{self.managed_memory_mb:g} MB managed memory"
        )

    # --------------------------------------------------------------- arithmetic

    @staticmethod
    def total(profiles: Iterable[ResourceProfile]) -> ResourceProfile:
        """All of `profiles` merged (UNKNOWN if any is, else ANY if any is), summed in plain
        floats: one profile made, not one per addend (slot accounting sums at every
        allocation and release)."""
        cpu = heap = managed = 0.0
        any_ = False
        for profile in profiles:
            if profile.unknown:
                return ResourceProfile.UNKNOWN
            if profile.is_any:
                any_ = True
            else:
                cpu += profile.cpu_cores
                heap += profile.task_heap_memory_mb
                managed += profile.managed_memory_mb
        return ResourceProfile.ANY if any_ else ResourceProfile(cpu, heap, managed)

    def merge(self, other: ResourceProfile) -> ResourceProfile:
        """The sum (Flink's ``merge``): UNKNOWN if either is, ANY if either is."""
        if self.unknown or other.unknown:
            return ResourceProfile.UNKNOWN
        if self.is_any or other.is_any:
            return ResourceProfile.ANY
        return ResourceProfile(
            self.cpu_cores + other.cpu_cores,
            self.task_heap_memory_mb + other.task_heap_memory_mb,
            self.managed_memory_mb + other.managed_memory_mb,
        )

    __add__ = merge

    def subtract(self, other: ResourceProfile) -> ResourceProfile:
        """The difference; ValueError when ``other`` does not fit (Flink's ``subtract``
        refuses too: taking more than is there is a bookkeeping bug, not a request)."""
        if self.unknown or other.unknown:
            return ResourceProfile.UNKNOWN
        if self.is_any:
            return self
        if other.is_any or not self.fits(other):
            raise ValueError(f"cannot subtract {other.short_description()} from {self.short_description()}")
        return ResourceProfile(
            max(0.0, self.cpu_cores - other.cpu_cores),
            max(0.0, self.task_heap_memory_mb - other.task_heap_memory_mb),
            max(0.0, self.managed_memory_mb - other.managed_memory_mb),
        )

    __sub__ = subtract

    def divide(self, parts: int) -> ResourceProfile:
        """One of ``parts`` equal shares: a TaskManager's default slot profile is its total
        divided by its slot count (Flink's ``TaskExecutorResourceUtils``)."""
        if parts < 1:
            raise ValueError(f"parts must be >= 1, got {parts}")
        if self.unknown or self.is_any:
            return self
        return ResourceProfile(self.cpu_cores / parts, self.task_heap_memory_mb / parts, self.managed_memory_mb / parts)

    def multiply(self, times: int) -> ResourceProfile:
        if times < 0:
            raise ValueError(f"times must be >= 0, got {times}")
        if self.unknown or self.is_any:
            return self
        return ResourceProfile(self.cpu_cores * times, self.task_heap_memory_mb * times, self.managed_memory_mb * times)

    def count_fitting(self, slot: ResourceProfile) -> int:
        """How many slots of profile ``slot`` these (free) resources hold; a large number
        for ANY (the caller bounds it by a slot count)."""
        if self.unknown or self.is_any or slot.unknown or slot.is_any:
            return 2**31
        counts = [
            math.floor((have + _EPSILON) / need)
            for have, need in (
                (self.cpu_cores, slot.cpu_cores),
                (self.task_heap_memory_mb, slot.task_heap_memory_mb),
                (self.managed_memory_mb, slot.managed_memory_mb),
            )
            if need > 0
        ]
        return min(counts) if counts else 2**31


ResourceProfile.UNKNOWN = ResourceProfile(unknown=True)
ResourceProfile.ANY = ResourceProfile(math.inf, math.inf, math.inf)
ResourceProfile.ZERO = ResourceProfile()
