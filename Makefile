# cronhooks — developer entry points. `make up` runs everything locally; `make test` tests it.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

# .env is phony too: infra/write-env only adds what is missing.
.PHONY: install up down .env test test-unit test-faults test-deploy lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

# Secrets for `make up` and `docker compose`: random on first use; keys an older .env lacks
# are added (infra/write-env). Phony: it runs every time and changes nothing already there.
.env:
	@$(PYTHON) infra/write-env .env

# What `make up` started (servers, its `cronhooks up`), for `make down` to stop.
STARTED := .cronhooks-started
DEMO_AGENT_PORT ?= 8090

# Postgres and RabbitMQ: started, or installed with apt, or a one-line hint
# (infra/local-services). Then the services in the foreground, recorded by pid: `exec`
# keeps the shell's pid. Loopback targets allowed for the demo agent here only (not in
# .env, which docker compose reads too).
up: install .env
	@infra/local-services up --trust-user --record $(STARTED)
	@echo "cronhooks-up $$$$" >> $(STARTED); \
	  CRONHOOKS_ALLOW_PRIVATE_TARGETS=$${CRONHOOKS_ALLOW_PRIVATE_TARGETS:-true} \
	  exec $(BIN)/cronhooks up --demo-agent --demo-agent-port $(DEMO_AGENT_PORT) --print-token \
	    --log-file cronhooks-up.log

# Stops what `make up` started, and only that.
down:
	@infra/local-services down --record $(STARTED)

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

# Two workers (pytest-xdist): each test has its own database and vhost, so tests run side by
# side; a test mostly waits on its services, so two overlap well even on two cores. The fault
# suite's tests stay on one worker (they share its private servers: tests/conftest.py).
# TEST_WORKERS=0 runs them one by one in this process.
TEST_WORKERS ?= 2

test: lint
	rm -f test-artifacts/fault-table.md
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup

test-unit: install
	$(BIN)/pytest -q tests/unit

# The Kubernetes manifests in deploy/, offline: kubernetes-validate's bundled schemas, the
# vendored operator CRDs, and `kubectl kustomize` where kubectl is installed (also part of
# `make test`).
test-deploy: install
	$(BIN)/pytest -q -p no:xdist tests/unit/test_deploy_manifests.py

# kill -9 each service, restart (private) RabbitMQ and Postgres, 3 schedulers — during a herd
# (also part of `make test`); the table lands in test-artifacts/fault-table.md
test-faults: install
	rm -f test-artifacts/fault-table.md
	$(BIN)/pytest -q -s tests/faults

# Benchmarks: measure and print (results also go to bench/results/); never part of `make test`.
bench: install
	$(BIN)/python -m bench


clean:
	rm -rf $(VENV) test-artifacts .pytest_cache .mypy_cache .ruff_cache
