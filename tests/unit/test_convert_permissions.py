"""`convert --output-dir` never makes a manifest readable by more people than its source was.

A manifest kept 0600 (it holds a Secret beside the Deployment, or a password in an `env` value) was copied into
the output directory as 0644 (0666 less the usual umask): everyone on the machine could read what its owner had
kept to themselves. A converted copy now gets the source's permissions, as `cp` gives a new file; a copy that
exists already keeps its own, narrowed to the source's.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.unit.cli import run

MANIFEST = """\
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: ml}
stringData: {password: hunter2}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ml}
spec:
  template:
    spec:
      containers:
      - name: c
        image: i
        env: [{name: DB_PASSWORD, value: hunter2}]
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("existing", [False, True], ids=["new-copy", "copy-there-already"])
def test_output_dir_copy_is_no_more_readable_than_its_source(tmp_path: Path, existing: bool) -> None:
    src = tmp_path / "in" / "app.yaml"
    src.parent.mkdir()
    src.write_text(MANIFEST)
    src.chmod(0o600)
    out = tmp_path / "out"
    if existing:
        out.mkdir()
        (out / "app.yaml").write_text("old\n")
        (out / "app.yaml").chmod(0o644)
    old = os.umask(0o022)
    try:
        r = run("convert", str(src.parent), "--output-dir", str(out))
    finally:
        os.umask(old)
    assert r.code == 0, r.stderr
    copy = out / "app.yaml"
    assert "ResourceClaimTemplate" in copy.read_text()
    assert _mode(copy) & 0o077 == 0, oct(_mode(copy))


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_output_dir_copy_of_a_shared_manifest_stays_readable(tmp_path: Path) -> None:
    src = tmp_path / "in" / "app.yaml"
    src.parent.mkdir()
    src.write_text(MANIFEST)
    src.chmod(0o644)
    old = os.umask(0o022)
    try:
        r = run("convert", str(src.parent), "--output-dir", str(tmp_path / "out"))
    finally:
        os.umask(old)
    assert r.code == 0, r.stderr
    assert _mode(tmp_path / "out" / "app.yaml") == 0o644
