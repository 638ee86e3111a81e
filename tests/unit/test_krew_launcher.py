"""The krew archive's launcher (tools/release/krew-launcher) run as krew installs it.

krew unpacks the archive into ~/.krew/store/<plugin>/<version>/ and puts a relative symlink
~/.krew/bin/kubectl-dra_migrate -> ../store/dra-migrate/<version>/kubectl-dra_migrate on PATH
(kubernetes-sigs/krew internal/installation/install.go `createOrUpdateLink`, `pluginNameToBin`); kubectl
runs the symlink. The launcher must find the wheel beside its target, not beside the link.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = "9.9.9"


def _krew_install(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The layout krew leaves, with the first run's venv already made (a stand-in that prints its args)."""
    store = tmp_path / "krew" / "store" / "dra-migrate" / f"v{VERSION}"
    store.mkdir(parents=True)
    shutil.copy2(ROOT / "tools" / "release" / "krew-launcher", store / "kubectl-dra_migrate")
    (store / f"dra_migrate-{VERSION}-py3-none-any.whl").write_bytes(b"not read: the venv is made")
    venv = tmp_path / "cache" / "dra-migrate" / "krew" / VERSION
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()
    fake = venv / "bin" / "kubectl-dra_migrate"
    fake.write_text('#!/bin/sh\necho "ran $0 with: $*"\n')
    fake.chmod(0o755)
    _script(venv / "bin" / "python", "exit 0")  # finds the package: the venv is usable
    bindir = tmp_path / "krew" / "bin"
    bindir.mkdir()
    (bindir / "kubectl-dra_migrate").symlink_to(
        Path("..") / "store" / "dra-migrate" / f"v{VERSION}" / "kubectl-dra_migrate"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DRA_MIGRATE_KREW_VENV", "PYTHONPATH")}
    env |= {
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHON": "/nonexistent/python3",
        "PATH": f"{bindir}:/usr/bin:/bin",
    }
    return bindir / "kubectl-dra_migrate", env


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_the_launcher_finds_its_wheel_through_krews_symlink(tmp_path: Path) -> None:
    link, env = _krew_install(tmp_path)
    r = subprocess.run([link, "plan", "--context", "prod", "--pools", "a,b"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    venv_bin = tmp_path / "cache" / "dra-migrate" / "krew" / VERSION / "bin" / "kubectl-dra_migrate"
    assert r.stdout == f"ran {venv_bin} with: plan --context prod --pools a,b\n"


def test_the_launcher_says_so_when_its_wheel_is_missing(tmp_path: Path) -> None:
    link, env = _krew_install(tmp_path)
    for wheel in (link.resolve().parent).glob("*.whl"):
        wheel.unlink()
    r = subprocess.run([link, "--version"], capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert r.returncode == 1 and "no dra-migrate wheel" in r.stderr, r.stderr


def test_the_launcher_installs_again_when_its_venv_no_longer_runs(tmp_path: Path) -> None:
    """The venv was made by the python3 of the first run; after a distro upgrade (Ubuntu 24.04 -> 26.04, Fedora
    40 -> 41) or Homebrew moving python3 on, its python looks in lib/python3.<new>/site-packages, which is
    empty: every run failed with "No module named 'dra_migrate'". The launcher asks the venv's python whether
    it finds the package and, when not, makes the venv again with today's python3."""
    link, env = _krew_install(tmp_path)
    venv = tmp_path / "cache" / "dra-migrate" / "krew" / VERSION
    _script(venv / "bin" / "python", "exit 1")  # no dra_migrate for this interpreter
    # Today's python3: passes the version check, and `-m venv DIR` makes a stand-in venv that installs and runs.
    log = tmp_path / "python3.log"
    newpy = tmp_path / "python3"
    _script(
        newpy,
        f"""echo "$*" >>{log}
if [ "$1" = -m ]; then
  mkdir -p "$3/bin"
  printf '#!/bin/sh\\nexit 0\\n' >"$3/bin/python"
  printf '#!/bin/sh\\necho "pip $*" >>{log}\\n' >"$3/bin/pip"
  printf '#!/bin/sh\\necho "new venv ran: $*"\\n' >"$3/bin/kubectl-dra_migrate"
  chmod +x "$3/bin/python" "$3/bin/pip" "$3/bin/kubectl-dra_migrate"
fi""",
    )
    env["PYTHON"] = str(newpy)
    r = subprocess.run([link, "--version"], capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "new venv ran: --version\n"
    assert "python3 upgraded?" in r.stderr and "installing" in r.stderr
    assert f"-m venv {venv}" in log.read_text() and "pip install" in log.read_text()
    assert (venv / ".installed").exists()
    again = subprocess.run([link, "--version"], capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert again.returncode == 0 and "installing" not in again.stderr, again.stderr
