# ToolOps — `make demo` runs the whole product on one machine; `make test` runs every test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint format run migrations-check bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py demo

run: $(STAMP)
	$(PY) manage.py migrate --noinput -v0
	$(VENV)/bin/uvicorn toolops.asgi:application --host 127.0.0.1 --port 8000 --no-proxy-headers

# The tests run on PostgreSQL (`.ci/postgres` starts a local one).
test: $(STAMP)
	$(VENV)/bin/ruff check .
	DATABASE_URL=$${DATABASE_URL:-postgres:///toolops} $(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

migrations-check: $(STAMP)
	$(PY) manage.py makemigrations --check --dry-run

bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) bench/run.py
	$(PY) bench/traces.py
	$(PY) bench/flat.py
	$(PY) bench/attack.py

clean:
	rm -rf $(VENV) var
