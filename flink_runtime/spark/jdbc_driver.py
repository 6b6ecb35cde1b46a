"""The JDBC driver every SparkSession loads when it is installed.

A session's classpath is fixed when its JVM starts, and sessions outlive jobs, so the
driver goes on every session's `spark.jars` rather than on the JDBC jobs' alone.
"""

from __future__ import annotations

import os

# Where Debian's libpostgresql-jdbc-java puts the driver (scripts/ensure-postgresql.sh installs it).
DRIVER_JAR = "/usr/share/java/postgresql.jar"


def driver_jars() -> list[str]:
    """The JDBC driver jars a SparkSession loads (spark/session.py): those installed."""
    return [DRIVER_JAR] if os.path.isfile(DRIVER_JAR) else []
