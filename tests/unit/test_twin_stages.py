"""The twin's KWOK Stages and APF objects, as data (the integration tier plays them: test_kwok.py, test_apf.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ruamel.yaml import YAML

from dra_migrate.inventory.platform import which_platform
from dra_migrate.rehearse.apf import BY, flow_objects, scrape
from dra_migrate.sim.kwok import _settled, addresses, node_manifest
from dra_migrate.sim.placement import LABEL_RULES
from dra_migrate.sim.spec import LABEL_DEVICE_PLUGIN, LABEL_DRA_KUBELET_PLUGIN, GpuNodeSpec
from dra_migrate.sim.stages import (
    A_DEVICES,
    A_DP,
    A_DP_RESOURCES,
    A_DRA,
    KWOK_NODE,
    NODE_CONDITIONS,
    node_annotations,
    stages,
)
from dra_migrate.sim.timing import REALISTIC, profile

ROOT = Path(__file__).resolve().parents[2]


def test_deploy_apf_yaml_is_the_objects_the_twin_tests() -> None:
    assert list(YAML(typ="safe").load_all((ROOT / "deploy" / "apf.yaml").read_text())) == flow_objects()


def test_stage_delays_are_the_profile_scaled() -> None:
    by_name = {s["metadata"]["name"]: s["spec"] for s in stages(profile("realistic", 0.1))}
    grace = by_name["device-plugin-gone"]["delay"]
    assert grace["durationMilliseconds"] == REALISTIC.capacity_grace_s * 100
    # jitter up to one status sync: kubelet posts at its next sync, somewhere in the period
    assert grace["jitterDurationMilliseconds"] == (REALISTIC.capacity_grace_s + REALISTIC.node_status_sync_s) * 100
    wipe = by_name["dra-plugin-stop"]["delay"]["durationMilliseconds"]
    assert wipe == (REALISTIC.plugin_exit_s + REALISTIC.slice_wipe_delay_s) * 100
    assert by_name["pod-start"]["delay"]["durationMilliseconds"] == REALISTIC.container_start_s * 100
    # the pod's grace period in ms, times the scale
    assert "* 100 |" in by_name["pod-kill"]["delay"]["durationFrom"]["jq"]["expression"]


def test_node_stages_exclude_each_other_in_priority_order() -> None:
    """KWOK picks at random among matching Stages: each node stage's selector rules out the earlier ones."""
    node = [s for s in stages(REALISTIC) if s["spec"]["resourceRef"]["kind"] == "Node"]
    names = [s["metadata"]["name"] for s in node]
    assert names[0] == "node-initialize" and names[-1] == "device-plugin-gone"
    assert names == [name for name, _ in NODE_CONDITIONS]
    for i, s in enumerate(node):
        (expr,) = s["spec"]["selector"]["matchExpressions"]
        key = expr["jq"]["key"]
        assert key.startswith(f"if ({NODE_CONDITIONS[i][1]})")
        assert all(f"(({earlier}) | not)" in key for _, earlier in NODE_CONDITIONS[:i])
        assert not any(f"(({later}) | not)" in key for _, later in NODE_CONDITIONS[i + 1 :])


def test_a_node_is_registered_with_what_its_stages_read() -> None:
    spec = GpuNodeSpec.small("n1", gpus=4, labels={LABEL_DEVICE_PLUGIN: "false"})
    node = node_manifest(spec, 3, fleet="f1")
    ann = node["metadata"]["annotations"]
    assert ann[KWOK_NODE] == "f1"
    assert json.loads(ann[A_DP_RESOURCES]) == {"nvidia.com/gpu": "4"}
    assert ann[A_DP] == "gone" and node["status"]["allocatable"]["nvidia.com/gpu"] == "0"  # plugin off at boot
    assert json.loads(ann[A_DEVICES]) == [d.to_json() for d in spec.devices]
    host_ip, cidr = addresses(3)
    assert node["spec"]["podCIDR"] == cidr and node["status"]["addresses"][0]["address"] == host_ip
    assert len({addresses(i) for i in range(10_000)}) == 10_000  # every node of a 10,000-node twin its own


def test_a_node_keeps_the_snapshots_provider_or_is_kwoks_not_a_clouds_by_its_pool_label() -> None:
    """A replayed GKE node stays GKE's; a spec that only carries a GKE pool label (every test node) is not
    taken for GKE, so platform rules (which can block a plan) do not fire on a test fleet."""
    replayed = replace(GpuNodeSpec.small("n1", gpus=1, pool="p"), provider_id="gce://proj/zone/n1")
    assert node_manifest(replayed)["spec"]["providerID"] == "gce://proj/zone/n1"
    assert which_platform(node_manifest(replayed)) == "gke"
    synthetic = node_manifest(GpuNodeSpec.small("n2", gpus=1, pool="p"))
    assert synthetic["spec"]["providerID"] == "kwok://n2" and which_platform(synthetic) == "generic"


def test_a_node_is_ready_for_a_test_once_kwok_runs_each_plugin_its_labels_place() -> None:
    """With no DaemonSet of the cluster's to follow, the toggle labels place the plugins (sim/placement.py)."""
    node = node_manifest(GpuNodeSpec.small("n1", gpus=1, labels={LABEL_DRA_KUBELET_PLUGIN: "true"}))
    assert not _settled(node, LABEL_RULES) and not _settled(None, LABEL_RULES)  # registered: not Ready yet
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert not _settled(node, LABEL_RULES), "Ready, but the DRA plugin its label places has not published yet"
    node["metadata"]["annotations"][A_DRA] = "running"
    assert _settled(node, LABEL_RULES)
    node["metadata"]["labels"][LABEL_DEVICE_PLUGIN] = "false"
    assert not _settled(node, LABEL_RULES), "the device plugin switched off, still running"
    node["metadata"]["annotations"][A_DP] = "stopped"
    assert _settled(node, LABEL_RULES)


def test_more_devices_than_one_slice_holds_is_refused() -> None:
    try:
        node_annotations({}, [{"name": f"d{i}"} for i in range(129)], True)
    except ValueError as e:
        assert "129 devices" in str(e)
    else:
        raise AssertionError("expected ValueError")


_METRICS = """# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",group="",resource="nodes",subresource="",verb="GET",version="v1"} 5
apiserver_request_total{code="200",group="",resource="nodes",subresource="status",verb="PATCH"} 3
apiserver_request_total{code="409",group="",resource="nodes",subresource="status",verb="PATCH"} 1
apiserver_request_duration_seconds_bucket{group="",resource="nodes",subresource="",verb="GET",le="0.005"} 400
apiserver_request_total_sum_of_something_else{verb="GET"} 1000
apiserver_flowcontrol_dispatched_requests_total{flow_schema="dra-migrate",priority_level="dra-migrate"} 7
apiserver_flowcontrol_dispatched_requests_total{flow_schema="global-default",priority_level="global-default"} 9
apiserver_flowcontrol_rejected_requests_total{flow_schema="dra-migrate",reason="queue-full"} 2
"""


class _Metrics:
    status = 200

    def read(self) -> bytes:
        return _METRICS.encode()


class _MetricsKube:
    def _send(self, *_args: object) -> _Metrics:
        return _Metrics()


def test_the_request_meter_counts_the_tools_flow_and_every_request_by_verb_and_resource() -> None:
    got = scrape(_MetricsKube())  # type: ignore[arg-type]
    assert got == {"tool": 7.0, "toolRejected": 2.0, "all": 9.0, f"{BY}GET nodes": 5.0, f"{BY}PATCH nodes/status": 4.0}
