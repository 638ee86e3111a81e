"""`make release`: wheel, sdist, image archive, krew archive and manifest, with SHA-256 sums (issue 23)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from dra_migrate import __version__
from tests.package.conftest import ROOT, run

pytestmark = pytest.mark.package


def test_the_release_holds_every_artifact_with_its_sum(release: Path) -> None:
    names = {p.name for p in release.iterdir()}
    expected = {
        f"dra_migrate-{__version__}.tar.gz",
        f"dra_migrate-{__version__}-py3-none-any.whl",
        f"dra-migrate-image-{__version__}.oci.tar",
        f"dra-migrate-krew-{__version__}.tar.gz",
        "dra-migrate.krew.yaml",
        "SHA256SUMS",
    }
    assert expected <= names
    run("sha256sum", "-c", "SHA256SUMS", cwd=release)
    summed = {line.split()[1] for line in (release / "SHA256SUMS").read_text().splitlines()}
    assert summed == expected - {"SHA256SUMS"}


def test_the_krew_manifest_describes_its_archive(release: Path) -> None:
    doc = json.loads((release / "dra-migrate.krew.yaml").read_text())
    assert doc["kind"] == "Plugin" and doc["metadata"]["name"] == "dra-migrate"
    assert doc["spec"]["version"] == f"v{__version__}"
    (platform,) = doc["spec"]["platforms"]
    archive = release / f"dra-migrate-krew-{__version__}.tar.gz"
    assert platform["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert platform["uri"].endswith(archive.name)
    with tarfile.open(archive) as tar:
        assert platform["bin"] in {Path(n).name for n in tar.getnames()}


def test_the_krew_archive_runs_as_a_kubectl_plugin(release: Path, wheelhouse: Path, tmp_path: Path) -> None:
    """What krew does on install (unpack into its store, a relative symlink to `bin` in ~/.krew/bin on PATH:
    kubernetes-sigs/krew internal/installation/install.go `createOrUpdateLink`), then the first run installs
    the bundled wheel."""
    store = tmp_path / "krew" / "store" / "dra-migrate" / f"v{__version__}"
    with tarfile.open(release / f"dra-migrate-krew-{__version__}.tar.gz") as tar:
        tar.extractall(store, filter="tar")
    bindir = tmp_path / "krew" / "bin"
    bindir.mkdir()
    (bindir / "kubectl-dra_migrate").symlink_to(
        Path("..") / store.relative_to(tmp_path / "krew") / "kubectl-dra_migrate"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {
        "PATH": f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}",
        "DRA_MIGRATE_KREW_VENV": str(tmp_path / "venv"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheelhouse),
    }
    first = run("kubectl-dra_migrate", "--version", cwd=tmp_path, env=env)
    assert __version__ in first.stdout and "installing" in first.stderr
    again = run("kubectl-dra_migrate", "--version", cwd=tmp_path, env=env)
    assert "installing" not in again.stderr
    kubectl = shutil.which("kubectl", path=env["PATH"])
    if kubectl is not None:
        assert run(kubectl, "dra-migrate", "--help", cwd=tmp_path, env=env).stdout.startswith(
            "Usage: kubectl dra-migrate"
        )


def test_the_kubectl_plugin_installs_again_when_python3_changes_minor_version(
    dist: tuple[Path, Path], wheelhouse: Path, tmp_path: Path
) -> None:
    """The launcher's venv is made by the python3 of its first run. A distro release upgrade (Ubuntu, Fedora) or
    Homebrew moving python3 to the next 3.x leaves a venv whose python looks in lib/python3.<new>/site-packages,
    which holds nothing: every run failed with "No module named 'dra_migrate'" until the user found and deleted
    the venv. Played here with one Python: its site-packages renamed to another minor version's."""
    plugin = tmp_path / "store"
    plugin.mkdir()
    shutil.copy2(ROOT / "tools" / "release" / "krew-launcher", plugin / "kubectl-dra_migrate")
    shutil.copy2(dist[1], plugin)
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {
        "DRA_MIGRATE_KREW_VENV": str(venv),
        "PYTHON": sys.executable,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheelhouse),
    }
    first = run(plugin / "kubectl-dra_migrate", "--version", cwd=tmp_path, env=env)
    assert __version__ in first.stdout and "installing" in first.stderr
    (lib,) = (venv / "lib").glob("python3.*")
    lib.rename(lib.with_name("python3.0"))  # made by "another" python3
    again = run(plugin / "kubectl-dra_migrate", "--version", cwd=tmp_path, env=env)
    assert __version__ in again.stdout
    assert "python3 upgraded?" in again.stderr
    settled = run(plugin / "kubectl-dra_migrate", "--version", cwd=tmp_path, env=env)
    assert "installing" not in settled.stderr
