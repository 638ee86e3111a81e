"""What the wheel bundles (setup.py) and what the code looks up (dra_migrate.bundled) stay one list."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dra_migrate import bundled

ROOT = Path(__file__).resolve().parents[2]


def test_setup_bundles_what_the_code_looks_up() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text())
    listed = next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and n.targets[0].id == "BUNDLED"  # type: ignore[attr-defined]
    )
    assert tuple(listed) == bundled.BUNDLED
    manifest = (ROOT / "MANIFEST.in").read_text().split()
    for rel in bundled.BUNDLED:
        assert rel in manifest, f"MANIFEST.in does not put {rel} in the sdist"


def test_every_bundled_path_exists_in_the_checkout() -> None:
    for rel in bundled.BUNDLED:
        assert (ROOT / rel).exists(), rel
        assert bundled.bundled(rel) == ROOT / rel or bundled.bundled(rel).is_relative_to(bundled.PACKAGED)


def test_only_bundled_paths_are_looked_up() -> None:
    with pytest.raises(ValueError, match="not bundled"):
        bundled.bundled("tools/realnode/build")


def test_every_data_file_in_the_package_is_declared_package_data() -> None:
    """A non-Python file under dra_migrate/ that pyproject.toml does not declare is left out of the wheel and the
    sdist: the code that opens it works in a checkout and fails once installed (`policy examples` printed a
    directory the wheel did not have). setuptools globs each pattern from the package's directory."""
    import tomllib

    package = ROOT / "dra_migrate"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {p for pattern in declared["dra_migrate"] for p in package.glob(pattern) if p.is_file()}
    data = {
        p
        for p in package.rglob("*")
        if p.is_file()
        and p.suffix not in (".py", ".pyc")
        and "__pycache__" not in p.parts
        and "_bundled" not in p.parts
    }
    assert sorted(str(p.relative_to(package)) for p in data - shipped) == []
