"""Options of checkpointing, savepoints, state backends and restarts (Flink's
CheckpointingOptions, SavepointConfigOptions, StateBackendOptions, RestartStrategyOptions).

Most of them are a job's to choose: a JobGraph's config overrides the cluster's."""

from __future__ import annotations

from flink_runtime.configuration.option import (
    BOOLEAN,
    DURATION,
    FLOAT,
    OPTIONAL_DURATION,
    OPTIONAL_INTEGER,
    OPTIONAL_STRING,
    POSITIVE_DURATION,
    ConfigOption,
    choice,
    integer,
    lower_choice,
    optional_lower_choice,
)


class CheckpointingOptions:
    TITLE = "Checkpointing"

    INTERVAL = ConfigOption(
        "execution.checkpointing.interval",
        OPTIONAL_DURATION,
        None,
        "Time between periodic checkpoints of a job; unset or 0: no periodic checkpoints "
        "(savepoints and stop-with-savepoint still work). At least execution.checkpointing.min-interval.",
        job_overridable=True,
    )
    MIN_INTERVAL = ConfigOption(
        "execution.checkpointing.min-interval",
        DURATION,
        "1 s",
        "The shortest execution.checkpointing.interval a job may ask for (a cluster setting).",
    )
    TIMEOUT = ConfigOption(
        "execution.checkpointing.timeout",
        POSITIVE_DURATION,
        "10 min",
        "A checkpoint not acknowledged by every task within this time fails.",
        job_overridable=True,
    )
    NUM_RETAINED = ConfigOption(
        "state.checkpoints.num-retained",
        integer(minimum=1),
        1,
        "How many completed checkpoints a job keeps; older ones are deleted.",
        job_overridable=True,
    )
    CHECKPOINTS_DIRECTORY = ConfigOption(
        "state.checkpoints.dir",
        OPTIONAL_STRING,
        None,
        "Where checkpoints go (<dir>/<job id>/chk-<n>), a local path or a Hadoop URI; unset: "
        "<system temp dir>/flink-runtime-checkpoints. A job's own is checked against "
        "security.allowed-directories.",
        job_overridable=True,
    )
    SAVEPOINT_DIRECTORY = ConfigOption(
        "state.savepoints.dir",
        OPTIONAL_STRING,
        None,
        "Default target directory of savepoints, when a savepoint request names none.",
        job_overridable=True,
    )
    EXTERNALIZED_CHECKPOINT_RETENTION = ConfigOption(
        "execution.checkpointing.externalized-checkpoint-retention",
        choice("NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION"),
        "NO_EXTERNALIZED_CHECKPOINTS",
        "What happens to a job's retained checkpoints when it ends (Flink's values): "
        "NO_EXTERNALIZED_CHECKPOINTS deletes them whatever the end; DELETE_ON_CANCELLATION keeps them "
        "when the job FAILED; RETAIN_ON_CANCELLATION keeps them when it FAILED or was CANCELED. "
        "A FINISHED job's checkpoints are always deleted; savepoints never are.",
        job_overridable=True,
    )


class SavepointConfigOptions:
    TITLE = "Savepoints (starting a job from one)"

    SAVEPOINT_PATH = ConfigOption(
        "execution.savepoint.path",
        OPTIONAL_STRING,
        None,
        "Savepoint or retained checkpoint a job starts from.",
        job_overridable=True,
    )
    RESTORE_MODE = ConfigOption(
        "execution.savepoint-restore-mode",
        choice("CLAIM", "NO_CLAIM"),
        "NO_CLAIM",
        "Who owns the snapshot a job starts from (Flink's RestoreMode): NO_CLAIM leaves it to the user; "
        "CLAIM hands it to the job, which deletes it once it is no longer needed: when the job FINISHED, "
        "or ended keeping a checkpoint of its own (made self-contained, so nothing points into the old one).",
        job_overridable=True,
    )
    IGNORE_UNCLAIMED_STATE = ConfigOption(
        "execution.savepoint.ignore-unclaimed-state",
        BOOLEAN,
        False,
        "Start from a savepoint even if some of its state belongs to no vertex of the job.",
        job_overridable=True,
    )


class StateBackendOptions:
    TITLE = "State backends"

    STATE_BACKEND = ConfigOption(
        "state.backend.type",
        optional_lower_choice("hashmap", "rocksdb", what="state backend"),
        None,
        "Where keyed state of aggregations lives while a task runs: hashmap (in memory) or rocksdb "
        "(on local disk). Unset: keyed state is kept only when the job needs it (it restores from a "
        "savepoint, runs continuously, or is stopped with a savepoint), in hashmap.",
        job_overridable=True,
    )


_RESTART_TYPES = ("none", "fixed-delay", "exponential-delay", "failure-rate")
# Flink's other spellings of restart-strategy.type.
_RESTART_ALIASES = {
    "off": "none",
    "disable": "none",
    "fixeddelay": "fixed-delay",
    "exponentialdelay": "exponential-delay",
    "failurerate": "failure-rate",
}


class RestartStrategyOptions:
    TITLE = "Restart strategies"

    TYPE = ConfigOption(
        "restart-strategy.type",
        lower_choice(*_RESTART_TYPES, what="strategy", aliases=_RESTART_ALIASES),
        "none",
        "Whether and when a job whose task failed restarts: none, fixed-delay, exponential-delay or "
        "failure-rate (Flink's aliases off, disable, fixeddelay, ... are accepted).",
        job_overridable=True,
    )
    FIXED_DELAY_ATTEMPTS = ConfigOption(
        "restart-strategy.fixed-delay.attempts",
        integer(minimum=0),
        1,
        "fixed-delay: how many restarts before the job fails.",
        job_overridable=True,
    )
    FIXED_DELAY_DELAY = ConfigOption(
        "restart-strategy.fixed-delay.delay",
        DURATION,
        "1 s",
        "fixed-delay: the wait before each restart.",
        job_overridable=True,
    )
    EXPONENTIAL_DELAY_INITIAL_BACKOFF = ConfigOption(
        "restart-strategy.exponential-delay.initial-backoff",
        DURATION,
        "1 s",
        "exponential-delay: the wait before the first restart.",
        job_overridable=True,
    )
    EXPONENTIAL_DELAY_MAX_BACKOFF = ConfigOption(
        "restart-strategy.exponential-delay.max-backoff",
        DURATION,
        "5 min",
        "exponential-delay: the longest wait between restarts.",
        job_overridable=True,
    )
    EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER = ConfigOption(
        "restart-strategy.exponential-delay.backoff-multiplier",
        FLOAT,
        2.0,
        "exponential-delay: the wait is multiplied by this after each restart.",
        job_overridable=True,
    )
    EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD = ConfigOption(
        "restart-strategy.exponential-delay.reset-backoff-threshold",
        DURATION,
        "1 h",
        "exponential-delay: after this long without a failure the wait starts from the initial backoff again.",
        job_overridable=True,
    )
    EXPONENTIAL_DELAY_JITTER_FACTOR = ConfigOption(
        "restart-strategy.exponential-delay.jitter-factor",
        FLOAT,
        0.1,
        "exponential-delay: each wait varies randomly by up to this fraction, so jobs do not restart in step.",
        job_overridable=True,
    )
    EXPONENTIAL_DELAY_ATTEMPTS = ConfigOption(
        "restart-strategy.exponential-delay.attempts-before-reset-backoff",
        OPTIONAL_INTEGER,
        None,
        "exponential-delay: how many restarts before the job fails (counted since the last reset); unset: no limit.",
        job_overridable=True,
    )
    FAILURE_RATE_MAX_FAILURES_PER_INTERVAL = ConfigOption(
        "restart-strategy.failure-rate.max-failures-per-interval",
        integer(minimum=0),
        1,
        "failure-rate: the job fails when more failures than this happen within the interval.",
        job_overridable=True,
    )
    FAILURE_RATE_INTERVAL = ConfigOption(
        "restart-strategy.failure-rate.failure-rate-interval",
        DURATION,
        "1 min",
        "failure-rate: the window failures are counted in.",
        job_overridable=True,
    )
    FAILURE_RATE_DELAY = ConfigOption(
        "restart-strategy.failure-rate.delay",
        DURATION,
        "1 s",
        "failure-rate: the wait before each restart.",
        job_overridable=True,
    )
