# pplxweb: the two commands are `make run` and `make test`. The rest are for development.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test quick lint format bench clean-venv

## Set up (only what changed) and serve pplxweb on PPLXWEB_BIND.
run: $(RUN_STAMP)
	$(PY) manage.py serve

## Install what the tests need, start PostgreSQL and Redis, run every test on both set-ups.
test: $(DEV_STAMP)
	bash tests/run.sh $(ARGS)

## The inner loop: every test but the browser ones, on SQLite only (ARGS as for test).
quick: $(DEV_STAMP)
	PPLXWEB_TEST_SETUPS=sqlite PPLXWEB_TEST_MARKERS="not browser" bash tests/run.sh $(ARGS)

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(DEV_STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: $(DEV_STAMP)
	$(PY) -m tests.benchmarks.stream
	$(PY) -m tests.benchmarks.live
	$(PY) -m tests.benchmarks.e2e --one-core

$(VENV)/bin/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "pplxweb needs Python 3.11 or newer (PYTHON=$(PYTHON))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip

# Reinstalled only when pyproject.toml changes.
$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check .
	@rm -rf build *.egg-info
	@touch $@

$(DEV_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check '.[dev]'
	@rm -rf build *.egg-info
	@touch $@ $(RUN_STAMP)

clean-venv:
	rm -rf $(VENV)
