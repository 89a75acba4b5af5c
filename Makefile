# The two set-up commands of the README. Both install what is missing (apt as root, else the
# exact `sudo apt-get install` line), create .venv and install requirements.txt when it changed.
#
#   make run    migrate, create the first admin once, then run Redis (if none answers),
#               the Celery worker and beat, and gunicorn on PANEL_BIND (Ctrl-C stops them)
#   make test   compilemessages, then the whole pytest suite in three sessions (pytest-xdist)
#               with, beside it, ruff check, ruff format --check, lint-imports (pyproject.toml's
#               import contracts), mypy (the annotations of panel/ and benchmarks/) and the i18n
#               check (scripts/i18n_check.py); PYTEST_ARGS passes more arguments to pytest
#   make test-pg  the same suite with its metadata database on a throwaway PostgreSQL
#               (scripts/test_pg.py), as a multi-node panel's shared DATABASE_URL; not in make test
#
#   make test-machine-loss  (not part of make test; root, about 6 min) tests/test_netns_machine_loss.py:
#               the cluster's own node lost in the namespace harness (frozen, link down) while
#               three writers commit; scripts/perf/failover.py --scenarios machine-loss measures it
#
#   make image-test   (not part of make test; root) build the container images and run the
#               stack of docker/compose.yaml with podman: a cluster, a benchmark, torn down after

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
export PYTHON

.PHONY: run test test-pg test-machine-loss lint messages i18n-check bootstrap-run bootstrap-test image-test

run: bootstrap-run messages
	$(VENV)/bin/python scripts/run.py

# Four test sessions side by side (pytest-xdist), a module's tests in one of them (their shared
# cluster is made once); PYTEST_WORKERS=0 runs everything in this process. Modules are handed out
# in collection order (conftest.py puts the slowest first), not xdist's default of most tests
# first, which left the one-test two-node modules for the end on one worker.
PYTEST_WORKERS ?= 4

# The lint steps (ruff, the contracts, mypy, the catalogue's check: about a minute) run beside the
# suite, which mostly waits; the output of both is shown, and either failing fails make test.
test: bootstrap-test messages
	@$(MAKE) --no-print-directory lint i18n-check > $(VENV)/lint.log 2>&1 & lint=$$!; \
	$(VENV)/bin/python -m pytest $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder) --ignore=$(MACHINE_LOSS) $(PYTEST_ARGS); \
	rc=$$?; wait $$lint; lint_rc=$$?; echo "==> lint, mypy and the i18n check:"; cat $(VENV)/lint.log; \
	if [ $$lint_rc -ne 0 ]; then echo "lint failed (exit $$lint_rc)"; exit 1; fi; exit $$rc

# Six minutes of one module (it waits out Patroni's 200 s before it learns the etcd members): the
# suite's budget keeps it out of make test, whose three-node journey is tests/test_netns_cluster.py.
MACHINE_LOSS := tests/test_netns_machine_loss.py

test-machine-loss: bootstrap-test messages
	$(VENV)/bin/python -m pytest -p no:cacheprovider $(MACHINE_LOSS) $(PYTEST_ARGS)

test-pg: bootstrap-test lint messages
	$(VENV)/bin/python scripts/test_pg.py $(PYTEST_ARGS)

# The German catalogue, compiled (locale/de/LC_MESSAGES/django.mo is built, not committed).
messages:
	$(VENV)/bin/python manage.py compilemessages --ignore .venv --ignore "static/*" -v 0

# Every marked string translated and none fuzzy; no unmarked text in a template (issue 18).
i18n-check:
	$(VENV)/bin/python scripts/i18n_check.py

# mypy's Django plugin loads the test settings, which make a data directory: one kept in var/
# (ignored by git) instead of a new one under /tmp at each run.
lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	PANEL_TEST_DATA_DIR=$(CURDIR)/var/mypy $(VENV)/bin/mypy panel benchmarks

bootstrap-run:
	bash scripts/bootstrap.sh run

bootstrap-test:
	bash scripts/bootstrap.sh test

image-test:
	bash scripts/image_test.sh
