"""deploy/rbac on the real API server: the read-only role is enough, and a missing permission is named."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane
import pytest
from ruamel.yaml import YAML

from dra_migrate.sim.kube import Kube
from tests.unit.cli import run

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
RUN = uuid.uuid4().hex[:6]


def readonly_role() -> dict[str, Any]:
    doc = YAML(typ="safe").load((ROOT / "deploy" / "rbac" / "readonly.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def grant(kube: Kube, role: dict[str, Any], user: str) -> None:
    kube.create(ROLES, role)
    kube.create(
        BINDINGS,
        {
            "metadata": {"name": role["metadata"]["name"]},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )


@pytest.fixture(scope="module")
def roles(kube: Kube) -> Iterator[dict[str, str]]:
    """Users: `reader` with dra-migrate-readonly; `partial` with it minus resourceslices."""
    full = readonly_role()
    full["metadata"]["name"] = f"dra-migrate-readonly-{RUN}"
    partial = copy.deepcopy(full)
    partial["metadata"]["name"] = f"dra-migrate-partial-{RUN}"
    for rule in partial["rules"]:
        if "resourceslices" in rule.get("resources", []):
            rule["resources"].remove("resourceslices")
    users = {"reader": f"reader-{RUN}", "partial": f"partial-{RUN}"}
    grant(kube, full, users["reader"])
    grant(kube, partial, users["partial"])
    yield users
    for r in (full, partial):
        kube.delete(f"{BINDINGS}/{r['metadata']['name']}")
        kube.delete(f"{ROLES}/{r['metadata']['name']}")


def test_readonly_role_is_enough_for_inventory_and_snapshot(
    control_plane: controlplane.ControlPlane, roles: dict[str, str], tmp_path: Path
) -> None:
    kc = controlplane.mint_kubeconfig(control_plane, roles["reader"], [], tmp_path / "reader.kubeconfig")
    r = run("inventory", "--kubeconfig", str(kc), "-o", "json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["cluster"]["source"] == "live"
    snap = tmp_path / "snap.jsonl"
    r = run("snapshot", "--kubeconfig", str(kc), "--out", str(snap))
    assert r.code == 0, r.stderr
    assert snap.exists()


def test_missing_permission_is_named_in_one_line(
    control_plane: controlplane.ControlPlane, roles: dict[str, str], tmp_path: Path
) -> None:
    kc = controlplane.mint_kubeconfig(control_plane, roles["partial"], [], tmp_path / "partial.kubeconfig")
    out = tmp_path / "snap.jsonl"
    for args in (["inventory"], ["snapshot", "--out", str(out)]):
        r = run(*args, "--kubeconfig", str(kc))
        assert r.code == 1
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert "forbidden" in lines[0] and "'list'" in lines[0]
        assert "'resourceslices'" in lines[0] and "'resource.k8s.io'" in lines[0]
        assert "Traceback" not in r.stderr
    assert not out.exists(), "a refused list must not leave a partial snapshot"
    assert not list(tmp_path.glob(".snap.jsonl.*")), "nor its temporary file"
