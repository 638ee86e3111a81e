"""The wheel installed into a clean venv, with no checkout beside it, runs every command and the demo;
`kubectl dra-migrate` finds it as a plugin (issue 23)."""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dra_migrate.bundled import BUNDLED
from dra_migrate.cli.main import COMMANDS
from tests.package.conftest import run

pytestmark = pytest.mark.package


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, dist: tuple[Path, Path], wheelhouse: Path) -> Path:
    """A venv of its own (no system site-packages) with the wheel and its dependencies, installed offline."""
    where = tmp_path_factory.mktemp("venv") / "v"
    run("python3", "-m", "venv", where)
    run(where / "bin" / "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
        "--find-links", wheelhouse, dist[1])  # fmt: skip
    return where


@pytest.fixture
def outside(tmp_path: Path, venv: Path) -> Iterator[dict[str, str]]:
    """The environment of a user who installed the tool: no PYTHONPATH, the venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["NO_COLOR"] = "1"
    yield env


def _subcommands(help_text: str) -> list[str]:
    """The names under a help page's `Commands:` heading."""
    if "Commands:" not in help_text:
        return []
    section = help_text.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]  # up to the epilog's blank line
    return [m.group(1) for m in re.finditer(r"^  (\S+)", section, re.M)]


def test_the_wheel_carries_what_commands_need_at_run_time(dist: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(dist[1]) as wheel:
        names = wheel.namelist()
        info = wheel.getinfo("dra_migrate/_bundled/tools/k8s/up")
        scripts = wheel.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    for rel in BUNDLED:
        inside = f"dra_migrate/_bundled/{rel}"
        assert any(n == inside or n.startswith(inside + "/") for n in names), rel
    assert not [n for n in names if n.split("/")[0] in ("migrate", "tests", "tools", "fixtures")], "stray top level"
    assert (info.external_attr >> 16) & 0o111, "the twin's scripts lost their executable bit"
    assert "dra-migrate = dra_migrate.cli.entry:main" in scripts
    assert "kubectl-dra_migrate = dra_migrate.cli.entry:kubectl_plugin" in scripts
    with tarfile.open(dist[0]) as tar:
        sdist = tar.getnames()
    for must in ("LICENSE", "CHANGELOG.md", "setup.py", "tools/k8s/up", "deploy/rbac/readonly.yaml"):
        assert any(n.endswith("/" + must) for n in sdist), must


def test_every_command_help_runs_from_the_installed_wheel(outside: dict[str, str], tmp_path: Path) -> None:
    top = run("dra-migrate", "--help", cwd=tmp_path, env=outside).stdout
    assert _subcommands(top) == list(COMMANDS)
    pending = [[c] for c in COMMANDS]
    seen = 0
    while pending:
        path = pending.pop()
        text = run("dra-migrate", *path, "--help", cwd=tmp_path, env=outside).stdout
        assert text.startswith(f"Usage: dra-migrate {' '.join(path)}"), text[:200]
        pending += [[*path, sub] for sub in _subcommands(text)]
        seen += 1
    assert seen > len(COMMANDS), "no subgroup (twin, generate) was walked"
    version = run("dra-migrate", "--version", cwd=tmp_path, env=outside).stdout
    from dra_migrate import __version__

    assert __version__ in version


def test_the_installed_package_is_the_wheel_not_a_checkout(outside: dict[str, str], tmp_path: Path, venv: Path) -> None:
    code = (
        "import importlib.util, dra_migrate, dra_migrate.rehearse.twin as t;"
        "print(dra_migrate.__file__); print(t.tools_dir()); print(importlib.util.find_spec('migrate'))"
    )
    where, tools, migrate = run(venv / "bin" / "python", "-c", code, cwd=tmp_path, env=outside).stdout.split("\n")[:3]
    assert where.startswith(str(venv)), where
    assert tools.startswith(str(venv)) and tools.endswith("_bundled/tools/k8s"), tools
    assert migrate == "None", "something installs a top-level `migrate`"


def test_demo_runs_from_the_installed_wheel(outside: dict[str, str], tmp_path: Path) -> None:
    r = run("dra-migrate", "demo", cwd=tmp_path, env=outside)
    written = r.stdout.split()
    assert "dra-migrate-demo/report.html" in written and "dra-migrate-demo/plan.yaml" in written
    for name in written:
        assert (tmp_path / name).stat().st_size > 0, name
    assert "shared-gpu-capacity-loss" in (tmp_path / "dra-migrate-demo" / "check.md").read_text()
    assert "<html" in (tmp_path / "dra-migrate-demo" / "report.html").read_text().lower()
    again = run("dra-migrate", "demo", "--fleet", "ready", "--dir", "ready", cwd=tmp_path, env=outside)
    assert "ready/plan.yaml" in again.stdout.split()
    assert "applicable" in (tmp_path / "ready" / "plan.md").read_text().splitlines()[2]


def test_kubectl_finds_the_plugin(outside: dict[str, str], tmp_path: Path) -> None:
    direct = run("kubectl-dra_migrate", "--help", cwd=tmp_path, env=outside).stdout
    assert direct.startswith("Usage: kubectl dra-migrate [OPTIONS] COMMAND"), direct[:200]
    kubectl = shutil.which("kubectl", path=outside["PATH"])
    if kubectl is None:
        pytest.skip("no kubectl on PATH: the plugin's own name was checked above")
    listed = run(kubectl, "plugin", "list", "--name-only", cwd=tmp_path, env=outside).stdout
    assert "kubectl-dra_migrate" in listed
    via = run(kubectl, "dra-migrate", "plan", "--help", cwd=tmp_path, env=outside).stdout
    assert via.startswith("Usage: kubectl dra-migrate plan"), via[:200]


def test_make_demo_works_on_a_python_that_refuses_pip(tmp_path: Path, wheelhouse: Path) -> None:
    """Debian's and Ubuntu's python3 is externally managed (PEP 668): `make demo` must not pip-install into it."""
    system = Path("/usr/bin/python3")
    where = "import sysconfig; print(sysconfig.get_path('stdlib'))"
    stdlib = run(system, "-c", where).stdout.strip() if system.exists() else ""
    if not stdlib or not (Path(stdlib) / "EXTERNALLY-MANAGED").exists():
        pytest.skip("no externally managed system python3 here")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PY")}
    env |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}  # offline: the wheel's dependencies
    out = tmp_path / "demo"
    root = Path(__file__).resolve().parents[2]
    run("make", "-C", root, "demo", f"SYSPY={system}", f"VENV={tmp_path / 'venv'}", f"DEMO_DIR={out}", env=env)
    assert (out / "report.html").stat().st_size > 0
    assert (tmp_path / "venv" / ".runtime").exists()


def test_policy_examples_ship_in_the_wheel(outside: dict[str, str], tmp_path: Path, venv: Path) -> None:
    """`policy check --policy "$(dra-migrate policy examples)"` (docs/policy.md) needs the directory it prints."""
    where = Path(run("dra-migrate", "policy", "examples", cwd=tmp_path, env=outside).stdout.strip())
    assert where.is_relative_to(venv), where
    assert sorted(p.name for p in where.iterdir()) == ["data.json", "plan.rego"]


def test_the_build_uses_no_deprecated_metadata(tmp_path: Path, dist: tuple[Path, Path]) -> None:
    """setuptools warns that `project.license` as a TOML table stops building after 2027-02-18 (setuptools >= 77
    takes an SPDX expression, PEP 639); the build-system pin is `>=`, so a release after that date would
    refuse to build the sdist an operator pip-installs. The wheel says its licence as an expression."""
    r = run(Path(__file__).resolve().parents[2] / "tools" / "release" / "dist", tmp_path)
    assert "deprecated" not in r.stderr.lower(), r.stderr[-3000:]
    with zipfile.ZipFile(dist[1]) as wheel:
        metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
