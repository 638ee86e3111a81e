"""The container image built here without a registry (tools/image/build): non-root, the tool and its
dependencies only, runs the demo; and the Containerfile installs the same (issue 23)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.package.conftest import ROOT, run

pytestmark = pytest.mark.package

BUILD = ROOT / "tools" / "image" / "build"
CONTAINERFILE = ROOT / "Containerfile"


@pytest.fixture(scope="module")
def archive(release: Path) -> Path:
    """The image tools/image/build made for the release (tools/release/release)."""
    (image,) = release.glob("dra-migrate-image-*.oci.tar")
    return image


def _blob(layout: Path, digest: str) -> Any:
    return json.loads((layout / "blobs" / "sha256" / digest.split(":")[1]).read_bytes())


@pytest.fixture(scope="module")
def layout(archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("oci")
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="tar")
    return where


@pytest.fixture(scope="module")
def config(layout: Path) -> dict[str, Any]:
    index = json.loads((layout / "index.json").read_text())
    manifest = _blob(layout, index["manifests"][0]["digest"])
    return _blob(layout, manifest["config"]["digest"])["config"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def rootfs(layout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    index = json.loads((layout / "index.json").read_text())
    tag = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
    bundle = tmp_path_factory.mktemp("bundle") / "b"
    run("umoci", "unpack", "--image", f"{layout}:{tag}", bundle)
    return bundle / "rootfs"


def _final_stage(text: str) -> str:
    return text.split("\nFROM ")[-1]


def _script_list(name: str) -> list[str]:
    m = re.search(rf"^{name}=\(([^)]*)\)", BUILD.read_text(), re.M)
    assert m, name
    return m.group(1).split()


def test_the_image_runs_as_a_user_with_the_tool_as_entrypoint(config: dict[str, Any]) -> None:
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/usr/local/bin/dra-migrate"]
    assert config["WorkingDir"] == "/work"


def test_the_containerfile_installs_what_the_build_installs(config: dict[str, Any]) -> None:
    text = CONTAINERFILE.read_text()
    final = _final_stage(text)
    apt = re.search(r"apt-get install -y --no-install-recommends ([^&]+)&&", final)
    assert apt and sorted(apt.group(1).split()) == sorted(_script_list("PACKAGES")), "Debian packages differ"
    script = BUILD.read_text()
    # The same user and group lines, the same directories.
    for line in re.findall(r"echo '(dra-migrate:[^']*)'", text):
        assert line.replace("65532", "$USER_ID") in script, line
    # The same Python install: the wheel with binary dependencies only, into Debian's dist-packages.
    for flag in ("--only-binary=:all:", "--no-compile", "/usr/local/lib/python3.11/dist-packages"):
        assert flag in text and (flag in script or flag.replace("3.11", "$PYVER") in script), flag
    # The same entry scripts.
    for name, func in (("dra-migrate", "main"), ("kubectl-dra_migrate", "kubectl_plugin")):
        assert f"from dra_migrate.cli.entry import {func}\\n{func}()" in text, name
    assert "from dra_migrate.cli.entry import %s\\n%s()" in script
    # The same image config as the one built here.
    user = re.search(r"^USER (\S+)", final, re.M)
    assert user and user.group(1) == config["User"]
    workdir = re.search(r"^WORKDIR (\S+)", final, re.M)
    assert workdir and workdir.group(1) == config["WorkingDir"]
    entry = re.search(r"^ENTRYPOINT (.+)$", final, re.M)
    assert entry and json.loads(entry.group(1)) == config["Entrypoint"]
    cmd = re.search(r"^CMD (.+)$", final, re.M)
    assert cmd and json.loads(cmd.group(1)) == config["Cmd"]
    env = re.search(r"^ENV (.+)$", final, re.M)
    assert env and sorted(shlex.split(env.group(1))) == sorted(config["Env"])


def test_the_image_holds_the_tool_and_its_dependencies_only(rootfs: Path, dist: tuple[Path, Path]) -> None:
    site = rootfs / "usr/local/lib/python3.11/dist-packages"
    dists = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert "dra_migrate" in dists
    for unwanted in ("pip", "setuptools", "pytest", "mypy", "ruff"):
        assert unwanted not in dists, unwanted
    # Debian's essential set stays (dpkg, coreutils, perl-base): what apt would be missing is apt itself.
    for tool in ("usr/bin/apt-get", "usr/bin/pip3", "usr/bin/gcc", "usr/bin/perl5.36-x86_64-linux-gnu"):
        assert not (rootfs / tool).exists(), tool
    assert (rootfs / "usr/bin/python3").exists()


def test_every_native_library_in_the_image_finds_what_it_links_to(rootfs: Path) -> None:
    """A wheel's extension that needs a system library the image lacks (google-re2 needs libstdc++) fails
    only when first imported; ldd inside the image finds it now."""
    if os.geteuid() != 0:
        pytest.fail("chroot needs root: run the package tier as root")
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    site = rootfs / "usr/local/lib/python3.11/dist-packages"
    libs = sorted("/" + str(p.relative_to(rootfs)) for p in site.rglob("*.so*") if p.is_file())
    assert libs, "no extension modules found: is the tool layer there?"
    missing = []
    for lib in libs:
        # ldd exits 1 on a file that is not dynamically linked: only its "not found" lines matter.
        ldd = subprocess.run([chroot, str(rootfs), "/usr/bin/ldd", lib], capture_output=True, text=True, check=False)
        out = ldd.stdout
        missing += [f"{lib}: {line.strip()}" for line in out.splitlines() if "not found" in line]
    assert not missing, "\n".join(missing)


def test_the_image_runs_the_demo_as_its_user(rootfs: Path) -> None:
    """chroot with the image's user: the tool runs from the image alone (containerd runs it the same way)."""
    if os.geteuid() != 0:
        pytest.fail("chroot needs root: run the package tier as root")
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/dra-migrate", "NO_COLOR": "1"}
    r = run(chroot, "--userspec=65532:65532", rootfs, "/bin/sh", "-c", "cd /work && dra-migrate demo", env=env)
    assert "dra-migrate-demo/report.html" in r.stdout.split()
    report = rootfs / "work/dra-migrate-demo/report.html"
    assert report.stat().st_uid == 65532 and report.stat().st_size > 0
    plugin = run(chroot, "--userspec=65532:65532", rootfs, "kubectl-dra_migrate", "--version", env=env)
    assert "dra-migrate" in plugin.stdout
