"""The JobGraph: what a client submits, as Flink models it.

A JobGraph is a DAG of JobVertex objects. A vertex produces IntermediateDataSets; a
JobEdge connects a data set to the vertex that consumes it, with a distribution
pattern (how producer subtasks are wired to consumer subtasks) and a partitioner
(how a producer splits its output among the consumers it is wired to).

The structs are msgspec Structs: they are the wire format, the JSON format and the
source of the published JSON Schema (`schema/jobgraph.schema.json`) at once, and
decoding them reports the exact path of a bad field (`$.vertices[2].parallelism`).
Graph-level rules (acyclic, edges pointing at known vertices, ...) are checked in
`flink_runtime.jobgraph.validation`.
"""

from __future__ import annotations

import enum
import hashlib
import uuid
from typing import Annotated, Any

import msgspec

# Flink's upper bound for max parallelism (key groups are 15-bit).
MAX_PARALLELISM_UPPER_BOUND = 32768

Identifier = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$",
        description="1-128 characters: letters, digits, '_', '.', '-'; starts with a letter or digit.",
    ),
]
JobIdString = Annotated[
    str,
    msgspec.Meta(pattern=r"^[0-9a-f]{32}$", description="32 lower-case hex digits, as Flink's JobID."),
]
Parallelism = Annotated[int, msgspec.Meta(ge=1, le=MAX_PARALLELISM_UPPER_BOUND)]


class DistributionPattern(enum.StrEnum):
    """How producer subtasks are wired to consumer subtasks."""

    # Each producer subtask feeds a subset of consumer subtasks (Flink's rule when
    # the parallelisms differ: ranges, see executiongraph.wiring).
    POINTWISE = "POINTWISE"
    # Every producer subtask feeds every consumer subtask.
    ALL_TO_ALL = "ALL_TO_ALL"


class Partitioner(enum.StrEnum):
    """How a producer subtask splits its records among the consumers it feeds."""

    FORWARD = "forward"
    HASH = "hash"
    REBALANCE = "rebalance"
    BROADCAST = "broadcast"


class ResultPartitionType(enum.StrEnum):
    # Produced completely before it is consumed: bounds failover regions.
    BLOCKING = "BLOCKING"
    # Consumable while being produced.
    PIPELINED = "PIPELINED"


class ResourceProfile(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, frozen=True):
    """What a subtask (or, on a slot sharing group, the slot it shares) needs: Flink's
    ResourceSpec. All zero means "unspecified" (Flink's UNKNOWN): a slot of the
    TaskManager's default size (its total / taskmanager.numberOfTaskSlots)."""

    cpu_cores: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    task_heap_memory_mb: Annotated[int, msgspec.Meta(ge=0)] = 0
    managed_memory_mb: Annotated[int, msgspec.Meta(ge=0)] = 0


class JobVertex(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    id: Identifier
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    # What runs in each subtask: a built-in name (see invokable.builtin_invokable) or
    # "package.module:ClassName" of an AbstractInvokable subclass.
    invokable: Annotated[str, msgspec.Meta(min_length=1, max_length=512)]
    parallelism: Parallelism = 1
    max_parallelism: Parallelism | None = None
    # Flink's JobVertex.isParallelismConfigured: False when `parallelism` is only the
    # job's default (the Pipeline API's `parallelism=`, not set_parallelism), which the
    # scheduler may then lower from the data the vertex consumes (adaptive batch
    # scheduling, scheduler/adaptive_parallelism.py); `parallelism` is its upper bound.
    parallelism_configured: bool = True
    # Handed to the invokable as is (for data vertices: the operator chain).
    config: dict[str, Any] = {}
    # Vertices in one group may share a slot (one subtask of each per slot).
    # None gives the vertex slots of its own.
    slot_sharing_group: Identifier | None = "default"
    # The i-th subtasks of all vertices in one co-location group run in one slot.
    co_location_group: Identifier | None = None
    resources: ResourceProfile = ResourceProfile()


class IntermediateDataSet(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    id: Identifier
    producer: Identifier
    result_type: ResultPartitionType = ResultPartitionType.BLOCKING


class JobEdge(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    # The consumed data set, and the vertex that consumes it.
    source: Identifier
    target: Identifier
    distribution_pattern: DistributionPattern = DistributionPattern.ALL_TO_ALL
    partitioner: Partitioner = Partitioner.HASH
    # Field names for the hash partitioner; empty hashes the whole record.
    keys: list[str] = []


def new_job_id() -> str:
    return uuid.uuid4().hex


class JobGraph(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    vertices: list[JobVertex]
    # Assigned by the client, as in Flink, so a client that retries a submission can
    # find its job again. Generated when absent.
    job_id: JobIdString | None = None
    intermediate_datasets: list[IntermediateDataSet] = []
    edges: list[JobEdge] = []
    # Python files, zips or wheels the tasks import user code from.
    libraries: list[str] = []
    # Per-job configuration, Flink keys (e.g. "restart-strategy.type").
    config: dict[str, Any] = {}
    # Resources of named slot sharing groups (Flink's SlotSharingGroup with resources):
    # a slot of the group gets this profile instead of the sum of its vertices'.
    slot_sharing_groups: dict[Identifier, ResourceProfile] = {}

    # -- building ---------------------------------------------------------------

    def add_vertex(self, vertex: JobVertex) -> JobVertex:
        self.vertices.append(vertex)
        return vertex

    def connect(
        self,
        producer: JobVertex | str,
        consumer: JobVertex | str,
        distribution_pattern: DistributionPattern = DistributionPattern.ALL_TO_ALL,
        partitioner: Partitioner = Partitioner.HASH,
        keys: list[str] | None = None,
        result_type: ResultPartitionType = ResultPartitionType.BLOCKING,
    ) -> JobEdge:
        """Add a data set produced by `producer` and an edge feeding it to `consumer`."""
        producer_id = producer if isinstance(producer, str) else producer.id
        consumer_id = consumer if isinstance(consumer, str) else consumer.id
        dataset = IntermediateDataSet(
            id=self._new_dataset_id(producer_id, consumer_id), producer=producer_id, result_type=result_type
        )
        self.intermediate_datasets.append(dataset)
        edge = JobEdge(
            source=dataset.id,
            target=consumer_id,
            distribution_pattern=distribution_pattern,
            partitioner=partitioner,
            keys=list(keys or []),
        )
        self.edges.append(edge)
        return edge

    def _new_dataset_id(self, producer_id: str, consumer_id: str) -> str:
        # Connecting the same two vertices twice (say, both inputs of a self-join) must
        # still give two data sets, and two long vertex ids must still make a valid
        # Identifier (at most 128 characters).
        base = f"{producer_id}-to-{consumer_id}"
        if len(base) > 110:
            base = f"{base[:101]}-{hashlib.sha1(base.encode()).hexdigest()[:8]}"
        taken = {dataset.id for dataset in self.intermediate_datasets}
        candidate, suffix = base, 1
        while candidate in taken:
            suffix += 1
            candidate = f"{base}-{suffix}"
        return candidate

    # -- (de)serialising ----------------------------------------------------------

    def to_json(self) -> bytes:
        return msgspec.json.encode(self)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @classmethod
    def from_json(cls, data: bytes | str) -> JobGraph:
        """Decode JSON; raises InvalidJobGraph naming the bad field."""
        from flink_runtime.jobgraph.validation import decode_job_graph

        return decode_job_graph(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobGraph:
        from flink_runtime.jobgraph.validation import convert_job_graph

        return convert_job_graph(data)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a JobGraph document (published as schema/jobgraph.schema.json)."""
    schema = msgspec.json.schema(JobGraph)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "flink-runtime JobGraph"
    return schema
