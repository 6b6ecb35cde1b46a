"""Finding the leading JobManager: TaskManagers (and anyone else with the job store's
URL) read the lease row, as Flink's LeaderRetrievalService watches its ConfigMap.

A TaskManager polls every `retry-period` and registers with whoever holds the lease;
when the holder changes it registers with the new leader (its tasks of the old one are
cancelled on that registration, see taskmanager/jobmanager_connection.py).
"""

from __future__ import annotations

import logging

from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.highavailability.lease_store import LeaderLease, LeaseStore, leader_lease_table

log = logging.getLogger(__name__)

HA_TYPE_DATABASE = "DATABASE"


def high_availability_enabled(config: Configuration) -> bool:
    """high-availability.type: database (jobstore.url is then required)."""
    enabled = config.get(cfg.HA_TYPE) == HA_TYPE_DATABASE
    if enabled and not config.get(cfg.JobStoreOptions.URL):
        raise ConfigurationError(
            "high-availability.type: database needs jobstore.url: the database every JobManager and "
            "TaskManager of the cluster shares (postgresql+psycopg://user:password@host/db)"
        )
    return enabled


def cluster_id(config: Configuration) -> str:
    """high-availability.cluster-id, checked: it is the lease row's key (at most 128 characters)."""
    value = str(config.get(cfg.HA_CLUSTER_ID)).strip("/") or "default"
    if len(value) > leader_lease_table.c.cluster_id.type.length:
        raise ConfigurationError(
            f"high-availability.cluster-id is {len(value)} characters long; at most "
            f"{leader_lease_table.c.cluster_id.type.length} fit the leader lease: choose a shorter name"
        )
    return value


class LeaderRetriever:
    """Reads who leads; never writes (TaskManagers may have read-only database users)."""

    def __init__(self, url: str, cluster: str) -> None:
        parsed = make_url(url)
        self._display_url = parsed.render_as_string(hide_password=True)
        # A database that does not answer: the read fails within seconds and is asked again.
        connect_args = {"connect_timeout": 10} if parsed.get_backend_name() == "postgresql" else {}
        self._engine = create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
        self._store: LeaseStore | None = None
        self.cluster_id = cluster

    @classmethod
    def from_configuration(cls, config: Configuration) -> LeaderRetriever:
        return cls(str(config.get(cfg.JobStoreOptions.URL)), cluster_id(config))

    def leader(self) -> LeaderLease | None:
        """The current lease (None before any JobManager took one, or if it was released);
        a database error is logged and answered None, to be asked again."""
        try:
            if self._store is None:
                if not inspect(self._engine).has_table(leader_lease_table.name):
                    return None  # no JobManager started on this database yet
                self._store = LeaseStore(self._engine, self.cluster_id, create_table=False)
            lease = self._store.read()
        except SQLAlchemyError as exc:
            log.warning("Cannot read the leader from the job store %s: %s", self._display_url, exc)
            return None
        return lease if lease is not None and lease.leader_id is not None else None

    def close(self) -> None:
        self._engine.dispose()
