"""Grafana dashboards that read what a migration changes (docs/dependents.md "Dashboards"), on
fixtures/dependents/dashboards.yaml: which ConfigMaps are dashboards (by what loads them, in any order),
that no reader of the NVIDIA configs or the plan's fingerprint sees one, the findings, and models that are
hostile or unreadable."""

from __future__ import annotations

import base64
import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.checks.model import Finding
from dra_migrate.checks.run import assess
from dra_migrate.cluster.redact import SnapshotFilter
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.dashboards import MAX_MODEL_BYTES, dashboards
from dra_migrate.inventory.model import build_inventory
from dra_migrate.plan.fingerprint import fingerprint
from tests.unit.helpers import state

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "dependents" / "dashboards.yaml"
GROUP = "grafana.integreatly.org"


def _items() -> list[dict[str, Any]]:
    doc = YAML(typ="safe").load(FIXTURE.read_text())
    return list(doc["items"])


def _names(objs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs}


def _findings(fleet: ClusterState) -> list[Finding]:
    return [f for f in assess(fleet, pool_labels=("pool",)).findings if f.id == "grafana-dashboard-gpu"]


@pytest.fixture(scope="module")
def fleet() -> ClusterState:
    return load_snapshot(FIXTURE)


LOADED = {
    ("ml-team", "team-gpu"),  # the team sidecar's label and value, read before that Grafana
    ("monitoring", "gpu-fleet"),  # the chart's default label
    ("monitoring", "cpu-dashboard"),
    ("monitoring", "operator-dashboards"),  # a GrafanaDashboard's configMapRef, no label
}


def test_the_configmaps_grafana_loads_are_dashboards_and_no_nvidia_config(fleet: ClusterState) -> None:
    assert _names(fleet.dashboard_configmaps) == LOADED
    assert fleet.of("ConfigMap") == []  # what the device plugin's readers see


def test_which_configmaps_are_dashboards_does_not_depend_on_the_order_read() -> None:
    for items in (_items(), list(reversed(_items()))):
        assert _names(state(*items).dashboard_configmaps) == LOADED


def test_the_snapshot_writer_keeps_the_same_dashboards_and_drops_the_look_alikes() -> None:
    kept = list(SnapshotFilter(keep_env=False).stream(_items()))
    assert _names([o for o in kept if o["kind"] == "ConfigMap"]) == LOADED


def test_a_sidecar_that_loads_only_secrets_selects_no_configmap() -> None:
    items = _items()
    grafana = next(o for o in items if o["kind"] == "Deployment")
    env = grafana["spec"]["template"]["spec"]["containers"][0]["env"]
    next(e for e in env if e["name"] == "RESOURCE")["value"] = "secret"
    assert ("ml-team", "team-gpu") not in _names(state(*items).dashboard_configmaps)


def test_dashboards_change_nothing_the_inventory_or_the_plan_reads(fleet: ClusterState) -> None:
    # Dashboards beside a standalone device plugin (every ConfigMap a candidate config): the inventory is
    # what it is without them, and editing one does not make a plan stale.
    bare = state(*[o for o in _items() if o["kind"] != "ConfigMap"])
    assert build_inventory(state(*_items()), ("pool",)).to_dict() == build_inventory(bare, ("pool",)).to_dict()
    edited_items = _items()
    cm = next(o for o in edited_items if o["metadata"]["name"] == "gpu-fleet")
    cm["data"]["gpu-fleet.json"] = cm["data"]["gpu-fleet.json"].replace("GPU fleet", "GPU fleet (v2)")
    edited = state(*edited_items)
    assert fingerprint(edited, assess(edited))["digest"] == fingerprint(fleet, assess(fleet))["digest"]


def test_findings_name_each_dashboard_that_reads_what_the_migration_changes(fleet: ClusterState) -> None:
    found = {(f.severity.value, str(f.objects[0])): f for f in _findings(fleet)}
    assert set(found) == {
        ("warning", "ConfigMap ml-team/team-gpu"),
        ("warning", "ConfigMap monitoring/gpu-fleet"),
        ("warning", f"{GROUP}/GrafanaDashboard monitoring/gpu-inline"),
        ("warning", f"{GROUP}/GrafanaDashboard monitoring/gpu-gzip"),
        ("warning", f"{GROUP}/GrafanaDashboard monitoring/from-configmap"),  # not again as its ConfigMap
        ("info", f"{GROUP}/GrafanaDashboard monitoring/dcgm-exporter"),
    }
    fleet_msg = found[("warning", "ConfigMap monitoring/gpu-fleet")]
    assert 'dashboard "GPU fleet": 3 queries read nvidia_com_gpu' in fleet_msg.message
    assert "DCGM metrics by pod" in fleet_msg.message
    assert "variable $node" in fleet_msg.message and 'panel "GPU utilisation by pod"' in fleet_msg.message
    assert "GPU temperature" not in fleet_msg.message  # DCGM by Hostname reads the same under DRA
    assert "argocd Application monitoring" in fleet_msg.remediation
    team = found[("warning", "ConfigMap ml-team/team-gpu")]
    assert 'panel "GPUs requested"' in team.message  # inside a collapsed row
    mig = found[("warning", f"{GROUP}/GrafanaDashboard monitoring/from-configmap")]
    assert "reads nvidia_com_mig," in mig.message  # the name, not the regex matcher after it
    assert "grafana.com" in found[("info", f"{GROUP}/GrafanaDashboard monitoring/dcgm-exporter")].message


def _operator_dashboard(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "GrafanaDashboard",
        "metadata": {"name": "d", "namespace": "monitoring", "uid": "u-d"},
        "spec": spec,
    }


def _gzip64(data: bytes) -> str:
    return base64.b64encode(gzip.compress(data, mtime=0)).decode()


GPU_MODEL = json.dumps(
    {"title": "t", "panels": [{"type": "stat", "title": "p", "targets": [{"expr": 'x{resource="nvidia_com_gpu"}'}]}]}
)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"gzipJson": base64.b64encode(gzip.compress(b"\0" * (MAX_MODEL_BYTES + 1))).decode()}, "inflates past 64 MB"),
        ({"gzipJson": "not base64!"}, "not base64"),
        ({"gzipJson": base64.b64encode(b"plain text").decode()}, "not gzip"),
        ({"gzipJson": _gzip64(GPU_MODEL.encode())[:40]}, "cut short"),
        ({"gzipJson": _gzip64(b"\xff\xfe{}")}, "not UTF-8"),
        ({"json": "[1, 2]"}, "a JSON list, not a dashboard model"),
        ({"json": "{" * 100_000}, "not JSON"),
        ({"url": "https://example.com/d.json"}, "from a URL"),
        ({"jsonnet": "local g = import 'g.libsonnet'; {}"}, "from Jsonnet"),
        ({"configMapRef": {"name": "gone", "key": "d.json"}}, "is not in what was read"),
        ({}, "has no model"),
    ],
    ids=["gzip-bomb", "base64", "gzip", "cut-short", "utf8", "list", "deep", "url", "jsonnet", "missing-cm", "empty"],
)
def test_a_model_that_cannot_be_read_is_said_not_raised(spec: dict[str, Any], why: str) -> None:
    found, unread = dashboards(state(_operator_dashboard(spec)))
    assert found == [] and len(unread) == 1 and why in unread[0].why


def test_a_gzipped_model_just_under_the_bound_is_read() -> None:
    model = json.loads(GPU_MODEL)
    model["description"] = " " * (MAX_MODEL_BYTES - len(GPU_MODEL) - 100)
    found, unread = dashboards(state(_operator_dashboard({"gzipJson": _gzip64(json.dumps(model).encode())})))
    assert unread == [] and [q.terms for q in found[0].queries] == [("nvidia_com_gpu",)]


def test_a_model_nested_deeper_than_python_recurses_is_walked() -> None:
    # 1,001 levels of maps and lists: orjson reads up to 1,024, Python's recursion stops at 1,000 (json.dumps
    # would too, so the text is written by hand).
    inner = '"type": "stat", "title": "deep", "targets": [{"expr": "nvidia_com_gpu"}]'
    text = '{"title": "t", ' + '"panels": [{' * 500 + inner + "}]" * 500 + "}"
    found, _ = dashboards(state(_operator_dashboard({"json": text})))
    assert [q.place for q in found[0].queries] == ['panel "deep"']


def test_a_configmap_key_that_is_not_json_is_said_only_when_named_json() -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "m", "uid": "u-c", "labels": {"grafana_dashboard": "1"}},
        "data": {"notes.txt": "GPU dashboards", "broken.json": '{"title": '},
    }
    found, unread = dashboards(state(copy.deepcopy(cm)))
    assert found == [] and [u.why.split(":")[0] for u in unread] == ["key broken.json"]


def test_a_dashboard_sidecar_run_as_an_init_container_selects_too() -> None:
    # The chart's `sidecar.dashboards.initDashboards` loads the dashboards once, from an init container.
    items = _items()
    grafana = next(o for o in items if o["kind"] == "Deployment")
    pod_spec = grafana["spec"]["template"]["spec"]
    pod_spec["initContainers"] = [pod_spec["containers"].pop(0)]
    assert ("ml-team", "team-gpu") in _names(state(*items).dashboard_configmaps)
