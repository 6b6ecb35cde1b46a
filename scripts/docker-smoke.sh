#!/usr/bin/env bash
# `make docker-smoke`: build the images, start the compose stack, run the demo word count
# through it, check the exact result, stop it. Too slow for `make test` (a cold build
# downloads and builds PySpark); its measured times are in docs/docker.md.
#
#  1. scripts/ensure-docker.sh: Docker engine, compose, debootstrap (installs, starts dockerd).
#  2. scripts/docker-base-image.sh: python:3.11-slim-bookworm, or where no image registry
#     is reachable a stand-in made with debootstrap (cached: seconds the second time).
#  3. docker/.env with a random FLINK_REST_TOKEN and FLINK_CLUSTER_SECRET if there is none.
#  4. Builds both images: scripts/docker-build.sh (BuildKit where the CLI has it).
#  5. `compose up -d` as project flink-runtime-smoke on free host ports, waits until every
#     service's healthcheck passes, checks the Airflow image has no PySpark, pyarrow or
#     Java and that its connection reaches the JobManager.
#  6. docker/smoke_job.py in the JobManager's container: the word count, exact counts.
#  7. `compose down -v` (also on failure, after printing the failing service's log).
#
# Uses `docker compose` (v2) if it works, else docker-compose (1.29). Prints the times
# and the image sizes at the end. Exit 0 only if everything passed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
docker_dir=$root/docker
project=flink-runtime-smoke
runtime_image=flink-runtime:0.1.0
airflow_image=flink-runtime-airflow:0.1.0
healthy_timeout=${SMOKE_HEALTHY_TIMEOUT:-600}

say() { printf '\n== %s\n' "$*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
declare -A took=()

say "Docker engine and tools"
"$root/scripts/ensure-docker.sh"
if docker compose version >/dev/null 2>&1; then
  compose_cmd=(docker compose)
else
  compose_cmd=(docker-compose)
fi
echo "compose: $("${compose_cmd[@]}" version 2>/dev/null | head -n 1)" >&2

say "Base image"
started=$(now)
base_image=$("$root/scripts/docker-base-image.sh")
took[base]=$(elapsed "$started")
echo "BASE_IMAGE=$base_image" >&2

# -- secrets: docker/.env (not in git), made once with random values -------------------------------
env_file=$docker_dir/.env
if [ ! -f "$env_file" ]; then
  umask 077
  {
    echo "# Written by scripts/docker-smoke.sh: this machine's secrets for docker-compose.yaml."
    echo "FLINK_REST_TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(24))')"
    echo "FLINK_CLUSTER_SECRET=$(python3 -c 'import secrets; print(secrets.token_hex(24))')"
    [ "$base_image" = "python:3.11-slim-bookworm" ] || echo "BASE_IMAGE=$base_image"
  } >"$env_file"
  umask 022
  echo "wrote $env_file (random FLINK_REST_TOKEN and FLINK_CLUSTER_SECRET)" >&2
fi
for key in FLINK_REST_TOKEN FLINK_CLUSTER_SECRET; do
  grep -q "^$key=." "$env_file" || {
    echo "error: $env_file has no $key=...; add one (letters and digits) or delete the file to get a new one" >&2
    exit 1
  }
done

# -- build (scripts/docker-build.sh: the build cache makes a rebuild seconds) -------------------------
say "Build the images"
started=$(now)
"$root/scripts/docker-build.sh" runtime
took[build_runtime]=$(elapsed "$started")
started=$(now)
"$root/scripts/docker-build.sh" airflow
took[build_airflow]=$(elapsed "$started")

# -- the stack ---------------------------------------------------------------------------------------
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export BASE_IMAGE=$base_image FLINK_REST_PORT=${FLINK_REST_PORT:-$(free_port)} AIRFLOW_PORT=${AIRFLOW_PORT:-$(free_port)}
compose() { "${compose_cmd[@]}" -p "$project" -f "$docker_dir/docker-compose.yaml" --project-directory "$docker_dir" "$@"; }
services=(jobmanager taskmanager-1 taskmanager-2 airflow)

down() {
  say "compose down -v"
  compose down -v --remove-orphans >/dev/null 2>&1 || compose down -v >&2 || true
}
fail() {
  echo "error: $*" >&2
  for service in "${services[@]}"; do
    echo "--- the last lines of $service's log:" >&2
    compose logs --no-color --tail 30 "$service" >&2 2>&1 || true
  done
  trap - EXIT
  down
  exit 1
}
trap down EXIT

say "compose up -d (project $project; JobManager REST on 127.0.0.1:$FLINK_REST_PORT, Airflow on 127.0.0.1:$AIRFLOW_PORT)"
compose down -v --remove-orphans >/dev/null 2>&1 || true # a stack a killed run left behind
started=$(now)
compose up -d --no-build || fail "compose up failed"
health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$1" 2>/dev/null; }
declare -A healthy_after=()
deadline=$(($(date +%s) + healthy_timeout))
while [ ${#healthy_after[@]} -lt ${#services[@]} ]; do
  for service in "${services[@]}"; do
    [ -n "${healthy_after[$service]:-}" ] && continue
    container=$(compose ps -q "$service" 2>/dev/null || true)
    state=$([ -n "$container" ] && health "$container" || echo "not created")
    case $state in
      healthy) healthy_after[$service]=$(elapsed "$started") && echo "$service healthy after ${healthy_after[$service]} s" >&2 ;;
      unhealthy | exited | dead) fail "$service is $state: $(docker inspect -f '{{range .State.Health.Log}}{{.Output}}{{end}}' "$container" 2>/dev/null | tail -n 2)" ;;
    esac
  done
  if [ "$(date +%s)" -ge "$deadline" ]; then
    waiting=$(for service in "${services[@]}"; do [ -n "${healthy_after[$service]:-}" ] || printf '%s ' "$service"; done)
    fail "not healthy within $healthy_timeout s (SMOKE_HEALTHY_TIMEOUT): ${waiting% }"
  fi
  sleep 2
done
took[healthy]=$(elapsed "$started")

say "The Airflow image: no PySpark, pyarrow, pandas or Java; its connection reaches the JobManager"
airflow=$(compose ps -q airflow)
docker exec -i "$airflow" python - <<'EOF' || fail "the Airflow container's check failed"
import importlib.util
import shutil

from flink_runtime.airflow.hooks.flink_runtime import FlinkRuntimeHook

unwanted = [name for name in ("pyspark", "pyarrow", "pandas", "py4j") if importlib.util.find_spec(name)]
assert not unwanted, f"the Airflow image carries {unwanted}"
assert shutil.which("java") is None, "the Airflow image carries a Java runtime"
with FlinkRuntimeHook() as hook:
    overview = hook.get_conn().overview()
assert overview["taskmanagers"] == 2, overview
print(f"Airflow's flink_runtime_default connection: {overview['taskmanagers']} TaskManagers, {overview['slots-total']} slots")
EOF

say "The demo word count through the stack (docker/smoke_job.py in the JobManager's container)"
started=$(now)
docker exec -i "$(compose ps -q jobmanager)" python - <"$docker_dir/smoke_job.py" || fail "the word count failed"
took[job]=$(elapsed "$started")

trap - EXIT
down

size() { docker image inspect -f '{{.Size}}' "$1" | awk '{ printf "%.0f MB", $1 / 1e6 }'; }
say "Result: passed"
cat <<EOF
docker-smoke passed ($("${compose_cmd[@]}" version 2>/dev/null | head -n 1))
  base image ($base_image):   ${took[base]} s
  build $runtime_image:  ${took[build_runtime]} s
  build $airflow_image: ${took[build_airflow]} s
  up until all healthy:        ${took[healthy]} s   (jobmanager ${healthy_after[jobmanager]} s, taskmanagers ${healthy_after[taskmanager-1]} s / ${healthy_after[taskmanager-2]} s, airflow ${healthy_after[airflow]} s)
  word count job:              ${took[job]} s
  image sizes: $runtime_image $(size "$runtime_image"), $airflow_image $(size "$airflow_image"), $base_image $(size "$base_image")
EOF
