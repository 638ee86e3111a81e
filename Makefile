# Two set-up commands for a fresh machine: `make demo` and `make test` (README "Quick start").
#
# They run the checkout itself (PYTHONPATH) with its dependencies in a virtual environment outside it,
# ~/.cache/dra-migrate/venv, made with the system's python3: a system Python that refuses pip installs
# (PEP 668, Debian's and Ubuntu's) works, and nothing is installed into it. The venv holds dependencies
# only, never this project, so any number of checkouts share it. `make PY=python3 test` uses your own
# environment instead (it must have the dependencies of pyproject.toml [dev]).
SYSPY ?= python3
VENV ?= $(HOME)/.cache/dra-migrate/venv
PY ?= $(VENV)/bin/python
DEMO_DIR ?= plans/demo
export PYTHONDONTWRITEBYTECODE = 1
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: install deps demo test test-unit test-cluster test-realnode test-nvidia test-package test-pythons test-policy test-lowest lint \
	k8s kwok node nvidia opa browser golden bench fuzz docs release image-tools

# The dependencies of pyproject.toml, read from it; reinstalled when it changes. `deps` is the runtime
# set (make demo), `install` adds [dev] (tests, lint). A no-op when PY is not the venv's.
$(VENV)/.runtime: pyproject.toml
	@$(SYSPY) -m venv $(VENV) || { echo "error: cannot make a venv with $(SYSPY): install python3-venv" \
		"(Debian/Ubuntu) and retry" >&2; exit 1; }
	@$(SYSPY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
		> $(VENV)/runtime.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r $(VENV)/runtime.txt
	@touch $@

$(VENV)/.dev: $(VENV)/.runtime
	@$(SYSPY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]))' \
		> $(VENV)/dev.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r $(VENV)/dev.txt
	@touch $@

deps: $(if $(filter $(VENV)/bin/python,$(PY)),$(VENV)/.runtime)
install: $(if $(filter $(VENV)/bin/python,$(PY)),$(VENV)/.dev)

# The same as the installed tool's `dra-migrate demo`: inventory, check, plan, show and report of the
# bundled demo fleet, into plans/demo/ (report.html is the audit report).
demo: deps
	$(PY) -m dra_migrate demo --dir $(DEMO_DIR) --force

# Import contracts (layers; click only in cli/, kubernetes only in kube/, ruamel only in the plan codec and
# YAML I/O; no test doubles in the product): [tool.importlinter] in pyproject.toml, docs/architecture.md.
lint: install
	$(PY) -m ruff check dra_migrate tests bench tools fixtures
	$(PY) -m mypy
	$(PY) -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"

# The control plane is built once per machine into ~/.cache/dra-migrate (tools/k8s/build).
k8s:
	tools/k8s/build

# KWOK, which plays the twin's GPU nodes (docs/twin.md), built once per machine into ~/.cache/dra-migrate/kwok.
kwok:
	tools/kwok/build

# The real-node tier (tests/integration/test_realnode.py, README "Real-node tier"): Debian's runc, CNI
# plugins and busybox-static (apt, as root or through sudo), the kubelet in the control plane's wrapper,
# containerd 2.x and our GPU plugins from the Go module proxy, the local images; all cached in
# ~/.cache/dra-migrate, a no-op when done.
node: k8s
	tools/realnode/build

# The nvidia tier (tests/integration/test_nvidia.py, docs/nvidia-tier.md): the real NVIDIA device plugin + GFD
# (k8s-device-plugin v0.18.0) and DRA kubelet plugin (dra-driver-nvidia-gpu v0.4.1) from the Go module proxy on
# go-nvml's mock NVML, a driver root and the image; cached in ~/.cache/dra-migrate/nvidia, a no-op when done.
nvidia: node
	tools/nvidia/build

# The policy engine for `dra-migrate policy check` and tests/policy (docs/policy.md): OPA built from the Go
# module proxy into ~/.cache/dra-migrate/opa (pinned; a no-op when cached).
opa:
	tools/opa/build

# The HTML report is checked in headless Chromium (tests/integration/test_report_browser.py): Debian's
# package, installed once per machine (as root, or through sudo).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium; }

test: install k8s kwok node nvidia opa browser image-tools lint
	$(PY) -m pytest tests

# The image is built without a registry (tools/image/build): Debian's mmdebstrap and umoci, once per machine.
image-tools:
	@command -v mmdebstrap >/dev/null 2>&1 && command -v umoci >/dev/null 2>&1 || { \
		SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q mmdebstrap umoci; }

# The package tier (tests/package): wheel and sdist built, installed into a clean venv outside the checkout.
test-package: install image-tools
	$(PY) -m pytest -m package tests/package

# The wheel on python3.12 and python3.13 (from PATH or pyenv; skipped, with the reason, where absent): installed
# from wheels only, --version and a plan alike to the checkout's (docs/release.md "Supported Pythons").
test-pythons: install
	$(PY) -m pytest -m package -ra tests/package/test_pythons.py

# Regenerate the generated reference pages (docs/commands.md, docs/rules.md) after changing a command or rule.
docs: install
	$(PY) tools/docs/generate
	$(PY) -m dra_migrate.plan.schema docs/

# Wheel, sdist, the container image archive, SHA-256 sums and the krew manifest, into dist/release (docs/release.md).
release: image-tools
	tools/release/release

test-unit: install
	$(PY) -m pytest tests/unit

test-policy: install opa
	$(PY) -m pytest tests/policy

test-cluster: install k8s kwok
	$(PY) -m pytest -m cluster tests/integration

# The unit tier at the lowest versions pyproject.toml allows (docs/testing.md "Lowest dependency versions"; not in
# `make test`): each runtime dependency's `>=X` installed as `==X` (tools/lowest/requirements.py), from wheels
# only, with [dev] at its newest, into a venv of its own outside the checkout; rebuilt from scratch when
# pyproject.toml changes.
LOWEST_VENV ?= $(HOME)/.cache/dra-migrate/venv-lowest

$(LOWEST_VENV)/.lowest: pyproject.toml tools/lowest/requirements.py
	@$(SYSPY) -m venv --clear $(LOWEST_VENV) || { echo "error: cannot make a venv with $(SYSPY): install python3-venv" \
		"(Debian/Ubuntu) and retry" >&2; exit 1; }
	$(SYSPY) tools/lowest/requirements.py pyproject.toml > $(LOWEST_VENV)/lowest.txt
	@$(SYSPY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]))' \
		> $(LOWEST_VENV)/dev.txt
	$(LOWEST_VENV)/bin/pip install --quiet --disable-pip-version-check --only-binary=:all: \
		-r $(LOWEST_VENV)/lowest.txt -r $(LOWEST_VENV)/dev.txt
	@touch $@

test-lowest: $(LOWEST_VENV)/.lowest
	@echo "runtime dependencies at their lowest:" $$(cut -d';' -f1 $(LOWEST_VENV)/lowest.txt)
	$(LOWEST_VENV)/bin/python -m pytest -p no:cacheprovider tests/unit

# Regenerate golden files on purpose, then review the diff before committing.
test-realnode: install node
	$(PY) -m pytest -m realnode tests/integration/test_realnode.py

# One real node per machine: the tier holds the machine-wide lock while it runs.
test-nvidia: install nvidia
	flock /tmp/dra-migrate-realnode.lock $(PY) -m pytest -m nvidia tests/integration/test_nvidia.py

golden: install
	DRA_MIGRATE_UPDATE_GOLDEN=1 $(PY) -m pytest tests/unit/test_golden.py tests/unit/test_plan.py \
		tests/unit/test_plan_diff.py tests/unit/test_convert.py tests/unit/test_report.py -q

bench: install
	$(PY) bench/run.py

# Coverage-guided fuzzing of the readers of hostile input (tools/fuzz/targets.py, docs/testing.md); not in
# `make test`. FUZZ_SECONDS per target (300), FUZZ_TARGETS (snapshot convert plan).
fuzz: install
	PY=$(PY) tools/fuzz/run
