"""A snapshot redacts credentials, not the settings the checks read: `check --snapshot` of what `dra-migrate
snapshot` wrote says what `check --kubeconfig` says.

Env values and args were redacted in every container, including the few the tool reads as configuration, so a
snapshot read back lost them: the Grafana dashboard sidecar's `LABEL`/`LABEL_VALUE` (which ConfigMaps it loads:
the dashboards kept in the file were then not read as dashboards), dcgm-exporter's `KUBERNETES_ENABLE_DRA` or
`--kubernetes-enable-dra` (NVIDIA/dcgm-exporter PR #501), Kueue's `--feature-gates=`, the DRA kubelet plugin's
`FEATURE_GATES` / `--feature-gates` (DynamicMIG: dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/main.go) and the
device plugin config-manager's `DEFAULT_CONFIG`. Those are kept; every other value is still redacted.
"""

from __future__ import annotations

import json
from typing import Any

from dra_migrate.cluster.redact import SnapshotFilter, for_snapshot
from dra_migrate.inventory.dependents import dcgm_exporters, kueue_install
from dra_migrate.inventory.operator import dynamic_mig_enabled
from tests.unit.helpers import container, obj, pod_spec, state, template
from tests.unit.test_dashboards import LOADED, _items, _names

SECRET = "hunter2-db-password"


def _redacted(o: dict[str, Any]) -> dict[str, Any]:
    kept = for_snapshot(o, keep_env=False)
    assert kept is not None
    assert SECRET not in json.dumps(kept)  # what is not configuration the tool reads is still redacted
    return kept


def _ds(name: str, image: str, **c: Any) -> dict[str, Any]:
    env = [*c.pop("env", []), {"name": "DB_PASSWORD", "value": SECRET}]
    spec = pod_spec(container(name=name, image=image, env=env, **c))
    return obj("apps/v1", "DaemonSet", name, {"template": template(spec)}, namespace="gpu")


def test_dashboards_kept_in_a_snapshot_are_read_back_as_dashboards() -> None:
    kept = list(SnapshotFilter(keep_env=False).stream(_items()))
    assert _names(state(*kept).dashboard_configmaps) == LOADED


def test_dcgm_exporter_dra_attribution_survives_a_snapshot() -> None:
    by_env = _ds(
        "dcgm", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.0", env=[{"name": "KUBERNETES_ENABLE_DRA", "value": "true"}]
    )
    by_arg = _ds("dcgm2", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.0", args=["--kubernetes-enable-dra", f"--x={SECRET}"])
    found = dcgm_exporters(state(_redacted(by_env), _redacted(by_arg)))
    assert [e.dra_attribution for e in found] == [True, True]


def test_kueue_feature_gates_survive_a_snapshot() -> None:
    gates = "--feature-gates=DynamicResourceAllocation=true,DRAExtendedResources=true"
    spec = pod_spec(container(image="registry.k8s.io/kueue/kueue:v0.17.0", args=[gates, f"--token={SECRET}"]))
    dep = obj("apps/v1", "Deployment", "kueue-controller-manager", {"template": template(spec)}, namespace="kueue")
    found = kueue_install(state(_redacted(dep)))
    assert found is not None
    assert found.feature_gates == {"DynamicResourceAllocation": True, "DRAExtendedResources": True}


def test_dra_plugin_dynamic_mig_gate_survives_a_snapshot() -> None:
    image = "registry.k8s.io/dra-driver-nvidia-gpu/gpu-kubelet-plugin:v0.4.1"
    by_env = _ds("plugin", image, env=[{"name": "FEATURE_GATES", "value": "DynamicMIG=true"}])
    by_arg = _ds("plugin2", image, args=["--feature-gates=DynamicMIG=true"])
    assert dynamic_mig_enabled(_redacted(by_env)) and dynamic_mig_enabled(_redacted(by_arg))
