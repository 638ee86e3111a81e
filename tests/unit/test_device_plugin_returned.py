"""After a migration: a migrated node on which the device plugin comes back beside the DRA plugin.

Built from the half-migrated fixture, whose `gpu-h100-dra` nodes are migrated (DRA plugin switched on by
`nvidia.com/dra-kubelet-plugin=true`, `nvidia.com/gpu.deploy.device-plugin=false`, `nvidia.com/gpu: 0`, slices
published) under a ClusterPolicy whose device-plugin DaemonSet selects `nvidia.com/gpu.deploy.device-plugin=true`.
The GPU Operator writes that label back as `true` where it is missing (an NFD label flap, a recreated node, a
ClusterPolicy operand toggled off and on), so the device plugin returns and the same GPUs are offered twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.yamlio import dump_yaml, load_yaml_documents
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "clusters" / "half-migrated.yaml"
PLAN = ROOT / "tests" / "golden" / "plans" / "half-migrated.yaml"
DP_LABEL = "nvidia.com/gpu.deploy.device-plugin"
BACK = "ip-10-42-54-11.us-east-2.compute.internal"  # both plugins publish (a claim holds one of its devices)
COMING = "ip-10-42-54-12.us-east-2.compute.internal"  # label back, device plugin not advertising yet
MIGRATED = "ip-10-42-89-11.us-east-2.compute.internal"  # stays correctly migrated


def _snapshot(tmp_path: Path, changes: dict[str, tuple[str, int]]) -> Path:
    """The half-migrated fixture with nodes changed: node -> (device-plugin label value, nvidia.com/gpu
    allocatable and capacity)."""
    doc = next(load_yaml_documents(FIXTURE.read_text(), str(FIXTURE)))
    for item in doc["items"]:
        meta = item.get("metadata") or {}
        if item.get("kind") == "Node" and meta.get("name") in changes:
            label, gpus = changes[meta["name"]]
            meta["labels"][DP_LABEL] = label
            item["status"]["capacity"]["nvidia.com/gpu"] = str(gpus)
            item["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)
    path = tmp_path / "after.yaml"
    path.write_text(dump_yaml(doc))
    return path


def _dual(path: Path) -> list[Any]:
    return [f for f in assess(load_snapshot(path)).findings if f.id == "dual-advertising"]


def _nodes(f: Any) -> list[str]:
    return [o.name for o in f.objects]


def test_migrated_node_with_both_plugins_publishing_is_a_blocker_that_says_which_label(tmp_path: Path) -> None:
    found = _dual(_snapshot(tmp_path, {BACK: ("true", 8)}))
    back = [f for f in found if BACK in _nodes(f)]
    assert [f.severity.value for f in back] == ["blocker"]
    f = back[0]
    assert _nodes(f) == [BACK]  # named alone: not lumped with pre-migration nodes
    assert "nvidia.com/dra-kubelet-plugin=true" in f.message  # why it reads as migrated
    assert "device plugin" in f.message and "both" in f.message
    # What to do: the label the device-plugin DaemonSet stops on, and what under a ClusterPolicy keeps it away.
    assert f"{DP_LABEL}=false" in f.remediation
    assert "ClusterPolicy" in f.remediation and "spec.devicePlugin.enabled" in f.remediation


def test_device_plugin_label_back_before_its_pod_runs_is_flagged(tmp_path: Path) -> None:
    # The label is true again but the device plugin does not advertise yet (its pod is starting, or a snapshot
    # taken in between): it is coming, so the node is named now.
    found = _dual(_snapshot(tmp_path, {COMING: ("true", 0)}))
    assert [(f.severity.value, _nodes(f)) for f in found] == [("blocker", [COMING])]
    assert "coming back" in found[0].message
    assert f"{DP_LABEL}=false" in found[0].remediation


def test_correctly_migrated_nodes_are_not_named(tmp_path: Path) -> None:
    assert _dual(_snapshot(tmp_path, {})) == []
    found = _dual(_snapshot(tmp_path, {BACK: ("true", 8), COMING: ("true", 0)}))
    assert MIGRATED not in {n for f in found for n in _nodes(f)}
    assert sorted(n for f in found for n in _nodes(f)) == sorted([BACK, COMING])


def test_check_exits_2_and_report_names_the_node(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path, {BACK: ("true", 8), COMING: ("true", 0)})
    r = run("check", "--snapshot", str(snap), "-o", "json")
    assert r.code == 2
    dual = [f for f in json.loads(r.stdout)["findings"] if f["id"] == "dual-advertising"]
    assert {o["name"] for f in dual for o in f["objects"]} == {BACK, COMING}
    assert all(f["severity"] == "blocker" for f in dual)
    rep = run("report", str(PLAN), "--snapshot", str(snap), "-o", "json")
    assert rep.code == 0, rep.stderr
    named = [f for f in json.loads(rep.stdout)["findings"] if f["id"] == "dual-advertising"]
    assert {o["name"] for f in named for o in f["objects"]} == {BACK, COMING}
    assert run("check", "--snapshot", str(_snapshot(tmp_path, {}))).code == 0


def test_both_publishing_without_a_claim_is_still_a_blocker(tmp_path: Path) -> None:
    # No claim holds a device of COMING: on main this read as the pre-migration warning ("create no GPU
    # ResourceClaims until a node is migrated"), on a node that was migrated.
    found = _dual(_snapshot(tmp_path, {COMING: ("true", 8)}))
    assert [(f.severity.value, _nodes(f)) for f in found] == [("blocker", [COMING])]
    assert "migrated node" in found[0].message


def test_report_markdown_says_the_blockers_are_new_since_planning(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path, {BACK: ("true", 8)})
    text = run("report", str(PLAN), "--snapshot", str(snap), "-o", "markdown").stdout
    assert "since planning: 1 more blocker(s)" in text and BACK in text
    same = run("report", str(PLAN), "--snapshot", str(FIXTURE), "-o", "json").stdout
    assert not any(f["message"].startswith("Since planning") for f in json.loads(same)["findings"])


def _synthetic(*extra: dict[str, Any], gpus: int = 8) -> list[Any]:
    """One node migrated by the DRA chart's nodeSelector label, a standalone device plugin (a re-run of its chart,
    no affinity: no label stops it) publishing beside it, and `extra` objects."""
    from tests.unit.test_checks import _ds, findings, gpu_node, make, slice_for

    node = gpu_node("a", n=8, **{"nvidia.com/dra-kubelet-plugin": "true", DP_LABEL: "false"})
    node["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)
    dra = _ds("dra-driver-nvidia-gpu-kubelet-plugin", nodeSelector={"nvidia.com/dra-kubelet-plugin": "true"})
    standalone = _ds("nvidia-device-plugin-daemonset", ns="kube-system")
    return findings(make(node, slice_for("a", 8), dra, standalone, *extra), "dual-advertising")


def test_a_device_plugin_no_label_stops_is_named_with_its_daemonset() -> None:
    from tests.unit.test_checks import cluster_policy

    # The node is labelled device-plugin=false, but a chart re-run without the NotIn term ignores it.
    found = _synthetic()
    assert [(f.severity.value, _nodes(f)) for f in found] == [("blocker", ["a"])]
    assert "kube-system/nvidia-device-plugin-daemonset" in found[0].remediation
    assert "NotIn" in found[0].remediation and "ClusterPolicy" not in found[0].remediation
    # Under a ClusterPolicy that has the device plugin off, it is not the operator's to bring back.
    off = _synthetic(cluster_policy(devicePlugin={"enabled": False}))
    assert "spec.devicePlugin.enabled is false" in off[0].remediation
    # Its allocatable at 0 and a DaemonSet selecting the node: coming back, still named.
    assert [(f.severity.value, _nodes(f)) for f in _synthetic(gpus=0)] == [("blocker", ["a"])]


def test_mid_apply_device_plugin_leaving_is_not_read_as_returned(tmp_path: Path) -> None:
    # Between enable-dra-plugin and wait-dra-ready the label says off while allocatable has not dropped yet:
    # no DaemonSet selects the node, so it is the plan's own switch in flight, not a device plugin come back.
    found = _dual(_snapshot(tmp_path, {COMING: ("false", 8)}))
    assert [f.severity.value for f in found] == ["warning"]
    assert "migrated node" not in found[0].message
