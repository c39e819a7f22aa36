# ToolOps — `make demo` runs the whole product on one machine; `make test` runs every test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test chaos scale services lint format run migrations-check bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# `make demo PORT=8001`: the web server's port (default 8000); the demo shop's is
# PORT + 1000 unless SHOP_PORT is given. A busy port is refused before anything starts;
# the command applies the migrations itself.
PORT ?= 8000
demo: $(STAMP)
	$(PY) manage.py demo --port $(PORT)$(if $(SHOP_PORT), --shop-port $(SHOP_PORT))

run: $(STAMP)
	$(PY) manage.py migrate --noinput -v0
	$(VENV)/bin/uvicorn toolops.asgi:application --host 127.0.0.1 --port 8000 --no-proxy-headers \
		--timeout-graceful-shutdown 30

# The whole set-up on a fresh machine: `.ci/services` installs what is missing and
# starts PostgreSQL and Redis unless they already answer at DATABASE_URL and
# TOOLOPS_TEST_REDIS_URL (then they are used as they are); then ruff and pytest.
# The tests run in TEST_WORKERS processes (pytest-xdist), a test file to one worker; each
# worker has its own test database (test_toolops_gw0, …) and Redis database (the one
# given, the next, …: tests/redisdb.py).
TEST_WORKERS ?= 2
test: export DATABASE_URL ?= postgres:///toolops
test: export TOOLOPS_TEST_REDIS_URL ?= redis://127.0.0.1:6379/13
test: services $(STAMP)
	$(MAKE) lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

# A chaos run (docs/reliability.md): the whole stack on this machine under random faults
# for SECONDS, then the invariants checked; SEED replays a run (random when not given,
# and printed). `make chaos SECONDS=600 SEED=42`. Exit status 1 on a violation.
SECONDS ?= 120
chaos: export DATABASE_URL ?= postgres:///toolops
chaos: services $(STAMP)
	$(PY) -m tests.chaos --seconds $(SECONDS)$(if $(SEED), --seed $(SEED))

# The production topology on this machine (docs/scale.md): HAProxy in front of 3 web
# processes, 3 workers and beat on Redis, PostgreSQL behind pgbouncer, under a mixed load
# for SECONDS; prints calls/s, p50/p99 per kind, memory per process and the invariants.
# Exit status 1 on a violation. `make scale SECONDS=60`.
scale: export DATABASE_URL ?= postgres:///toolops
scale: services $(STAMP)
	$(PY) -m tests.scale --seconds $(SECONDS)$(if $(SEED), --seed $(SEED))

# Serially: the services (python3-venv among them) before the virtualenv.
.NOTPARALLEL: test chaos scale

services:
	PYTHON=$(PYTHON) .ci/services

# ruff, the import contract (pyproject.toml [tool.importlinter], docs/architecture.md),
# and the type checker on the product code ([tool.mypy]; incremental: its cache is in
# .mypy_cache).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

migrations-check: $(STAMP)
	$(PY) manage.py makemigrations --check --dry-run

bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) bench/run.py
	$(PY) bench/traces.py
	$(PY) bench/policy.py
	$(PY) bench/flat.py
	$(PY) bench/attack.py
	$(PY) bench/scale.py

clean:
	rm -rf $(VENV) var
