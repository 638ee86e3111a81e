"""A gzip-compressed plan reads as the plan it holds: the in-cluster Job's ConfigMap is capped at 1 MiB
(k8s.io/kubernetes v1.37.2 pkg/apis/core/validation/validation.go `ValidateConfigMap`), some 3,500 GPU nodes of
plan; compressed, ten thousand fit. Nothing the plain file refuses is let through by compressing it."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dra_migrate.errors import InputError
from dra_migrate.plan import io as plan_io
from tests.unit.cli import run
from tests.unit.test_plan import demo_plan, edit


def _gz(path: Path, name: str = "plan.yaml") -> Path:
    """The file compressed under a name that does not say so (as the Job mounts it: /plan/plan.yaml)."""
    out = path.parent / "gz" / name
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(gzip.compress(path.read_bytes()))
    return out


def test_a_compressed_plan_verifies_and_reads_as_the_plain_one(tmp_path: Path) -> None:
    plain = demo_plan(tmp_path)
    packed = _gz(plain)
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    assert plan_io.load(packed) == plan_io.load(plain)
    for command in (["show"], ["show", "-o", "json"], ["status"]):
        a, b = run(*command, str(plain)), run(*command, str(packed))
        assert (b.code, b.stdout) == (a.code, a.stdout.replace(str(plain), str(packed))), command


def test_an_edit_compressed_with_the_plan_is_refused_as_in_the_plain_file(tmp_path: Path) -> None:
    plain = demo_plan(tmp_path)
    edit(plain, "drain: gpu", "drain: all")
    with pytest.raises(InputError, match="`parameters`"):
        plan_io.load(_gz(plain))


def test_a_cut_short_or_damaged_gzip_is_one_line_saying_so(tmp_path: Path) -> None:
    packed = _gz(demo_plan(tmp_path))
    data = packed.read_bytes()
    packed.write_bytes(data[: len(data) // 2])
    r = run("show", str(packed))
    assert r.code == 1 and "damaged or cut-short gzip" in r.stderr and "Traceback" not in r.stderr
    packed.write_bytes(data[:10] + b"\x00" * 64 + data[74:])
    r = run("apply", str(packed), "--dry-run", "--snapshot", "fixtures/clusters/demo.yaml")
    assert r.code == 1 and "gzip" in r.stderr and "Traceback" not in r.stderr


def test_a_file_that_inflates_past_the_limit_is_refused_before_it_is_all_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_io, "PLAN_MAX_BYTES", 1 << 20)
    bomb = tmp_path / "plan.yaml"
    bomb.write_bytes(gzip.compress(b"a: " + b"x" * (8 << 20), 9))  # 8 KB that inflate to 8 MB
    with pytest.raises(InputError, match="more than 1 MiB"):
        plan_io.load(bomb)
    plain = tmp_path / "big.yaml"
    plain.write_bytes(b"a: " + b"x" * (2 << 20))
    with pytest.raises(InputError, match="more than 1 MiB"):
        plan_io.load(plain)


def test_a_compressed_plan_through_a_pipe_reads_as_the_plain_one(tmp_path: Path) -> None:
    """`git show main:plans/prod.yaml.gz | dra-migrate show -`, `show <(gzip -c plan.yaml)`: a pipe is read once,
    so the bytes read to find the gzip magic must be the ones decompressed (the file was opened again by its
    path, which a pipe's consumed bytes do not survive: "Not a gzipped file")."""
    plain = demo_plan(tmp_path)
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, gzip.compress(plain.read_bytes())), os.close(w)))
    writer.start()
    try:
        assert plan_io.load(Path(f"/dev/fd/{r}")) == plan_io.load(plain)
    finally:
        writer.join()
        os.close(r)
    shown = subprocess.run(
        [sys.executable, "-m", "dra_migrate", "show", "-", "-o", "json"],
        input=gzip.compress(plain.read_bytes()),
        capture_output=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == json.loads(run("show", str(plain), "-o", "json").stdout)
