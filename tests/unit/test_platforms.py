"""Platforms (issue 26): each platform fixture's inventory, findings and plan strategy, and a replace-pool
plan run on the fake cluster (new pool up, proven, big enough before the first drain; rollback uncordons)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.execute.actions import StepContext, run_step
from dra_migrate.execute.contract import StepFailed
from dra_migrate.execute.journal import Journal
from dra_migrate.execute.runner import OK, ApplyOptions, Runner
from dra_migrate.plan import io as plan_io
from dra_migrate.plan import validate
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Plan, PoolStage, PrepareStage, Step
from dra_migrate.plan.params import PlanParams
from dra_migrate.testing.execute import FakeClock, FakeNode, FakeOps

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "platforms"

# fixture -> {pool: (platform, stack owner, strategy)}, and the platform findings it must raise
EXPECTED: dict[str, tuple[dict[str, tuple[str, str, str]], set[str]]] = {
    "gke-managed": (
        {"a3-h100": ("gke", "platform", "replace-pool"), "l4-ts": ("gke", "platform", "replace-pool")},
        {"platform-sharing-unsupported", "platform-replace-pool", "autoscaler-dra-from-zero"},
    ),
    "eks-karpenter": (
        {"gpu-h100": ("eks", "platform", "replace-pool")},
        {"platform-replace-pool", "autoscaler-dra-from-zero", "replace-pool-pinned-workloads"},
    ),
    "eks-device-plugin": ({"p4d-a100": ("eks", "device-plugin-daemonset", "in-place")}, set()),
    # AWS runs Auto Mode's provisioner, which keeps a NodePool's spec.replicas natively: no DRA-from-zero warning.
    "eks-auto-mode": ({"gpu": ("eks", "platform", "replace-pool")}, {"platform-replace-pool"}),
    "aks-managed": (
        {"h100": ("aks", "platform", "replace-pool")},
        {"platform-replace-pool", "autoscaler-dra-from-zero", "replace-pool-pinned-workloads"},
    ),
    "openshift": (
        {
            f"ocp-ml-7xk2p-worker-gpu-{z}": ("openshift", "gpu-operator", "in-place")
            for z in ("us-east-1a", "us-east-1b")
        },
        set(),
    ),
}
PLATFORM_RULES = {
    "platform-sharing-unsupported",
    "platform-replace-pool",
    "autoscaler-dra-from-zero",
    "platform-plugin-conflict",
    "eks-auto-mode-dra-version",
    "replace-pool-pinned-workloads",
}


def _state(name: str) -> Any:
    return load_snapshot(FIXTURES / f"{name}.yaml")


def _plan(name: str, **params: Any) -> Plan:
    body = build_plan(_state(name), PlanParams(**params)).to_dict()
    assert validate.validate(body) == []
    return Plan.from_dict(plan_io.seal(validate.recompute(body)))


def test_the_generated_fixtures_are_current() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(FIXTURES / "make_platform_fixtures.py"), "--check"], check=False)
    assert done.returncode == 0


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_inventory_findings_and_strategy(name: str) -> None:
    pools, rules = EXPECTED[name]
    readiness = assess(_state(name))
    seen = {p.name: (p.platform.platform, p.platform.owner, p.platform.strategy) for p in readiness.inventory.pools
            if p.platform is not None}  # fmt: skip
    assert seen == pools
    assert {f.id for f in readiness.findings} & PLATFORM_RULES == rules
    plan = _plan(name)
    strategies = {s.pool: s.strategy for s in plan.stages if isinstance(s, PoolStage)}
    excluded = {x["pool"] for x in plan.summary["excludedNodes"]}
    if name == "eks-device-plugin":
        # NVIDIA's static manifest selects every node: no label switches it, so its nodes are left out (in place
        # would need a selector on the DaemonSet first) with the existing node-scoped blocker.
        assert excluded == {"p4d-a100"} and "device-plugin-placement-unknown" in {f.id for f in readiness.findings}
    assert strategies == {p: v[2] for p, v in pools.items() if p not in excluded}
    review = {r["pool"]: r["strategy"] for r in (plan.review or {})["strategies"]}
    assert review == {p: v[2] for p, v in pools.items()}
    for s in plan.stages:  # every replaced pool is provisioned right before it is drained
        if isinstance(s, PoolStage) and s.strategy == "replace-pool":
            before = plan.stages[plan.stages.index(s) - 1]
            assert isinstance(before, PrepareStage) and before.name == f"provision-{s.pool}"
            assert [st.action for st in before.steps] == ["await-pool", "canary-pool", "check-pool-capacity"]
            assert [st.action for st in s.node_steps][-2:] == ["cordon", "drain"]


def test_emitted_commands_carry_the_platforms_switches() -> None:
    gke = _plan("gke-managed", exclude_pools=("l4-ts",))
    cmd = next(s for s in gke.stages if s.name == "provision-a3-h100").steps[0].params["command"]
    assert "gcloud container node-pools create a3-h100-dra" in cmd
    assert "gpu-driver-version=disabled" in cmd and "gke-no-default-nvidia-gpu-device-plugin=true" in cmd
    karp = next(s for s in _plan("eks-karpenter").stages if s.name == "provision-gpu-h100").steps[0].params
    manifest = karp["manifest"]
    assert manifest["kind"] == "NodePool" and manifest["spec"]["replicas"] == 2
    assert manifest["spec"]["template"]["metadata"]["labels"]["nvidia.com/dra-kubelet-plugin"] == "true"
    # Not the old EC2NodeClass: it boots Bottlerocket with its device plugin on (tests/unit/test_eks_bottlerocket.py).
    assert manifest["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "bottlerocket-gpu-dra"
    karp_pool = next(s for s in _plan("eks-karpenter").stages if isinstance(s, PoolStage))
    assert karp_pool.node_steps[0].params == {"key": "karpenter.sh/do-not-disrupt", "value": "true"}
    aks = next(s for s in _plan("aks-managed").stages if s.name == "provision-h100").steps[0].params["command"]
    assert aks.startswith("az aks nodepool add --resource-group rg-ml --cluster-name aks-ml --name h100dra")


def _new_pool(ops: FakeOps, clock: FakeClock, *, nodes: int, devices: int, after_s: float) -> None:
    for i in range(nodes):
        ops.nodes[f"new-{i}"] = FakeNode(
            f"new-{i}", f"uid-new-{i}", labels={"cloud.google.com/gke-nodepool": "a3-h100-dra",
                                                "nvidia.com/dra-kubelet-plugin": "true"},
            devices=devices, appears_at=clock.monotonic() + after_s,
        )  # fmt: skip


def test_replace_pool_runs_then_rolls_back_on_the_fake_cluster(tmp_path: Path) -> None:
    plan = _plan("gke-managed", exclude_pools=("l4-ts",))
    clock = FakeClock()
    ops = FakeOps.for_plan(plan, clock)
    old = sorted(ops.nodes)
    _new_pool(ops, clock, nodes=2, devices=8, after_s=600)  # the gcloud command takes ten minutes
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="test", clock=clock).apply(ApplyOptions(soak_override_s=0), set())
    assert result.outcome == OK, result.failure
    key = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
    for n in old:
        assert ops.nodes[n].unschedulable and ops.nodes[n].annotations.get(key) == "true"
    calls = [op for op, _ in ops.calls]
    assert calls.index("wait_pool") < calls.index("canary") < calls.index("set_unschedulable")
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        undo = [s.id for _st, _w, n in plan.nodes() for s in plan.stages[-1].steps_for(n)][::-1]  # type: ignore[union-attr]
        back = Runner(plan, ops, j, actor="test", clock=clock).rollback(undo)
    assert back.ok, back.failure
    for n in old:
        assert not ops.nodes[n].unschedulable and key not in ops.nodes[n].annotations


def test_capacity_check_fails_before_any_drain() -> None:
    clock = FakeClock()
    ops = FakeOps([], clock=clock)
    _new_pool(ops, clock, nodes=1, devices=8, after_s=0)
    step = Step("provision-a3-h100/check-pool-capacity", "check-pool-capacity", "Pool a3-h100-dra",
                {"selector": {"cloud.google.com/gke-nodepool": "a3-h100-dra"}, "driver": "gpu.nvidia.com",
                 "devices": 12, "from": "Pool a3-h100"}, "", "1m", None)  # fmt: skip
    with pytest.raises(StepFailed, match=r"publishes 8 .* needs 12"):
        run_step(StepContext(ops, step, None, 60.0))
    _new_pool(ops, clock, nodes=2, devices=8, after_s=0)
    assert run_step(StepContext(ops, step, None, 60.0)) is not None


def test_await_pool_times_out_when_the_command_was_not_run(tmp_path: Path) -> None:
    plan = _plan("gke-managed", exclude_pools=("l4-ts",))
    clock = FakeClock()
    ops = FakeOps.for_plan(plan, clock)
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="test", clock=clock).apply(ApplyOptions(soak_override_s=0), set())
    assert not result.ok and "of 2 node(s) ready" in str(result.failure)
    assert not any(n.unschedulable for n in ops.nodes.values())  # nothing of the old pool was touched


def test_replace_pool_run_is_verified_by_the_new_pool(tmp_path: Path) -> None:
    from dra_migrate.execute.journal import read_journal
    from dra_migrate.report.model import verification

    plan = _plan("gke-managed", exclude_pools=("l4-ts",))
    clock = FakeClock()
    ops = FakeOps.for_plan(plan, clock)
    _new_pool(ops, clock, nodes=2, devices=8, after_s=0)
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        assert Runner(plan, ops, j, actor="test", clock=clock).apply(ApplyOptions(soak_override_s=0), set()).ok
    v = verification(plan, read_journal(tmp_path / "j.jsonl"))
    assert v.verdict == "verified" and {(n.wait_dra_ready, n.canary) for n in v.nodes} == {("ok", "ok")}


def test_the_new_pools_nodes_are_not_drift(tmp_path: Path) -> None:
    import copy

    from ruamel.yaml import YAML

    from dra_migrate.execute.session import _without_new_pools
    from dra_migrate.plan.drift import drift

    plan = _plan("gke-managed", exclude_pools=("l4-ts",))
    yaml = YAML()
    doc = yaml.load((FIXTURES / "gke-managed.yaml").read_text())
    template = next(o for o in doc["items"] if o["kind"] == "Node")
    for i in range(2):  # the nodes the emitted gcloud command makes
        n = copy.deepcopy(template)
        n["metadata"]["name"] = n["metadata"]["labels"]["kubernetes.io/hostname"] = f"gke-ml-prod-a3-h100-dra-{i}"
        n["metadata"]["uid"] = f"00000000-0000-0000-0000-00000000000{i}"
        n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] = "a3-h100-dra"
        n["metadata"]["labels"]["gke-no-default-nvidia-gpu-device-plugin"] = "true"
        doc["items"].append(n)
    with (tmp_path / "now.yaml").open("w") as f:
        yaml.dump(doc, f)
    now = load_snapshot(tmp_path / "now.yaml")
    d = drift(plan.to_dict(), now)
    assert {n["node"] for n in d.nodes_added} == {"gke-ml-prod-a3-h100-dra-0", "gke-ml-prod-a3-h100-dra-1"}
    assert _without_new_pools(d, plan, now).holds
    other = copy.deepcopy(plan.to_dict())  # a plan without the replace-pool stages still sees them as drift
    assert not _without_new_pools(d, Plan.from_dict(other | {"stages": other["stages"][:1]}), now).holds


def test_validate_refuses_a_replace_pool_plan_that_drains_before_the_new_pool_is_proven() -> None:
    import copy

    body = build_plan(_state("gke-managed"), PlanParams(exclude_pools=("l4-ts",))).to_dict()
    assert validate.validate(body) == []
    names = [s["name"] for s in body["stages"]]
    i = names.index("provision-a3-h100")

    swapped = copy.deepcopy(body)  # the drains first
    swapped["stages"][i], swapped["stages"][i + 1] = swapped["stages"][i + 1], swapped["stages"][i]
    assert any("must come right before" in p.message for p in validate.validate(swapped))

    unchecked = copy.deepcopy(body)  # no capacity check
    unchecked["stages"][i]["steps"].pop()
    assert any("in this order" in p.message for p in validate.validate(unchecked))

    unprotected = copy.deepcopy(body)  # the autoscaler's annotation dropped
    unprotected["stages"][i + 1]["nodeSteps"].pop(0)
    assert any("annotations the steps set" in p.message for p in validate.validate(unprotected))

    unknown = copy.deepcopy(body)
    unknown["stages"][i + 1]["strategy"] = "yolo"
    assert any("unknown strategy" in p.message for p in validate.validate(unknown))


def test_show_prints_the_platform_command_in_full_and_what_to_check_first() -> None:
    from dra_migrate.plan.outline import outline_of
    from dra_migrate.render.plan import plan_document

    doc = plan_document(outline_of(_plan("eks-karpenter")))
    text = doc.render("table", width=None)
    assert "run on the platform (eks): kubectl apply -f -" in text
    assert '"replicas": 2' in text and "check first: the old nodes run Bottlerocket OS 1.50.0" in text
    assert "protect: annotation karpenter.sh/do-not-disrupt=true" in text


def test_a_replaced_pools_old_kubelets_do_not_leave_its_nodes_out(tmp_path: Path) -> None:
    """In place, a 1.35 kubelet cannot serve DRA-backed nvidia.com/gpu (kubelet-version-unsupported leaves the
    node out); a replaced pool's nodes are only drained, the new pool's kubelets serve DRA."""
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load((FIXTURES / "gke-managed.yaml").read_text())
    for o in doc["items"]:
        if o["kind"] == "Node":
            o["status"]["nodeInfo"]["kubeletVersion"] = "v1.35.4"
    with (tmp_path / "old.yaml").open("w") as f:
        yaml.dump(doc, f)
    state = load_snapshot(tmp_path / "old.yaml")
    body = build_plan(state, PlanParams(exclude_pools=("l4-ts",))).to_dict()
    assert body["summary"]["excludedNodes"] == []
    assert body["summary"]["nodes"] == 2
    assert "kubelet-version-unsupported" not in {f["id"] for f in body["findings"]}


def test_the_karpenter_version_decides_what_the_autoscaler_finding_says() -> None:
    readiness = assess(_state("eks-karpenter"))
    finding = next(f for f in readiness.findings if f.id == "autoscaler-dra-from-zero")
    assert "Karpenter 1.8.1 cannot (before 1.15)" in finding.message
    assert "spec.replicas" in finding.remediation


def test_validate_refuses_a_malformed_provision_step() -> None:
    import copy

    body = build_plan(_state("gke-managed"), PlanParams(exclude_pools=("l4-ts",))).to_dict()
    i = [s["name"] for s in body["stages"]].index("provision-a3-h100")
    # The codec reads a step's shape (Step.from_dict) and stops at the first field it cannot read, so each
    # malformation is refused on its own, at its path.
    bad = copy.deepcopy(body)
    bad["stages"][i]["steps"][0]["timeout"] = "forever"
    [problem] = validate.validate(bad)
    assert "not a duration" in problem.message and problem.path == ("stages", i, "steps", 0, "timeout")
    bad = copy.deepcopy(body)
    del bad["stages"][i]["steps"][1]["inverse"]
    [problem] = validate.validate(bad)
    assert problem.message == "missing" and problem.path == ("stages", i, "steps", 1, "inverse")


@pytest.mark.parametrize(
    "provider, labels, platform",
    [
        ("gce://acme/us-central1-a/n1", {}, "gke"),
        ("", {"cloud.google.com/gke-nodepool": "a100"}, "gke"),  # no provider ID recorded: the label decides
        ("kwok://n1", {"cloud.google.com/gke-nodepool": "a100"}, "generic"),  # a copied pool label is no cloud
        ("aws:///us-east-1a/i-0abc", {"cloud.google.com/gke-nodepool": "a100"}, "eks"),
        ("azure:///subscriptions/s/vm-0", {}, "aks"),
    ],
)
def test_the_provider_id_decides_the_cloud_a_pool_label_only_without_one(
    provider: str, labels: dict[str, str], platform: str
) -> None:
    from dra_migrate.inventory.platform import which_platform

    node = {"metadata": {"name": "n1", "labels": labels}, "spec": {"providerID": provider} if provider else {}}
    assert which_platform(node) == platform
