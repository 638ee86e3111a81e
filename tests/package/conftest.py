"""The package tier: what an operator installs (wheel, sdist, image), built and used from outside the checkout.

Builds go to pytest's temporary directory; third-party wheels are downloaded from PyPI once per machine into
~/.cache/dra-migrate/wheelhouse (the image build reuses them), so a second run installs offline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = Path(os.environ.get("DRA_MIGRATE_WHEELHOUSE", Path.home() / ".cache" / "dra-migrate" / "wheelhouse"))


def run(*args: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    """A command whose failure fails the test with its output (text mode)."""
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    assert r.returncode == 0, f"{args} exited {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel) built by tools/release/dist — the wheel from the sdist."""
    out = tmp_path_factory.mktemp("dist")
    sdist, wheel = run(ROOT / "tools" / "release" / "dist", out).stdout.split()
    return Path(sdist), Path(wheel)


@pytest.fixture(scope="session")
def wheelhouse(dist: tuple[Path, Path]) -> Path:
    """The wheel's dependencies as wheels, fetched once per machine (pip's resolver picks the versions)."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    # Third-party wheels only: a copy of the project's wheel left there (same name, older dependencies) is read
    # instead of the new one, and a new dependency is never fetched (tools/image/build says the same).
    _drop_own_wheels()
    run(sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
        "--dest", WHEELHOUSE, "--find-links", WHEELHOUSE, dist[1])  # fmt: skip
    _drop_own_wheels()
    return WHEELHOUSE


def _drop_own_wheels() -> None:
    for own in WHEELHOUSE.glob("dra_migrate-*.whl"):
        own.unlink()


@pytest.fixture(scope="session")
def release(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make release` output (tools/release/release): sdist, wheel, image archive, krew archive and manifest, sums.
    The image tests use its image, so it is built once per run."""
    missing = [t for t in ("mmdebstrap", "umoci") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run `make image-tools` (apt-get install mmdebstrap umoci)")
    out = tmp_path_factory.mktemp("release")
    return Path(run(ROOT / "tools" / "release" / "release", out).stdout.split()[-1])
