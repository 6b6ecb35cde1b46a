#!/usr/bin/env bash
# Print the base image docker/Dockerfile should build FROM (its build ARG BASE_IMAGE).
#
#   scripts/docker-base-image.sh [IMAGE]          # IMAGE defaults to python:3.11-slim-bookworm
#
# If IMAGE is already local, or can be pulled, that is the answer. Where no image
# registry is reachable (only Debian's package mirrors), a stand-in is made from Debian's
# own packages: `debootstrap bookworm` with Python 3.11 (python3, python3-venv: the same
# Python the official image has, in /usr/bin instead of /usr/local/bin), then `docker
# import`, tagged flink-runtime-base:python3.11-bookworm. Java is not in it: the runtime
# stage installs the JRE as it does on the official image, and the Airflow stage needs none.
#
# The root file system is cached as a tarball (FLINK_RUNTIME_CACHE, default
# ~/.cache/flink-runtime/docker), so the import takes seconds the next time; delete it
# to pick up Debian's updates (or the host's certificate authorities: the stand-in trusts
# those of /usr/local/share/ca-certificates, as the host does). Progress goes to stderr, the image name alone to stdout.
set -euo pipefail

image=${1:-python:3.11-slim-bookworm}
local_image=flink-runtime-base:python3.11-bookworm
cache=${FLINK_RUNTIME_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flink-runtime}/docker
tarball=$cache/debootstrap-bookworm-python3.11.tar

log() { echo "docker-base-image: $*" >&2; }

if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi
# A registry that cannot be resolved fails at once; one that drops packets would hang.
if timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
  log "pulled $image"
  echo "$image"
  exit 0
fi
log "$image cannot be pulled (no image registry reachable): using $local_image, made from Debian's packages"
if docker image inspect "$local_image" >/dev/null 2>&1; then
  echo "$local_image"
  exit 0
fi

# The mirror this host's apt uses (the same one debootstrap would pick by default
# where it is unset); DEBIAN_MIRROR overrides it.
host_mirror() {
  grep -hoE '^(URIs:|deb) +[^ ]+/debian/?( |$)' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    awk '{print $2; exit}' || true
}
mirror=${DEBIAN_MIRROR:-$(host_mirror)}
mirror=${mirror%/}

if [ ! -s "$tarball" ]; then
  command -v debootstrap >/dev/null || {
    log "error: debootstrap is not installed (apt-get install debootstrap; scripts/ensure-docker.sh does it)"
    exit 1
  }
  mkdir -p "$cache"
  rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  log "debootstrap bookworm into $rootfs (a few minutes; cached in $tarball afterwards)"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$rootfs" ${mirror:+"$mirror"} >"$cache/debootstrap.log" 2>&1 || {
    log "error: debootstrap failed; the last lines of $cache/debootstrap.log:"
    tail -n 20 "$cache/debootstrap.log" >&2
    exit 1
  }
  # The official image's apt sources: the release, its updates and its security fixes.
  if [ -n "$mirror" ]; then
    {
      echo "deb $mirror bookworm main"
      echo "deb $mirror bookworm-updates main"
      echo "deb ${mirror}-security bookworm-security main"
    } >"$rootfs/etc/apt/sources.list"
  fi
  # Certificate authorities this host added (a proxy that inspects TLS, a company CA):
  # without them pip inside the image cannot reach PyPI where the host can.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
  fi
  # As Debian's docker images: no package lists, no caches, no docs, no man pages.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
EOF
  tar -C "$rootfs" --numeric-owner -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
  rm -rf "$rootfs"
  trap - EXIT
fi

log "docker import $tarball as $local_image"
docker import \
  -c 'ENV LANG=C.UTF-8' \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'CMD ["python3"]' \
  -m "debootstrap bookworm (python3, python3-venv): a stand-in for $image" \
  "$tarball" "$local_image" >/dev/null
echo "$local_image"
