#!/usr/bin/env bash
# Make sure PostgreSQL's server binaries (initdb, postgres) are installed: the job store's
# PostgreSQL tests and the standby JobManager's test start a private server from them
# (tests/helpers/postgres.py). Installs Debian's postgresql package if they are absent;
# its cluster service is not needed (the tests run their own server in a temp dir).
set -euo pipefail

if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then
  exit 0
fi

echo "PostgreSQL's initdb not found; installing Debian's postgresql..." >&2
# shellcheck source=scripts/as-root.sh
. "$(dirname "$0")/as-root.sh"
if command -v apt-get >/dev/null 2>&1; then
  as_root apt-get update -qq
  # policy-rc.d-free containers may try to start the packaged cluster: harmless if it fails.
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
else
  echo "error: no apt-get found; install PostgreSQL (initdb and postgres) and retry." >&2
  exit 1
fi
ls /usr/lib/postgresql/*/bin/initdb
