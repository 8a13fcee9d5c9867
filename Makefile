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

$(VENV)/.dev: $(VENV)/.base
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.base
	$(PY) -m itemeval demo

test: $(VENV)/.dev
	$(PY) -m ruff check itemeval tests benchmarks jobs
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.dev
	$(PY) -m ruff check itemeval tests benchmarks jobs
	$(PY) -m ruff format --check itemeval tests benchmarks jobs

bench: $(VENV)/.dev
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache studies .demo
