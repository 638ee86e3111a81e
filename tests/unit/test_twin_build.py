"""`dra-migrate twin build` builds everything `rehearse` needs: the control plane and KWOK, which plays the
twin's nodes (a twin built without KWOK failed at its first rehearsal with "no kwok found")."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.rehearse import twin


def test_twin_build_builds_the_control_plane_and_kwok_then_fetches_kueues_crds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        ran.append(Path(cmd[0]).parent.name + "/" + Path(cmd[0]).name)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", run)

    def fetch() -> int:
        ran.append("kueue")
        return 0

    monkeypatch.setattr(twin, "fetch_kueue_crds", fetch)
    assert twin.build() == 0
    assert ran == ["k8s/build", "kwok/build", "kueue"]


def test_a_failed_build_stops_there_with_its_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        ran.append(Path(cmd[0]).parent.name)
        return subprocess.CompletedProcess(cmd, 3)

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(twin, "fetch_kueue_crds", lambda: pytest.fail("fetched after a failed build"))
    assert twin.build() == 3
    assert ran == ["k8s"]
