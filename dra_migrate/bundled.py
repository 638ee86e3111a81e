"""Files a command needs at run time beyond the code: the RBAC and Job manifests (deploy/), the twin's
control-plane scripts (tools/k8s/build, up, down) and the demo fleet.

They live in the checkout where their owners edit them; the wheel carries copies under
`dra_migrate/_bundled/` (setup.py copies them at build time). A lookup tries the package first, then the
checkout this module sits in, so an installed tool and a `PYTHONPATH=.` checkout behave the same.
"""

from __future__ import annotations

from pathlib import Path

from dra_migrate.errors import InputError

# What setup.py copies (tests/unit/test_bundled.py keeps the two lists equal).
BUNDLED = (
    "deploy",
    "tools/k8s/build",
    "tools/k8s/up",
    "tools/k8s/down",
    "tools/kwok/build",
    "tools/opa/build",
    "fixtures/clusters/demo.yaml",
    "fixtures/clusters/upstream-ready.yaml",
)

PACKAGED = Path(__file__).resolve().parent / "_bundled"
CHECKOUT = Path(__file__).resolve().parents[1]


def bundled(rel: str) -> Path:
    """The path of a bundled file or directory (`deploy/rbac/readonly.yaml`, `tools/k8s/up`, ...)."""
    if not any(rel == b or rel.startswith(b + "/") for b in BUNDLED):
        raise ValueError(f"{rel} is not bundled (dra_migrate.bundled.BUNDLED)")
    for root in (PACKAGED, CHECKOUT):
        if (root / rel).exists():
            return root / rel
    raise InputError(
        f"{rel} is missing from this installation ({PACKAGED})",
        "reinstall dra-migrate from its wheel, or run from a checkout",
    )
