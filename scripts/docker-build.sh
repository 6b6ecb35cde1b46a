#!/usr/bin/env bash
# Build the project's images from this checkout, from nothing if need be:
#
#   scripts/docker-build.sh [runtime] [airflow]     # no argument: both
#
#  1. scripts/ensure-docker.sh: Docker engine, compose, debootstrap (installs, starts dockerd).
#  2. scripts/docker-base-image.sh: python:3.11-slim-bookworm, or a stand-in made with
#     debootstrap where no image registry is reachable (cached: seconds the second time).
#  3. `docker build` of each target of docker/Dockerfile (BuildKit where the CLI has it;
#     the classic builder otherwise): flink-runtime:0.1.0 (runtime: the JobManager and
#     TaskManagers, what the docker resource manager driver starts) and
#     flink-runtime-airflow:0.1.0 (airflow).
#
# Idempotent and quick when nothing changed: every layer comes from the build cache; after
# a change to flink_runtime/ only the project's wheel is built and installed again. So
# `make test-docker` runs it every time, and the image its TaskManager containers run is
# always this checkout's code. Prints one line per image with the seconds it took.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
docker_dir=$root/docker
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(runtime airflow)
for target in "${targets[@]}"; do
  case $target in
    runtime | airflow) ;;
    *)
      echo "error: unknown image target '$target': expected runtime or airflow" >&2
      exit 2
      ;;
  esac
done

"$root/scripts/ensure-docker.sh"
base_image=$("$root/scripts/docker-base-image.sh")

# The docker CLI's BuildKit: buildx if installed; Debian's docker.io CLI (20.10) has it
# built in; a newer CLI without buildx has only the classic builder, which also works.
if docker buildx version >/dev/null 2>&1; then
  build=(docker buildx build --load)
elif [ -x /usr/bin/docker ] && /usr/bin/docker version --format '{{.Client.Version}}' 2>/dev/null | grep -q '^20\.'; then
  build=(env DOCKER_BUILDKIT=1 /usr/bin/docker build)
else
  build=(docker build)
fi

for target in "${targets[@]}"; do
  image=flink-runtime:0.1.0
  [ "$target" = runtime ] || image=flink-runtime-$target:0.1.0
  started=$(date +%s.%N)
  "${build[@]}" --build-arg "BASE_IMAGE=$base_image" \
    -f "$docker_dir/Dockerfile" --target "$target" -t "$image" "$root" >&2
  awk -v a="$started" -v b="$(date +%s.%N)" -v i="$image" -v base="$base_image" \
    'BEGIN { printf "built %s (FROM %s) in %.0f s\n", i, base, b - a }' >&2
done
