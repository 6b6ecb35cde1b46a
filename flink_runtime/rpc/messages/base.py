"""The base of every protocol message, and the answers any handler may give.

Every message is a msgspec Struct tagged with its class name (not its module), so a
message on the wire says what it is and the decoder refuses anything it does not know.
"""

from __future__ import annotations

import msgspec

# Bumped on any incompatible change to a message of this package.
# 5: a TaskManager reports task states in batches (UpdateTaskExecutionStates), which a
# JobManager of version 4 cannot decode.
# 6: a JobManager deploys the tasks of one mailbox turn to one TaskManager in one
# SubmitTasks message, which a TaskManager of version 5 cannot decode.
# 7: the JobManager's planner asks a TaskManager to resolve a Spark plan (ResolvePlan),
# which a TaskManager of version 6 cannot decode.
PROTOCOL_VERSION = 7


class Message(msgspec.Struct, tag=True, kw_only=True, omit_defaults=True):
    """Base of every protocol message; the tag is the class name."""


class FencedMessage(Message):
    """A message from a task, fenced by the JobManager that deployed it (Flink's
    FencedRpcEndpoint with the JobMasterId as token).

    A task keeps running after its JobManager died until its TaskManager notices; a
    JobManager started since then (recovering the same job from the job store) refuses
    whatever such a task reports, so work computed for the old run never completes the
    new one.
    """

    jobmanager_id: str  # the `jobmanager_id` of the JobManager that deployed the task


class Acknowledge(Message):
    ok: bool = True
    reason: str = ""


class RpcError(Message):
    """Answer to an ask whose handler raised: the remote side's message, not a trace."""

    error: str
