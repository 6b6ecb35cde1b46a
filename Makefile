# The two commands a newcomer needs: `make demo` and `make test`.
# Both set everything up first (virtual environment, Python packages, Java) and are
# quick the second time: the install re-runs only when setup.cfg or pyproject.toml change.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-fast lint format bench clean

setup: $(STAMP) java

$(STAMP): setup.cfg pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/uv pip install --python $(BIN)/python --quiet -e ".[dev,airflow]"
	@touch $@

java:
	@scripts/ensure-java.sh

demo: setup
	$(BIN)/python -m flink_runtime.demo

test: setup
	$(BIN)/python -m pytest

test-fast: setup
	$(BIN)/python -m pytest -m "not integration"

lint: setup
	$(BIN)/ruff check flink_runtime tests benchmarks
	$(BIN)/ruff format --check flink_runtime tests benchmarks

format: setup
	$(BIN)/ruff format flink_runtime tests benchmarks
	$(BIN)/ruff check --fix flink_runtime tests benchmarks

bench: setup
	$(BIN)/python benchmarks/bench_executiongraph.py
	$(BIN)/python benchmarks/bench_deployment.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
