# Tidal: `make run` starts everything embedded (SQLite, in-process worker, simulated cluster); `make test` runs the suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

# A `.env` file (see .env.example) fills in the variables the environment leaves unset, so `PORT=8010 make run`
# wins over it. The recipes' shell reads it, not make: a makefile's assignments would override the environment.
DOTENV := if [ -f .env ]; then while IFS= read -r line || [ -n "$$line" ]; do name=$${line%%=*}; \
	if [[ $$line == *=* && $$name =~ ^[A-Za-z_][A-Za-z0-9_]*$$ && -z $${!name+set} ]]; then export "$$line"; fi; \
	done < .env; fi;

# Settings for local use; a real deployment sets its own (see .env.example).
DEV_ENV := $(DOTENV) DEBUG=$${DEBUG:-1}
TEST_ENV := $(DOTENV) SECRET_KEY=$${SECRET_KEY:-test-only-secret-key-0123456789abcdef0123456789} DEBUG=0 \
	DATABASE_CONN_MAX_AGE=$${DATABASE_CONN_MAX_AGE:-0}

.PHONY: install run test fuzz lint bench chaos soak migrate seed clean

$(VENV)/.installed: requirements.txt requirements-build.txt requirements-dev.txt sdk/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e sdk
	touch $@

node_modules/.installed: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

# The scheduler core compiled to C with mypyc (scripts/compile_core.py), again whenever one of its sources changed.
# Without a C compiler the core runs interpreted, about half as fast, and says so here.
CORE_SOURCES := $(shell find jobs/scheduling -name '*.py')
.build/core/SOURCES_HASH: $(VENV)/.installed scripts/compile_core.py $(CORE_SOURCES)
	$(PY) scripts/compile_core.py || echo "!! the scheduler core could not be compiled: it runs interpreted"

install: $(VENV)/.installed node_modules/.installed .build/core/SOURCES_HASH

migrate: install
	$(DEV_ENV) $(PY) manage.py migrate --noinput

seed: migrate
	$(DEV_ENV) $(PY) manage.py seed_demo

run: seed
	$(DEV_ENV) $(PY) manage.py run_embedded --port $${PORT:-8000}

# Two workers (pytest-xdist): each gets its own test database and Redis database (tests/settings.py).
# TIDAL_TEST_WORKERS=0 runs the suite in one process.
test: install
	$(TEST_ENV) $(PY) -m pytest -n $${TIDAL_TEST_WORKERS:-2} --durations=25 $(PYTEST_ARGS)

# The API fuzz test (tests/fuzz/) with more examples per operation and role than `make test` runs (5), new ones
# each run (TIDAL_FUZZ_EXPLORE; `make test` sends the same every run), and schemathesis' coverage cases
# (boundaries, missing and mistyped fields): about 10 minutes. Then the scheduler's property tests on new random
# examples (`make test` tries the same 300 every run), 2,000 each by default.
fuzz: install
	$(TEST_ENV) TIDAL_FUZZ_EXAMPLES=$${TIDAL_FUZZ_EXAMPLES:-100} TIDAL_FUZZ_COVERAGE=$${TIDAL_FUZZ_COVERAGE:-1} \
		TIDAL_FUZZ_EXPLORE=$${TIDAL_FUZZ_EXPLORE:-1} \
		$(PY) -m pytest tests/fuzz -p no:cacheprovider $(PYTEST_ARGS)
	$(TEST_ENV) TIDAL_PROPERTY_EXPLORE=1 TIDAL_PROPERTY_EXAMPLES=$${TIDAL_PROPERTY_EXAMPLES:-2000} \
		$(PY) -m pytest tests/scheduling/test_properties.py -p no:cacheprovider $(PYTEST_ARGS)

lint: install
	$(PY) -m ruff check .
	$(PY) -m mypy

bench: install
	@for script in bench/bench_*.py; do echo "== $$script"; $(TEST_ENV) $(PY) $$script || exit 1; done

# Fault injection against the whole stack on a PostgreSQL and Redis of its own (docs/reliability.md#faults);
# FAULTS="leader redis" runs only those.
chaos: install
	scripts/chaos.sh $(FAULTS)

# The production-like stack under the load test's mix for 10 minutes (SOAK_SECONDS); `make bench` runs it for 60 s.
soak: install
	$(TEST_ENV) $(PY) bench/bench_load.py --seconds $${SOAK_SECONDS:-600}

clean:
	rm -rf $(VENV) node_modules var staticfiles .build
