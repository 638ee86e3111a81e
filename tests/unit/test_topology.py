"""Issue 24 item 7: partial-node multi-GPU consumers, `convert --topology`, and the topology finding."""

from __future__ import annotations

from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.checks.run import assess
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.inventory.model import build_inventory
from tests.unit.cli import run
from tests.unit.helpers import container, node, obj, pod_spec, resource_slice, state, template

GPU = "nvidia.com/gpu"
POOL = "cloud.google.com/gke-nodepool"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
RULE = "topology-preferred-allocation"


def gpu_node(name: str, n: int = 8, pool: str = "a100", **gfd: str) -> dict[str, Any]:
    labels = {POOL: pool, "nvidia.com/gpu.present": "true", **{f"nvidia.com/gpu.{k}": v for k, v in gfd.items()}}
    return node(name, labels, {GPU: str(n)} if n else None)


def deployment(name: str, *containers: dict[str, Any], replicas: int = 1, **spec: Any) -> dict[str, Any]:
    spec = {"replicas": replicas, "template": template(pod_spec(*containers, **spec))}
    return obj("apps/v1", "Deployment", name, spec)


def gpus(n: int, name: str = "main") -> dict[str, Any]:
    return container(name, limits={GPU: str(n)})


def topology(*objects: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in build_inventory(state(*objects)).to_dict()["topology"]}


def findings(*objects: dict[str, Any]) -> list[Any]:
    return [f for f in assess(state(*objects)).findings if f.id == RULE]


def gpu_device(i: int, root: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100-SXM4-40GB"}}
    if root:
        attrs[PCIE_ROOT] = {"string": root}
    return {"name": f"gpu-{i}", "attributes": attrs}


# --- inventory ---------------------------------------------------------------------------------------------


def test_a_container_asking_for_part_of_a_node_is_listed_with_its_count_and_node_size() -> None:
    got = topology(gpu_node("n1"), deployment("pair", gpus(2)), deployment("one", gpus(1)), deployment("all", gpus(8)))
    assert list(got) == ["pair"]  # 1 GPU has nothing to align; 8 of 8 takes the whole node
    assert got["pair"]["perContainer"] == 2
    assert got["pair"]["nodeGpus"] == [8]
    assert got["pair"]["largestPcieRoot"] is None  # no slices: unknown


def test_per_container_not_per_pod_counts() -> None:
    # Two containers of 1 GPU each: the device plugin allocates (and aligns) per container request.
    two_singles = deployment("singles", gpus(1, "a"), gpus(1, "b"))
    one_pair = deployment("pair", gpus(2, "a"), container("side"))
    assert list(topology(gpu_node("n1"), two_singles, one_pair)) == ["pair"]


def test_init_container_counts_too() -> None:
    d = deployment("warm", gpus(1), init=[gpus(4, "prep")])
    assert topology(gpu_node("n1"), d)["warm"]["perContainer"] == 4


def test_mig_and_time_sliced_are_not_aligned_by_the_device_plugin() -> None:
    mig = deployment("mig", container(limits={"nvidia.com/mig-1g.5gb": "2"}))
    n = node("m1", {"nvidia.com/gpu.present": "true"}, {"nvidia.com/mig-1g.5gb": "7"})
    assert topology(n, mig) == {}
    # GFD says replicas=4: time-slicing, the device plugin uses distributedAlloc.
    assert topology(gpu_node("t1", replicas="4"), deployment("ts", gpus(2))) == {}


def test_node_size_from_gfd_when_the_device_plugin_is_already_off() -> None:
    off = gpu_node("n1", n=0, count="8")
    assert topology(off, deployment("pair", gpus(2)))["pair"]["nodeGpus"] == [8]
    zeroed = node("n2", {POOL: "a100", "nvidia.com/gpu.count": "8"}, {GPU: "0"})  # the kubelet zeroed it
    assert topology(zeroed, deployment("pair", gpus(2)))["pair"]["nodeGpus"] == [8]


def test_live_slices_tell_gpus_per_pcie_root_and_nodes_without_it() -> None:
    hgx = resource_slice("n1", 1, [gpu_device(i, f"pci0000:{i // 2:02x}") for i in range(8)])
    bare = resource_slice("n2", 1, [gpu_device(i, None) for i in range(8)])
    got = topology(gpu_node("n1"), gpu_node("n2"), hgx, bare, deployment("quad", gpus(4)))
    assert got["quad"]["largestPcieRoot"] == 2
    assert got["quad"]["nodesWithoutPcieRoot"] == 1


# --- check -------------------------------------------------------------------------------------------------


def test_finding_names_the_consumer_and_what_it_loses() -> None:
    (f,) = findings(gpu_node("n1"), deployment("pair", gpus(2)), deployment("one", gpus(1)))
    assert [str(o) for o in f.objects] == ["Deployment ml/pair"]
    assert "2 of 8 nvidia.com/gpu per container" in f.message
    assert "--topology" in f.remediation


def test_no_finding_for_whole_node_or_single_gpu_consumers() -> None:
    assert findings(gpu_node("n1"), deployment("one", gpus(1)), deployment("all", gpus(8))) == []


def test_finding_warns_when_no_pcie_root_holds_that_many_gpus_or_none_is_published() -> None:
    hgx = resource_slice("n1", 1, [gpu_device(i, f"pci0000:{i // 2:02x}") for i in range(8)])
    (f,) = findings(gpu_node("n1"), hgx, deployment("quad", gpus(4)))
    assert "no PCIe root holds as many GPUs" in f.message
    bare = resource_slice("n1", 1, [gpu_device(i, None) for i in range(8)])
    (f,) = findings(gpu_node("n1"), bare, deployment("pair", gpus(2)))
    assert f"without {PCIE_ROOT}" in f.message


# --- convert --topology ------------------------------------------------------------------------------------

TABLE = TemplateTable.builtin()


def converted(text: str, **opts: Any) -> list[dict[str, Any]]:
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions(**opts))
    assert not result.problems
    return [d for d in YAML(typ="safe").load_all(out) if d]


def manifest(*counts: int, mig: bool = False) -> str:
    name = "nvidia.com/mig-1g.5gb" if mig else GPU
    cs = "".join(
        f"      - name: c{i}\n        image: img\n        resources:\n          limits:\n            {name}: {n}\n"
        for i, n in enumerate(counts)
    )
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: train\nspec:\n  template:\n    spec:\n"
        "      containers:\n" + cs
    )


def devices_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (rct,) = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    return rct["spec"]["spec"]["devices"]  # type: ignore[no-any-return]


def test_topology_adds_a_pcie_root_constraint_to_a_request_of_several_gpus() -> None:
    devices = devices_of(converted(manifest(4), topology=True))
    assert devices["constraints"] == [{"requests": ["gpu"], "matchAttribute": PCIE_ROOT}]
    assert "constraints" not in devices_of(converted(manifest(4)))  # off by default


@pytest.mark.parametrize("counts", [(1,), (1, 1)])
def test_topology_leaves_single_gpu_requests_alone(counts: tuple[int, ...]) -> None:
    assert "constraints" not in devices_of(converted(manifest(*counts), topology=True))


def test_topology_constrains_each_container_request_on_its_own() -> None:
    # The device plugin aligned each container's request; one root for both would ask more than it did.
    devices = devices_of(converted(manifest(2, 1, 2), topology=True))
    assert devices["constraints"] == [
        {"requests": ["c0"], "matchAttribute": PCIE_ROOT},
        {"requests": ["c2"], "matchAttribute": PCIE_ROOT},
    ]


def test_topology_leaves_mig_requests_alone() -> None:
    assert "constraints" not in devices_of(converted(manifest(2, mig=True), topology=True))


def test_topology_constraint_covers_every_first_available_alternative() -> None:
    devices = devices_of(converted(manifest(2), topology=True, fallback=("gpu-h100.nvidia.com",)))
    assert "firstAvailable" in devices["requests"][0]
    assert devices["constraints"] == [{"requests": ["gpu"], "matchAttribute": PCIE_ROOT}]


def test_cli_topology_flag(tmp_path: Any) -> None:
    f = tmp_path / "d.yaml"
    f.write_text(manifest(2))
    r = run("convert", "--topology", str(f))
    assert r.code == 0, r.stderr
    assert f"matchAttribute: {PCIE_ROOT}" in r.stdout
