#!/usr/bin/env bash
# Make sure a Java 17+ JDK is on the PATH, install it if absent: PySpark needs its runtime,
# and the tests rebuild flink_runtime/spark/hadoop's jar with its javac
# (tests/integration/test_local_filesystem.py).
set -euo pipefail

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null && command -v javac >/dev/null 2>&1; then
  exit 0
fi

echo "Java 17+ with javac not found; installing a headless JDK..." >&2
# shellcheck source=scripts/as-root.sh
. "$(dirname "$0")/as-root.sh"
if command -v apt-get >/dev/null 2>&1; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
elif command -v dnf >/dev/null 2>&1; then
  as_root dnf install -y -q java-17-openjdk-devel
elif command -v brew >/dev/null 2>&1; then
  brew install openjdk@17
else
  echo "error: no supported package manager found; install Java 17+ and retry." >&2
  exit 1
fi
java -version
