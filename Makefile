# Every target sets itself up: a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check lint typecheck imports unit install bytecode bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	# kopf's dev extras, for its admission example's self-signed webhook certificate: the
	# released oscrypto cannot read OpenSSL 3.0.10+ version strings, so a build of the same
	# module with the fix takes its place (hence no dependencies resolved here). Without them
	# the kopf admission tests skip, saying so; nothing else needs them
	$(BIN)/python -m pip install -q --no-deps asn1crypto==1.5.1 certbuilder==0.14.2 \
		certvalidator==0.11.1 elements-oscrypto==1.4.0b1 \
		|| echo "kopf's certificate tools were not installed: its admission example will skip"
	touch $(STAMP)

install: $(STAMP)

# The sources byte-compiled, as installing a package does: every setpoint process (a server,
# its controllers and agent, an operator, the many the tests start) then loads them instead
# of compiling them again, which costs each about half a second of CPU where
# PYTHONDONTWRITEBYTECODE is set. Up-to-date files are skipped, so this is cheap to repeat.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q src examples

## run: serve the control plane on SQLite (data and kubeconfig in .setpoint/)
run: bytecode
	$(BIN)/setpoint serve --data-dir .setpoint --storage sqlite

# The suite waits on servers far more than it computes: one more worker than CPUs. Each test
# file stays on one worker (its module fixtures are started once); tests that share
# machine-wide state pick ranges of their own (see tests/conftest.py).
PYTEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(len(os.sched_getaffinity(0)) + 1)')

## test: lint, type-check, import contracts, then the whole test suite (the e2e tests last)
test: check bytecode
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)
	$(BIN)/python -m pytest -q -m e2e $(PYTEST_ARGS)

check: lint typecheck imports

lint: $(STAMP)
	$(BIN)/ruff check $(wildcard src tests benchmarks examples)

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python benchmarks/api.py

clean:
	rm -rf $(VENV) .setpoint .pytest_cache .mypy_cache .ruff_cache
