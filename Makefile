# cronhooks — developer entry points. `make up` runs everything locally; `make test` tests it.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: install up test test-unit test-faults lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

# A random CRONHOOKS_SECRET_KEY on first use; loopback agents allowed for local work.
.env:
	@umask 077 && $(PYTHON) -c 'import secrets; print("# written by make on first use; keep it secret\nCRONHOOKS_SECRET_KEY=" + secrets.token_hex(32) + "\n# the demo agent listens on loopback\nCRONHOOKS_ALLOW_PRIVATE_TARGETS=true\n# docker compose: the RabbitMQ password of its broker\nBROKER_PASSWORD=" + secrets.token_urlsafe(24))' > $@
	@chmod 600 $@
	@echo "wrote .env with a new CRONHOOKS_SECRET_KEY (mode 0600)"

up: install .env
	$(BIN)/cronhooks up --demo-agent --print-token

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

test: lint
	rm -f test-artifacts/fault-table.md
	$(BIN)/pytest -q

test-unit: install
	$(BIN)/pytest -q tests/unit

# kill -9 each service, restart RabbitMQ and Postgres, 3 schedulers — during a herd
# (also part of `make test`); the table lands in test-artifacts/fault-table.md
test-faults: install
	rm -f test-artifacts/fault-table.md
	$(BIN)/pytest -q -s tests/faults

# Benchmarks: measure and print (results also go to bench/results/); never part of `make test`.
bench: install
	$(BIN)/python -m bench


clean:
	rm -rf $(VENV) test-artifacts .pytest_cache .mypy_cache .ruff_cache
