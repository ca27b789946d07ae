# Two commands from a fresh clone: `make run` and `make test`. Both bootstrap first (Debian
# packages, .venv, Spark jars), skipping whatever is already in place.
SHELL := /bin/bash
VENV := .venv
RUFF := $(VENV)/bin/ruff
ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help bootstrap run test lint format

help: ## Show the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo '  make test ARGS="-k views"   passes ARGS to pytest (SQLite only)'

bootstrap: ## Install Debian packages, the virtualenv and the Spark jars (idempotent)
	bash scripts/bootstrap.sh

run: ## Run the app, a Celery worker, celery-beat and Redis on http://127.0.0.1:8000
	bash scripts/run.sh

# ARGS reaches the script through the environment, where the script reads it with shell
# quoting intact: make test ARGS='-k "views and not browser"'.
test: export ARGS := $(ARGS)
test: ## Lint, the suite on SQLite, the integration tests on PostgreSQL
	bash scripts/test.sh

lint: bootstrap ## ruff check, ruff format --check, the module index (docs/modules.md) is current
	$(RUFF) check .
	$(RUFF) format --check .
	$(VENV)/bin/python scripts/module_index.py --check

format: bootstrap ## ruff format, then ruff check --fix
	$(RUFF) format .
	$(RUFF) check --fix .
