#!/usr/bin/env bash
# Make sure a Docker engine answers and the tools `make docker-smoke` uses are there:
# Debian's docker.io (dockerd, containerd, a docker CLI), docker-compose (1.29) unless
# `docker compose` (v2) works, and debootstrap (scripts/docker-base-image.sh). Installs
# what is missing, then starts dockerd in the background if none answers, logging to
# $DOCKERD_LOG (default /var/log/flink-runtime-dockerd.log). Quick when all is there.
#
# dockerd's defaults work on these machines (overlay2, the docker0 bridge with NAT, so
# builds reach PyPI); DOCKERD_FLAGS adds flags where a sandbox needs others, e.g.
# "--storage-driver=vfs" or "--iptables=false --bridge=none" (then build with host networking).
set -euo pipefail

# shellcheck source=scripts/as-root.sh
. "$(dirname "$0")/as-root.sh"

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v docker >/dev/null 2>&1 || missing+=(docker.io)
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
  missing+=(docker-compose)
fi
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: ${missing[*]} missing and no apt-get to install them; install a Docker engine, docker compose and debootstrap" >&2
    exit 1
  fi
  echo "installing Debian's ${missing[*]}..." >&2
  as_root apt-get update -qq
  # shellcheck disable=SC2046
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi

if docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "error: no Docker engine answers and there is no dockerd to start" >&2
  exit 1
fi
log=${DOCKERD_LOG:-/var/log/flink-runtime-dockerd.log}
echo "starting dockerd in the background (log: $log)" >&2
# setsid --fork: the engine outlives this script and the make that ran it, as a service
# would, in a session of its own, and no shell stays behind waiting for it.
# shellcheck disable=SC2086
as_root setsid --fork nohup dockerd ${DOCKERD_FLAGS:-} >>"$log" 2>&1 </dev/null
for _ in $(seq 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "error: dockerd did not answer within 60 s; the last lines of $log:" >&2
tail -n 20 "$log" >&2
exit 1
