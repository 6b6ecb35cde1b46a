#!/usr/bin/env bash
# Make sure PostgreSQL's server binaries (initdb, postgres) and its JDBC driver are installed:
# the job store's PostgreSQL tests and the standby JobManager's test start a private server
# from them (tests/helpers/postgres.py), and the JDBC sources and sinks load the driver jar
# (/usr/share/java/postgresql.jar) into Spark. Installs Debian's postgresql and
# libpostgresql-jdbc-java packages if they are absent; the packaged cluster service is not
# needed (the tests run their own server in a temp dir).
set -euo pipefail

JDBC_JAR=/usr/share/java/postgresql.jar
packages=()
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  echo "PostgreSQL's initdb not found; installing Debian's postgresql..." >&2
  packages+=(postgresql)
fi
if [ ! -f "$JDBC_JAR" ]; then
  echo "PostgreSQL's JDBC driver ($JDBC_JAR) not found; installing Debian's libpostgresql-jdbc-java..." >&2
  packages+=(libpostgresql-jdbc-java)
fi
if [ "${#packages[@]}" -eq 0 ]; then
  exit 0
fi

# shellcheck source=scripts/as-root.sh
. "$(dirname "$0")/as-root.sh"
if command -v apt-get >/dev/null 2>&1; then
  as_root apt-get update -qq
  # policy-rc.d-free containers may try to start the packaged cluster: harmless if it fails.
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
else
  echo "error: no apt-get found; install PostgreSQL (initdb and postgres) and its JDBC driver ($JDBC_JAR) and retry." >&2
  exit 1
fi
ls /usr/lib/postgresql/*/bin/initdb "$JDBC_JAR"
