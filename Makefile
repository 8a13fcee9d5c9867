# The two commands: `make demo` and `make test`. Both build .venv themselves.
# `make test-fast` is the inner loop: the suite without Ray, browsers, the rate tests and the tests
# measured slow (tests/slow_tests.txt).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test test-fast slow-tests lint bench clean

# uv (from the package index, into the venv) installs the packages: the set-up took about 140 s
# with pip, 30 s with uv from an empty cache, seconds from its cache (docs/performance.md).
UV := $(VENV)/bin/uv pip install -q --python $(PY)

$(VENV)/.base: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -x $(VENV)/bin/uv || $(PY) -m pip install -q uv
	$(UV) -e .
	touch $@

$(VENV)/.dev: $(VENV)/.base $(VENV)/.s3rver
	$(UV) -e '.[dev]'
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

# The suite runs on PYTEST_WORKERS pytest-xdist workers (most of its time is waiting on Ray,
# servers and subprocesses, so more workers than cores), the tests that share an expensive
# fixture grouped on one worker (tests/conftest.py); then the `serial` tests, which count a rate
# at a server against the wall clock, alone. Exit 5 (nothing selected, e.g. by PYTEST_ARGS) is
# not a failure of either part; any other failure fails `make test` after both parts ran.
PYTEST_WORKERS ?= 4
PARALLEL := -n $(PYTEST_WORKERS) --dist loadgroup
# Bytecode caches are written even where the environment turns them off: without them every
# worker rewrites the test modules and every CLI, server and Ray process compiles itemeval again.
test test-fast slow-tests: export PYTHONDONTWRITEBYTECODE :=

test: $(VENV)/.dev
	$(PY) -m ruff check itemeval tests benchmarks jobs
	$(PY) -m mypy itemeval
	@status=0; \
	$(PY) -m pytest $(PARALLEL) -m "not serial" --durations=25 $(PYTEST_ARGS) || { code=$$?; [ $$code -eq 5 ] || status=$$code; }; \
	$(PY) -m pytest -m serial --durations=10 $(PYTEST_ARGS) || { code=$$?; [ $$code -eq 5 ] || status=$$code; }; \
	exit $$status

test-fast: $(VENV)/.dev
	$(PY) -m pytest $(PARALLEL) -m "not ray and not browser and not serial and not slow" $(PYTEST_ARGS)

# Remeasures which tests are `slow` (a second of CPU or more, or 20 s of wall: tests/slow_tests.txt,
# which `make test-fast` leaves out) from a parallel run of the suite.
slow-tests: $(VENV)/.dev
	mkdir -p .pytest_cache && rm -f .pytest_cache/cpu-times.jsonl
	-$(PY) -m pytest $(PARALLEL) -m "not serial" -q --cpu-times .pytest_cache/cpu-times.jsonl $(PYTEST_ARGS)
	$(PY) tests/slow_tests.py .pytest_cache/cpu-times.jsonl

lint: $(VENV)/.dev
	$(PY) -m ruff check itemeval tests benchmarks jobs
	$(PY) -m mypy itemeval
	$(PY) -m ruff format --check itemeval tests benchmarks jobs

bench: $(VENV)/.dev
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache studies .demo
