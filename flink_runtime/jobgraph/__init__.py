"""The JobGraph a client submits: its structs, JSON (de)serialisation and validation."""

from flink_runtime.jobgraph.jobgraph import (
    MAX_PARALLELISM_UPPER_BOUND,
    DistributionPattern,
    Identifier,
    IntermediateDataSet,
    JobEdge,
    JobGraph,
    JobIdString,
    JobVertex,
    Parallelism,
    Partitioner,
    ResourceProfile,
    ResultPartitionType,
    json_schema,
    new_job_id,
)
from flink_runtime.jobgraph.topology import topological_order
from flink_runtime.jobgraph.validation import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    InvalidJobGraph,
    JobGraphLimits,
    convert_job_graph,
    decode_job_graph,
    validate_job_graph,
)

__all__ = [
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "MAX_PARALLELISM_UPPER_BOUND",
    "DistributionPattern",
    "Identifier",
    "IntermediateDataSet",
    "InvalidJobGraph",
    "JobEdge",
    "JobGraph",
    "JobGraphLimits",
    "JobIdString",
    "JobVertex",
    "Parallelism",
    "Partitioner",
    "ResourceProfile",
    "ResultPartitionType",
    "convert_job_graph",
    "decode_job_graph",
    "json_schema",
    "new_job_id",
    "topological_order",
    "validate_job_graph",
]
