# The two commands a newcomer needs: `make demo` and `make test`.
# Both set up what they need first and are quick the second time (the Python install re-runs
# only when setup.cfg or pyproject.toml change): the demo needs the virtual environment and
# Java; the tests need those plus Chromium (browser tests) and PostgreSQL (job store tests).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup runtime java chromium postgresql flink-tools spark-cds demo demo-pipeline test test-fast test-docker docker-image simulate lint format config-docs bench docker-smoke clean

# What running the runtime needs: the demo waits for this only.
runtime: $(STAMP) java

# Everything, tests included.
setup: runtime chromium postgresql

$(STAMP): setup.cfg pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/uv pip install --python $(BIN)/python --quiet -e ".[dev,airflow]"
	@touch $@

java:
	@scripts/ensure-java.sh

# Headless Chromium and chromedriver for the dashboard's browser tests (tests/browser/).
chromium:
	@scripts/ensure-chromium.sh

# PostgreSQL's server binaries for the job store's PostgreSQL tests and the standby
# JobManager test (tests/helpers/postgres.py starts a private server from them).
postgresql:
	@scripts/ensure-postgresql.sh

demo: runtime
	$(BIN)/python -m flink_runtime.airflow.demo

demo-pipeline: runtime
	$(BIN)/python -m flink_runtime.demo

# Flink's own CLI (the apache-flink wheel) for tests/integration/test_flink_cli.py: installed
# once into ~/.cache/flink-runtime, instant once its stamp exists. Done here so a cold
# download does not count against a test's time limit; a failed install does not stop
# the run (the leading -): that module then tries again and fails with the reason.
flink-tools: setup
	-@$(BIN)/python tests/flink_tools.py

# A class-data-sharing archive of Spark's classes (tests/spark_cds.py): the suite's JVMs
# start about a third faster with it. Made once per machine, then instant; without it
# (the leading -) the tests still run, only slower.
spark-cds: setup
	-@$(BIN)/python -m tests.spark_cds

# Over TEST_WORKERS pytest-xdist workers (most tests wait on processes they start, so 2
# workers on 2 cores): by module or xdist_group (tests/helpers/xdist_scheduling.py).
# TEST_WORKERS=0 runs it serially.
TEST_WORKERS ?= 2

test: setup flink-tools spark-cds
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not docker"

test-fast: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not integration and not docker"

# The tests that need a Docker engine and the project's image (the docker resource
# manager driver, tests/integration/test_active_resource_manager_docker.py), from nothing:
# docker-image installs and starts dockerd if needed and builds the runtime image from
# this checkout (every time: the build cache makes that seconds unless the code changed,
# so the TaskManager containers always run this code); then the `docker` extra's
# requirements (not the project again: its install stays as it is) and the tests.
# dockerd is left running, as a service. Not part of `make test` (a cold image build
# takes minutes); `make docker-smoke` is the compose stack's own check.
test-docker: runtime docker-image
	$(BIN)/uv pip install --python $(BIN)/python --quiet -r setup.cfg --extra docker
	$(BIN)/python -m pytest -m docker -p no:cacheprovider

docker-image:
	scripts/docker-build.sh runtime

# The control plane on a simulated clock and network (tests/simulation/): SCHEDULES seeded
# fault schedules from seed START (default 10000 from 0) over 2 processes, or with SEED=n
# that one schedule's replay, every step printed.
simulate: runtime
	$(BIN)/python -m tests.simulation $(if $(SEED),--seed $(SEED) --trace,--schedules $(or $(SCHEDULES),10000) --start $(or $(START),0) --workers 2)

lint: setup
	$(BIN)/ruff check flink_runtime tests benchmarks dags plugins
	$(BIN)/ruff format --check flink_runtime tests benchmarks dags plugins

format: setup
	$(BIN)/ruff format flink_runtime tests benchmarks dags plugins
	$(BIN)/ruff check --fix flink_runtime tests benchmarks dags plugins

# docs/configuration.md from the options declared in flink_runtime/configuration/
# (tests/unit/test_configuration_docs.py fails while the committed file is stale).
config-docs:
	$(BIN)/python -m flink_runtime.configuration.docs > docs/configuration.md.tmp
	mv docs/configuration.md.tmp docs/configuration.md

bench: setup
	$(BIN)/python benchmarks/bench_executiongraph.py
	$(BIN)/python benchmarks/bench_deployment.py
	$(BIN)/python benchmarks/bench_state_backend.py
	$(BIN)/python benchmarks/bench_failover.py
	$(BIN)/python benchmarks/bench_rpc_churn.py
	$(BIN)/python benchmarks/bench_airflow_sensor.py
	$(BIN)/python benchmarks/bench_spark.py

# The compose stack for real: Docker engine (installed and started if missing), images
# (from a local debootstrap base where no registry is reachable), JobManager, two
# TaskManagers and Airflow up and healthy, the demo word count through them, then down.
# Minutes, not seconds: not part of `make test`.
docker-smoke:
	scripts/docker-smoke.sh

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
