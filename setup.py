"""Build hook: copy what commands need at run time from the checkout into the package (`dra_migrate/_bundled`).

The files stay where their owners edit them (deploy/, tools/k8s/, fixtures/clusters/demo.yaml); the wheel
carries copies so an installed `dra-migrate` needs no checkout: `dra_migrate/bundled.py` finds them in the
package first, then in the checkout. Everything else is declared in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# Kept in step with dra_migrate/bundled.py BUNDLED (tests/unit/test_bundled.py compares them).
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


class BuildWithBundle(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "dra_migrate" / "_bundled"
        for rel in BUNDLED:
            src, dst = ROOT / rel, target / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                shutil.copy2(src, dst)  # keeps the scripts' executable bit


setup(cmdclass={"build_py": BuildWithBundle})
