# The two commands: `make demo` and `make test`. Both build .venv themselves.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test lint bench clean

$(VENV)/.base: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.dev: $(VENV)/.base $(VENV)/.s3rver
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# s3rver (npm): an S3 server that ignores If-None-Match; the store tests check that itemeval
# refuses it. Optional: without npm (or the registry) those tests skip and say how to get it.
S3RVER_VERSION := 3.7.1
$(VENV)/.s3rver: $(VENV)/.base
	if command -v npm >/dev/null; then \
	  npm install --silent --no-audit --no-fund --prefix $(VENV)/node s3rver@$(S3RVER_VERSION) \
	  || echo "s3rver could not be installed: its tests will skip"; \
	else echo "npm not found: the s3rver tests will skip"; fi
	touch $@

demo: $(VENV)/.base
	$(PY) -m itemeval demo

test: $(VENV)/.dev
	$(PY) -m ruff check itemeval tests benchmarks jobs
	$(PY) -m mypy itemeval
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.dev
	$(PY) -m ruff check itemeval tests benchmarks jobs
	$(PY) -m mypy itemeval
	$(PY) -m ruff format --check itemeval tests benchmarks jobs

bench: $(VENV)/.dev
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache studies .demo
