# Tidal: `make run` starts everything embedded (SQLite, in-process worker, simulated cluster); `make test` runs the suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
-include .env
export

# Settings for local use; a real deployment sets its own (see .env.example).
DEV_ENV := DEBUG=$${DEBUG:-1}
TEST_ENV := SECRET_KEY=$${SECRET_KEY:-test-only-secret-key-0123456789abcdef0123456789} DEBUG=0 \
	DATABASE_CONN_MAX_AGE=$${DATABASE_CONN_MAX_AGE:-0}

.PHONY: install run test lint bench soak migrate seed clean

$(VENV)/.installed: requirements.txt sdk/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e sdk
	touch $@

node_modules/.installed: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

install: $(VENV)/.installed node_modules/.installed

migrate: install
	$(DEV_ENV) $(PY) manage.py migrate --noinput

seed: migrate
	$(DEV_ENV) $(PY) manage.py seed_demo

run: seed
	$(DEV_ENV) $(PY) manage.py run_embedded --port $(PORT)

test: install
	$(TEST_ENV) $(PY) -m pytest --durations=25 $(PYTEST_ARGS)

lint: install
	$(PY) -m ruff check .
	$(PY) -m mypy

bench: install
	@for script in bench/bench_*.py; do echo "== $$script"; $(TEST_ENV) $(PY) $$script || exit 1; done

# The production-like stack under the load test's mix for 10 minutes (SOAK_SECONDS); `make bench` runs it for 60 s.
soak: install
	$(TEST_ENV) $(PY) bench/bench_load.py --seconds $${SOAK_SECONDS:-600}

clean:
	rm -rf $(VENV) node_modules var staticfiles
