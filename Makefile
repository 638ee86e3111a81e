# Two set-up commands for a fresh machine: `make demo` and `make test` (README "Quick start").
PY ?= python3
DEMO ?= fixtures/clusters/demo.yaml
export PYTHONDONTWRITEBYTECODE = 1

.PHONY: install demo test test-unit test-cluster lint k8s golden bench

install:
	@$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'

demo: install
	$(PY) -m migrate inventory --snapshot $(DEMO)

lint: install
	$(PY) -m ruff check migrate tests bench tools fixtures
	$(PY) -m mypy

# The control plane is built once per machine into ~/.cache/dra-migrate (tools/k8s/build).
k8s:
	tools/k8s/build

test: install k8s lint
	$(PY) -m pytest tests

test-unit: install
	$(PY) -m pytest tests/unit

test-cluster: install k8s
	$(PY) -m pytest -m cluster tests/integration

# Regenerate golden files on purpose, then review the diff before committing.
golden: install
	DRA_MIGRATE_UPDATE_GOLDEN=1 $(PY) -m pytest tests/unit/test_golden.py tests/unit/test_plan.py tests/unit/test_plan_diff.py -q

bench: install
	$(PY) bench/run.py
