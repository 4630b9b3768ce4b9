# The two commands of the README: `make run` (the nightly suite on the local backend, writing a report under
# reports/) and `make test` (the test suite). Both bootstrap first; `make setup` bootstraps alone.
# Every step is idempotent: a second run reuses the venv and the artifact cache and starts in seconds.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEPS   := $(VENV)/.deps-installed
PYTEST_ARGS ?=
RUN_ARGS ?=

.PHONY: setup setup-containers run test test-all package clean-venv

setup: $(DEPS)
	$(BIN)/chaos setup

$(DEPS): requirements.lock pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found " + sys.version.split()[0] + ")")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check --quiet --require-hashes -r requirements.lock
	$(BIN)/pip install --disable-pip-version-check --quiet --no-deps --no-build-isolation -e .
	touch $@

# The containers backend (docs/containers.md): a Docker engine (where none answers: Debian's docker.io and
# dockerd with overlay2, which needs root) and the component images, built locally from the pinned
# artifacts when missing or when their inputs changed (cold ≈ 70 s, cached < 1 s).
setup-containers: setup
	infra/engine.sh --install
	$(BIN)/python -m infra.images build

# The nightly runs on one lane: on two its verdicts did not hold on 2026-11-26, twice (7 of 33 arms failed or were
# UNKNOWN from restarts slowed by the other lane's arms; then, with restarting experiments never side by side, still
# 4 of 25 beside network and data arms: docs/lab-notes.md, "The nightly on two lanes, again" and "The nightly on a
# shared queue"). RUN_ARGS="--suite nightly --lanes 2" still runs it side by side.
run: setup
	$(BIN)/chaos run --backend local $(or $(RUN_ARGS),--suite nightly)

# Two pytest sessions (tests/run_parts.py): the tests whose checks are outcomes three files at a time (SHARED_WORKERS),
# then those with timing bounds (marked `alone`: the smoke, on two lanes as measured in docs/lab-notes.md "Lanes")
# with nothing beside them.
# PYTEST_ARGS go to both; `.venv/bin/python -m pytest` alone still runs everything in one session, one at a time.
# The tests marked `slow` (a path another test covers too) are left out; `make test-all` runs them as well.
test: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m tests.run_parts --deselect-slow $(PYTEST_ARGS)

test-all: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m tests.run_parts $(PYTEST_ARGS)

# The job for spark-submit: dist/job.zip (--py-files) and dist/job_main.py (docs/job.md).
package: $(DEPS)
	$(BIN)/python -m job.package --out dist

clean-venv:
	rm -rf $(VENV)
