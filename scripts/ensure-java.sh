#!/usr/bin/env bash
# Make sure a Java 17+ runtime is on the PATH (PySpark needs one); install it if absent.
set -euo pipefail

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
  exit 0
fi

echo "Java 17+ not found; installing a headless JRE..." >&2
# shellcheck source=scripts/as-root.sh
. "$(dirname "$0")/as-root.sh"
if command -v apt-get >/dev/null 2>&1; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
elif command -v dnf >/dev/null 2>&1; then
  as_root dnf install -y -q java-17-openjdk-headless
elif command -v brew >/dev/null 2>&1; then
  brew install openjdk@17
else
  echo "error: no supported package manager found; install Java 17+ and retry." >&2
  exit 1
fi
java -version
