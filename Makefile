# Two set-up commands for a fresh machine: `make demo` and `make test` (README "Quick start").
PY ?= python3
DEMO ?= fixtures/clusters/demo.yaml
export PYTHONDONTWRITEBYTECODE = 1

.PHONY: install demo test test-unit test-cluster test-realnode test-nvidia test-policy lint k8s kwok node nvidia opa browser golden bench

install:
	@$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'

# The report pairs the example plan with the fixture it was made from (a test keeps them in step).
demo: install
	$(PY) -m dra_migrate inventory --snapshot $(DEMO)
	$(PY) -m dra_migrate report plans/demo-example.yaml --snapshot fixtures/clusters/demo.yaml -o html \
		--out plans/demo.report.html

# Import contracts (layers; click only in cli/, kubernetes only in kube/, ruamel only in the plan codec and
# YAML I/O; no test doubles in the product): [tool.importlinter] in pyproject.toml, docs/architecture.md.
lint: install
	$(PY) -m ruff check dra_migrate tests bench tools fixtures
	$(PY) -m mypy
	lint-imports

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

test: install k8s kwok node nvidia opa browser lint
	$(PY) -m pytest tests

test-unit: install
	$(PY) -m pytest tests/unit

test-policy: install opa
	$(PY) -m pytest tests/policy

test-cluster: install k8s kwok
	$(PY) -m pytest -m cluster tests/integration

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
