"""The wheel on the other Pythons operators install it with (docs/release.md "Supported Pythons"): Ubuntu 24.04's
python3.12, Fedora 41+ and Homebrew's python3.13. Developed and tested on 3.11 (test_wheel.py); here the wheel and
its dependencies, as wheels only (no compiler), go into a venv of each other Python, and the installed tool must
write the same plan as the checkout does. A Python that is not on this machine is skipped, saying so (`-ra`).
Warm (wheels cached in the wheelhouse), ~25 s per Python on a busy 2-core machine: `make test-pythons`.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dra_migrate import __version__
from tests.package.conftest import ROOT, WHEELHOUSE, _drop_own_wheels, run

pytestmark = pytest.mark.package

DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"


def _find_python(version: str) -> str | None:
    """python<version> on PATH or under pyenv, that runs and has venv and ensurepip (Debian splits them out)."""
    pyenv = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    found = shutil.which(f"python{version}")
    candidates = [found] if found else []
    candidates += sorted(glob.glob(f"{pyenv}/versions/{version}.*/bin/python{version}"))
    for each in candidates:
        # A pyenv shim of a version that is not selected exits non-zero: not this one.
        r = subprocess.run(
            [each, "-c", "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if r.returncode == 0 and r.stdout.strip() == version:
            return each
    return None


def _outside() -> dict[str, str]:
    """An operator's environment: no checkout on the path, no venv active."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["NO_COLOR"] = "1"
    return env


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_the_wheel_installs_from_wheels_and_plans_alike_on(
    version: str, dist: tuple[Path, Path], tmp_path: Path
) -> None:
    python = _find_python(version)
    if python is None:
        pytest.skip(f"no python{version} on PATH or under pyenv: install it to test the wheel on {version}")
    venv, wheelhouse = tmp_path / "venv", WHEELHOUSE
    wheelhouse.mkdir(parents=True, exist_ok=True)
    _drop_own_wheels()  # an older build of the same version there would be installed instead of this one
    run(python, "-m", "venv", venv)
    pip = [venv / "bin" / "pip", "install", "--quiet", "--disable-pip-version-check", "--only-binary=:all:"]
    # Offline from the wheelhouse when warm; else this Python's wheels are fetched into it first (its own pip
    # resolves, so its own tags and markers). --only-binary: a dependency without a wheel for it fails here.
    if subprocess.run([*map(str, pip), "--no-index", "--find-links", str(wheelhouse), str(dist[1])],
                      capture_output=True, check=False).returncode != 0:  # fmt: skip
        run(venv / "bin" / "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
            "--dest", wheelhouse, "--find-links", wheelhouse, dist[1])  # fmt: skip
        _drop_own_wheels()
        run(*pip, "--no-index", "--find-links", wheelhouse, dist[1])
    tool = venv / "bin" / "dra-migrate"
    assert run(tool, "--version", cwd=tmp_path, env=_outside()).stdout.strip() == f"dra-migrate, version {__version__}"
    # The C speedups came with the wheels (pyproject.toml: ruamel.yaml.clib; PyYAML with libyaml).
    run(venv / "bin" / "python", "-c", "import _ruamel_yaml, yaml, msgspec, orjson; assert yaml.__with_libyaml__")
    theirs, ours = tmp_path / f"plan-{version}.yaml", tmp_path / "plan-checkout.yaml"
    run(tool, "plan", "--snapshot", DEMO, "--out", theirs, cwd=tmp_path, env=_outside())
    run(sys.executable, "-m", "dra_migrate", "plan", "--snapshot", DEMO, "--out", ours, cwd=ROOT)
    assert theirs.read_text() == ours.read_text()
