"""LiveOps (dra_migrate/execute/ops.py) against the real control plane and simulated GPU nodes.

Every operation must be repeatable (a resumed run repeats the step it was in), must change nothing
under dry_run, and must fail with a message that names what blocks it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from nodes import TwinNodes, on_kwok

from dra_migrate.errors import ClusterError
from dra_migrate.execute.contract import StepFailed
from dra_migrate.execute.ops import LiveOps, live_ops
from dra_migrate.kube import Kube as CoreKube
from dra_migrate.kube import Unreachable
from dra_migrate.sim.kube import ApiError, Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import LABEL_DEVICE_PLUGIN, LABEL_DRA_KUBELET_PLUGIN, POOL_LABEL, GpuNodeSpec

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]
POOL = f"ops-{RUN}"
NODE_A = f"{POOL}-a"  # labels, cordon, drain
NODE_B = f"{POOL}-b"  # keeps its device plugin; where drained Deployment pods go
NODE_DRA = f"{POOL}-dra"  # switched to DRA
GPU = "nvidia.com/gpu"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
MAPPING_CLASS = f"ops-gpu-{RUN}"
PAUSE = "registry.k8s.io/pause:3.10"
MANAGED = {"app.kubernetes.io/managed-by": "dra-migrate"}


@pytest.fixture(scope="module")
def fleet(kwok: KwokFleet, kube: Kube) -> Iterator[TwinNodes]:
    specs = [
        GpuNodeSpec.small(NODE_A, gpus=4, pool=POOL),
        GpuNodeSpec.small(NODE_B, gpus=2, pool=POOL),
        GpuNodeSpec.small(NODE_DRA, gpus=2, pool=POOL),
    ]
    with on_kwok(kwok, specs) as f:
        wait_for("nodes schedulable", lambda: all(_schedulable(kube, n) for n in f.node_names), timeout=30)
        yield f


@pytest.fixture
def ops(control_plane: controlplane.ControlPlane, fleet: TwinNodes, namespace: str) -> Iterator[LiveOps]:
    built = live_ops(control_plane.kubeconfig, None)
    yield LiveOps(built.api, poll_s=0.2, canary_namespace=namespace)
    built.api.close()


@pytest.fixture(scope="module")
def mapping_class(control_plane: controlplane.ControlPlane, kube: Kube) -> Iterator[str]:
    """A DeviceClass serving nvidia.com/gpu from DRA devices; deleted at the end, as test_premise starts
    by asserting that no class maps nvidia.com/gpu."""
    ops = live_ops(control_plane.kubeconfig, None)
    try:
        ops.create_device_class(_class_manifest(MAPPING_CLASS, "gpu", GPU))
        yield MAPPING_CLASS
    finally:
        ops.delete_device_class(MAPPING_CLASS)
        kube.delete(f"{CLASSES}/{MAPPING_CLASS}")  # in case the label was lost; ours either way
        ops.api.close()


def _schedulable(kube: Kube, name: str) -> bool:
    node = kube.get(path_of("v1", "nodes", name))
    return int(node["status"].get("allocatable", {}).get(GPU, "0")) > 0 and not node["spec"].get("taints")


def _class_manifest(name: str, device_type: str, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selectors": [
            {
                "cel": {
                    "expression": f"device.driver == 'gpu.nvidia.com' && "
                    f"device.attributes['gpu.nvidia.com'].type == '{device_type}'"
                }
            }
        ]
    }
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def _pod(name: str, node: str | None, gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": PAUSE}
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}}
    selector = {"kubernetes.io/hostname": node} if node else {POOL_LABEL: f"{POOL}-nowhere"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"nodeSelector": selector, "containers": [container], "terminationGracePeriodSeconds": 0},
    }


def _create(kube: Kube, ns: str, plural: str, obj: dict[str, Any], api_version: str = "v1") -> None:
    kube.create(path_of(api_version, plural, namespace=ns), obj)


def _pods(kube: Kube, ns: str) -> list[dict[str, Any]]:
    items, _ = kube.list_all(path_of("v1", "pods", namespace=ns))
    return items


def _on(kube: Kube, ns: str, node: str) -> dict[str, dict[str, Any]]:
    """Running pods of the namespace on `node`, by name."""
    return {
        p["metadata"]["name"]: p
        for p in _pods(kube, ns)
        if p["spec"].get("nodeName") == node and p.get("status", {}).get("phase") == "Running"
    }


def _recorded(kube: Kube, node: str, *, but: frozenset[str] = frozenset()) -> set[str]:
    """The uids of every pod on the node, as a plan made now records those no controller owns (`reviewed`
    for the drain), less those named in `but`: made since. Earlier tests' pods may still be on the node."""
    items, _ = kube.list_all(path_of("v1", "pods"), [("fieldSelector", f"spec.nodeName={node}")])
    return {p["metadata"]["uid"] for p in items if p["metadata"]["name"] not in but}


def _switch_to_dra(ops: LiveOps, node: str) -> None:
    """What the plan's steps do; idempotent, so tests can share the switched node in any order."""
    ops.set_label(node, LABEL_DEVICE_PLUGIN, "false")
    ops.set_label(node, LABEL_DRA_KUBELET_PLUGIN, "true")
    ops.wait_dra_ready(node, [GPU], 2, 30)


# -- nodes ------------------------------------------------------------------------------------------


def test_labels_and_cordon_are_idempotent_and_reversible(ops: LiveOps, kube: Kube) -> None:
    key = f"ops.test/{RUN}"
    first = ops.set_label(NODE_A, key, "x")
    assert (first.before, first.after, first.dry_run) == ({"labels": {key: None}}, {"labels": {key: "x"}}, False)
    assert first.target == f"Node {NODE_A}"
    assert kube.get(path_of("v1", "nodes", NODE_A))["metadata"]["labels"][key] == "x"
    again = ops.set_label(NODE_A, key, "x")
    assert again.before == again.after == {"labels": {key: "x"}}
    removed = ops.set_label(NODE_A, key, None)
    assert removed.after == {"labels": {key: None}}
    assert key not in kube.get(path_of("v1", "nodes", NODE_A))["metadata"]["labels"]
    assert (r := ops.set_label(NODE_A, key, None)).before == r.after

    cordon = ops.set_unschedulable(NODE_A, True)
    assert (cordon.before, cordon.after) == ({"unschedulable": False}, {"unschedulable": True})
    assert ops.node_state(NODE_A)["unschedulable"] is True
    assert (c := ops.set_unschedulable(NODE_A, True)).before == c.after
    assert ops.set_unschedulable(NODE_A, False).after == {"unschedulable": False}
    assert (u := ops.set_unschedulable(NODE_A, False)).before == u.after

    state = ops.node_state(NODE_A)
    assert state["exists"] and state["ready"] and state["allocatable"] == {GPU: 4}
    assert ops.node_state(f"{POOL}-missing")["exists"] is False
    with pytest.raises(StepFailed, match="does not exist"):
        ops.set_label(f"{POOL}-missing", key, "x")


def test_dry_run_changes_nothing(ops: LiveOps, kube: Kube, namespace: str) -> None:
    key = f"ops.test/dry-{RUN}"
    change = ops.set_label(NODE_A, key, "y", dry_run=True)
    assert (change.after, change.dry_run) == ({"labels": {key: "y"}}, True)
    assert ops.set_unschedulable(NODE_A, True, dry_run=True).after == {"unschedulable": True}
    node = kube.get(path_of("v1", "nodes", NODE_A))
    assert key not in node["metadata"]["labels"] and not node["spec"].get("unschedulable")

    name = f"ops-dry-{RUN}"
    created = ops.create_device_class(_class_manifest(name, "gpu"), dry_run=True)
    assert created.dry_run and created.after["exists"] is True and created.before == {"exists": False}
    assert kube.get_or_none(f"{CLASSES}/{name}") is None

    _create(kube, namespace, "pods", _pod("dry", NODE_A, 1))
    wait_for("pod running", lambda: "dry" in _on(kube, namespace, NODE_A), timeout=30)
    drained = ops.drain(NODE_A, "gpu", 10, dry_run=True, reviewed=_recorded(kube, NODE_A))
    assert drained.dry_run and f"{namespace}/dry" in drained.before["pods"] and drained.after == {"pods": []}
    assert "dry" in _on(kube, namespace, NODE_A)

    canary = ops.canary(NODE_A, GPU, PAUSE, 10, dry_run=True)
    assert canary.dry_run and canary.after["node"] == NODE_A
    assert [p["metadata"]["name"] for p in _pods(kube, namespace)] == ["dry"]


def test_permanent_api_errors_quote_the_server(ops: LiveOps) -> None:
    with pytest.raises(ClusterError, match="Invalid value") as err:
        ops.set_label(NODE_A, "ops.test/bad", "not a valid value!")
    assert isinstance(err.value, ApiError) and err.value.status == 422


# -- a node's field with the watched copy: one conditional write (ops._write_if_unchanged) ---------------


@pytest.fixture
def watching(ops: LiveOps) -> Iterator[LiveOps]:
    ops.watch()
    yield ops
    ops.unwatch()


def _copy_shows(ops: LiveOps, node: str, check: Any) -> None:
    watched = ops.watched
    assert watched is not None
    wait_for("the watched copy to catch up", lambda: (obj := watched.node(node)) is not None and check(obj), timeout=10)


def _sent(ops: LiveOps, write: Any) -> tuple[Any, int]:
    """`write()` and the requests it sent (the informers' watches, on the same client, not counted)."""
    sent: list[str] = []
    request = ops.kube.request

    def counted(method: str, path: str, **kwargs: Any) -> Any:
        sent.append(f"{method} {path}")
        return request(method, path, **kwargs)

    ops.kube.request = counted  # type: ignore[method-assign]
    try:
        return write(), len(sent)
    finally:
        del ops.kube.request


def test_a_watched_nodes_field_is_one_write_whose_before_is_what_it_replaced(watching: LiveOps, kube: Kube) -> None:
    key = f"ops.test/cond-{RUN}"
    node = lambda: kube.get(path_of("v1", "nodes", NODE_A))  # noqa: E731
    _copy_shows(watching, NODE_A, lambda n: key not in n["metadata"]["labels"])
    added, sent = _sent(watching, lambda: watching.set_label(NODE_A, key, "x"))  # tests the key is absent
    assert (added.before, added.after, sent) == ({"labels": {key: None}}, {"labels": {key: "x"}}, 1)
    _copy_shows(watching, NODE_A, lambda n: n["metadata"]["labels"].get(key) == "x")
    changed, sent = _sent(watching, lambda: watching.set_label(NODE_A, key, "y"))
    assert (changed.before, changed.after, sent) == ({"labels": {key: "x"}}, {"labels": {key: "y"}}, 1)
    _copy_shows(watching, NODE_A, lambda n: n["metadata"]["labels"].get(key) == "y")  # else: a lagging copy
    dry, sent = _sent(watching, lambda: watching.set_label(NODE_A, key, None, dry_run=True))
    assert (dry.before, dry.after, sent) == ({"labels": {key: "y"}}, {"labels": {key: None}}, 1)
    assert node()["metadata"]["labels"][key] == "y"  # the dry run wrote nothing
    removed, sent = _sent(watching, lambda: watching.set_label(NODE_A, key, None))
    assert (removed.before, removed.after, sent) == ({"labels": {key: "y"}}, {"labels": {key: None}}, 1)
    assert key not in node()["metadata"]["labels"]

    _copy_shows(watching, NODE_A, lambda n: "unschedulable" not in n["spec"])  # absent: tests null
    cordon, sent = _sent(watching, lambda: watching.set_unschedulable(NODE_A, True))
    assert (cordon.before, cordon.after, sent) == ({"unschedulable": False}, {"unschedulable": True}, 1)
    _copy_shows(watching, NODE_A, lambda n: n["spec"].get("unschedulable") is True)
    uncordon, sent = _sent(watching, lambda: watching.set_unschedulable(NODE_A, False))
    assert (uncordon.before, uncordon.after, sent) == ({"unschedulable": True}, {"unschedulable": False}, 1)
    assert not node()["spec"].get("unschedulable")


@pytest.mark.parametrize(
    ("server", "copy", "goal"),
    [
        ("server", "stale", "new"),  # the copy lags a change: the test of its value fails
        ("server", None, "new"),  # the copy lacks a key the server has: the test of absence fails
        ("server", "stale", None),  # removing: the value recorded for the inverse is the server's
        ("old", "new", "new"),  # the copy shows the goal: "already done" is believed only from a read
    ],
)
def test_a_stale_watched_copy_never_records_a_wrong_before(
    watching: LiveOps, kube: Kube, monkeypatch: pytest.MonkeyPatch, server: str, copy: str | None, goal: str | None
) -> None:
    """The copy is made stale by hand (a watch's lag cannot be timed); the API server judges the test."""
    key = f"ops.test/stale-{RUN}"
    kube.merge_patch(path_of("v1", "nodes", NODE_A), {"metadata": {"labels": {key: server}}})
    real = kube.get(path_of("v1", "nodes", NODE_A))
    stale = {**real, "metadata": {**real["metadata"], "labels": {**real["metadata"]["labels"], key: copy}}}
    if copy is None:
        del stale["metadata"]["labels"][key]
    assert watching.watched is not None
    monkeypatch.setattr(watching.watched, "node", lambda name: stale if name == NODE_A else None)
    change = watching.set_label(NODE_A, key, goal)
    assert (change.before, change.after) == ({"labels": {key: server}}, {"labels": {key: goal}})
    assert kube.get(path_of("v1", "nodes", NODE_A))["metadata"]["labels"].get(key) == goal
    kube.merge_patch(path_of("v1", "nodes", NODE_A), {"metadata": {"labels": {key: None}}})


def test_a_stale_copy_of_a_cordon_reads_the_node_and_writes_nothing(
    watching: LiveOps, kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube.merge_patch(path_of("v1", "nodes", NODE_A), {"spec": {"unschedulable": True}})
    try:
        real = kube.get(path_of("v1", "nodes", NODE_A))
        stale = {**real, "spec": {k: v for k, v in real["spec"].items() if k != "unschedulable"}}
        assert watching.watched is not None
        monkeypatch.setattr(watching.watched, "node", lambda name: stale)
        change, sent = _sent(watching, lambda: watching.set_unschedulable(NODE_A, True))
        assert change.before == change.after == {"unschedulable": True}
        assert sent == 2  # the refused conditional write and the read; no write after it
    finally:
        kube.merge_patch(path_of("v1", "nodes", NODE_A), {"spec": {"unschedulable": False}})


# -- drain ------------------------------------------------------------------------------------------


def test_drain_evicts_gpu_pods_and_skips_daemonset_pods(ops: LiveOps, kube: Kube, namespace: str) -> None:
    # A Deployment preferring NODE_A that may also run on NODE_B, a bare GPU pod, a CPU pod, and a
    # DaemonSet pod that requests a GPU: kubectl drain's filters skip the last one whatever it requests.
    selector = {"app": "trainer"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_A, NODE_B]}
                        ]
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_A]}]
                    },
                }
            ],
        }
    }
    template = _pod("", None, 1, selector)
    template["spec"].pop("nodeSelector")
    template["spec"]["affinity"] = affinity
    _create(
        kube,
        namespace,
        "deployments",
        {
            "metadata": {"name": "trainer"},
            "spec": {"replicas": 1, "selector": {"matchLabels": selector}, "template": template},
        },
        "apps/v1",
    )
    ds_template = _pod("", NODE_A, 1, {"app": "agent"})
    _create(
        kube,
        namespace,
        "daemonsets",
        {
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": ds_template},
        },
        "apps/v1",
    )
    _create(kube, namespace, "pods", _pod("bare-gpu", NODE_A, 1))
    _create(kube, namespace, "pods", _pod("cpu-only", NODE_A, 0))

    def placed() -> dict[str, dict[str, Any]] | None:
        on_a = _on(kube, namespace, NODE_A)
        names = set(on_a)
        ok = {"bare-gpu", "cpu-only"} <= names and any(n.startswith("trainer-") for n in names)
        return on_a if ok and any(n.startswith("agent-") for n in names) else None

    on_a = wait_for("pods running on node a", placed, timeout=30)
    trainer = next(p for n, p in on_a.items() if n.startswith("trainer-"))
    agent = next(n for n in on_a if n.startswith("agent-"))
    bare = _recorded(kube, NODE_A)  # bare-gpu and cpu-only among them, as a plan records them

    ops.set_unschedulable(NODE_A, True)
    try:
        change = ops.drain(NODE_A, "gpu", 30, reviewed=bare)
        # Only this test's pods: an earlier test's namespace may still be going away.
        ours = [p for p in change.before["pods"] if p.startswith(f"{namespace}/")]
        assert ours == sorted([f"{namespace}/bare-gpu", f"{namespace}/{trainer['metadata']['name']}"])
        assert change.after == {"pods": []}
        # drain returns once the evicted pods are gone from the node.
        after = {p["metadata"]["name"]: p for p in _pods(kube, namespace) if p["spec"].get("nodeName") == NODE_A}
        assert set(after) == {agent, "cpu-only"}
        assert kube.get_or_none(path_of("v1", "pods", "bare-gpu", namespace)) is None

        def replaced() -> dict[str, Any] | None:
            new = [
                p
                for p in _pods(kube, namespace)
                if p["metadata"]["name"].startswith("trainer-") and p["metadata"]["uid"] != trainer["metadata"]["uid"]
            ]
            return new[0] if new else None

        replacement = wait_for("the Deployment's replacement pod", replaced, timeout=20)
        assert replacement["spec"].get("nodeName") in (None, NODE_B)

        # Resumed: nothing left to evict.
        again = ops.drain(NODE_A, "gpu", 10)
        assert again.before == again.after == {"pods": []}

        everything = ops.drain(NODE_A, "all", 30, reviewed=bare)
        assert everything.before == {"pods": [f"{namespace}/cpu-only"]}
        assert set(_on(kube, namespace, NODE_A)) == {agent}
    finally:
        ops.set_unschedulable(NODE_A, False)


def test_drain_blocked_by_a_disruption_budget_names_it(ops: LiveOps, kube: Kube, namespace: str) -> None:
    pdb = f"keep-{RUN}"
    _create(kube, namespace, "pods", _pod("guarded", NODE_A, 1, {"app": "guarded"}))
    _create(
        kube,
        namespace,
        "poddisruptionbudgets",
        {"metadata": {"name": pdb}, "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}}},
        "policy/v1",
    )
    wait_for("pod running", lambda: "guarded" in _on(kube, namespace, NODE_A), timeout=30)
    seen = _recorded(kube, NODE_A)

    started = time.monotonic()
    with pytest.raises(StepFailed) as err:
        ops.drain(NODE_A, "gpu", 4, reviewed=seen)
    elapsed = time.monotonic() - started
    assert 4 <= elapsed < 12, elapsed
    assert f"{namespace}/{pdb}" in str(err.value) and f"{namespace}/guarded" in str(err.value)
    assert err.value.details == {"budgets": [f"{namespace}/{pdb}"], "pods": [f"{namespace}/guarded"]}
    assert "guarded" in _on(kube, namespace, NODE_A)

    # A dry run reports the same block at once.
    started = time.monotonic()
    with pytest.raises(StepFailed, match=pdb):
        ops.drain(NODE_A, "gpu", 30, dry_run=True, reviewed=seen)
    assert time.monotonic() - started < 5


def test_drain_deletes_no_pod_without_a_controller_that_the_plan_did_not_record(
    ops: LiveOps, kube: Kube, namespace: str
) -> None:
    """kubectl drain refuses such pods without --force: nothing recreates them. The plan listed the ones it
    saw (finding `unmanaged-gpu-pod`); one made since (a notebook started while a long apply runs) stops the
    drain before anything on the node is evicted, and is named."""
    _create(kube, namespace, "pods", _pod("seen", NODE_A, 1))
    _create(kube, namespace, "pods", _pod("made-since", NODE_A, 1))

    def both_running() -> dict[str, dict[str, Any]] | None:
        on_a = _on(kube, namespace, NODE_A)
        return on_a if on_a.keys() >= {"seen", "made-since"} else None

    wait_for("pods running", both_running, timeout=30)
    seen = _recorded(kube, NODE_A, but=frozenset({"made-since"}))
    ops.set_unschedulable(NODE_A, True)
    try:
        for dry_run in (True, False):
            with pytest.raises(StepFailed) as err:
                ops.drain(NODE_A, "gpu", 10, dry_run=dry_run, reviewed=seen)
            assert f"{namespace}/made-since" in str(err.value) and f"{namespace}/seen" not in str(err.value)
            assert err.value.details == {"budgets": [], "pods": [f"{namespace}/made-since"]}
            assert "kubectl delete pod" in err.value.hint
            assert _on(kube, namespace, NODE_A).keys() >= {"seen", "made-since"}  # nothing evicted
        # apply --delete-unowned-pods: any may go, as with kubectl drain --force.
        change = ops.drain(NODE_A, "gpu", 30, reviewed=None)
        assert {f"{namespace}/seen", f"{namespace}/made-since"} <= set(change.before["pods"])
        assert not {"seen", "made-since"} & set(_on(kube, namespace, NODE_A))
    finally:
        ops.set_unschedulable(NODE_A, False)


def test_drain_takes_a_gpu_pod_bound_to_the_node_after_its_list(ops: LiveOps, kube: Kube, namespace: str) -> None:
    """A pod bound to the cordoned node after the drain listed its pods (a scheduler cycle that began before
    it saw the cordon; here bound directly, as that late binding lands) would keep a device-plugin GPU that
    the DRA driver then publishes: the drain lists the node again and takes it too."""
    first = _pod("first", None, 1)
    first["metadata"]["finalizers"] = ["dra-migrate.io/test-hold"]  # the drain waits on it while the late pod lands
    first["spec"].pop("nodeSelector")
    first["spec"]["nodeName"] = NODE_A
    late = _pod("late", None, 1)
    late["spec"].pop("nodeSelector")
    late["spec"]["nodeName"] = NODE_A  # bound, as a binding the cordon came too late for
    _create(kube, namespace, "pods", first)
    wait_for("first running", lambda: "first" in _on(kube, namespace, NODE_A), timeout=30)
    seen = _recorded(kube, NODE_A)
    ops.set_unschedulable(NODE_A, True)
    path = path_of("v1", "pods", "first", namespace)

    def land_late_pod_then_release() -> None:
        wait_for("first evicted", lambda: kube.get(path)["metadata"].get("deletionTimestamp") or None, timeout=20)
        made = kube.create(path_of("v1", "pods", namespace=namespace), late)
        seen.add(made["metadata"]["uid"])  # owned by nobody: recorded, as if the plan had seen it
        kube.merge_patch(path, {"metadata": {"finalizers": None}})

    helper = threading.Thread(target=land_late_pod_then_release)
    helper.start()
    try:
        change = ops.drain(NODE_A, "gpu", 30, reviewed=seen)
        helper.join()
        assert {f"{namespace}/first", f"{namespace}/late"} <= set(change.before["pods"])
        assert kube.get_or_none(path_of("v1", "pods", "late", namespace)) is None
    finally:
        helper.join()
        ops.set_unschedulable(NODE_A, False)


# -- DRA readiness, canary --------------------------------------------------------------------------


def test_wait_dra_ready(ops: LiveOps, kube: Kube, fleet: TwinNodes) -> None:
    if ops.node_state(NODE_DRA)["allocatable"].get(GPU):  # not switched yet by another test
        started = time.monotonic()
        with pytest.raises(StepFailed) as err:
            ops.wait_dra_ready(NODE_DRA, [GPU], 2, 1)
        assert time.monotonic() - started < 5
        message = str(err.value)
        assert f"allocatable {GPU} is still 2" in message
        assert "hold 0 device(s), expected 2" in message
    _switch_to_dra(ops, NODE_DRA)
    ready = ops.wait_dra_ready(NODE_DRA, [GPU], 2, 5)
    assert ready.before == ready.after
    assert ready.after == {"allocatable": {GPU: 0}, "driver": "gpu.nvidia.com", "devices": 2}
    with pytest.raises(StepFailed, match=r"hold 2 device\(s\), expected 3") as missing:
        ops.wait_dra_ready(NODE_DRA, [GPU], 3, 1)
    assert missing.value.details["devices"] == 2
    assert ops.dra_driver_installed("gpu.nvidia.com")


def test_canary_gets_a_dra_allocation(ops: LiveOps, kube: Kube, namespace: str, mapping_class: str) -> None:
    _switch_to_dra(ops, NODE_DRA)
    ops.set_unschedulable(NODE_DRA, True)  # the plan runs the canary before it uncordons
    try:
        change = ops.canary(NODE_DRA, GPU, PAUSE, 30)
    finally:
        ops.set_unschedulable(NODE_DRA, False)
    assert change.after["node"] == NODE_DRA and change.after["claim"]
    assert change.after["devices"] == [
        {"driver": "gpu.nvidia.com", "pool": NODE_DRA, "device": change.after["devices"][0]["device"]}
    ]
    assert _pods(kube, namespace) == []


def test_canary_fails_on_a_device_plugin_node(ops: LiveOps, kube: Kube, namespace: str, mapping_class: str) -> None:
    with pytest.raises(StepFailed, match="served by the device plugin, not DRA"):
        ops.canary(NODE_B, GPU, PAUSE, 30)
    assert _pods(kube, namespace) == []


def test_canary_not_scheduled_says_why(ops: LiveOps, kube: Kube, namespace: str) -> None:
    with pytest.raises(StepFailed, match="was not scheduled") as err:
        ops.canary(NODE_DRA, "nvidia.com/mig-1g.10gb", PAUSE, 3)
    assert "mig-1g.10gb" in err.value.details["scheduler"] or "node" in err.value.details["scheduler"]
    assert _pods(kube, namespace) == []


# -- DeviceClasses and reads ------------------------------------------------------------------------


def test_a_canary_the_namespace_refuses_is_found_by_a_dry_run_that_creates_nothing(
    ops: LiveOps, kube: Kube, namespace: str
) -> None:
    """The runner asks this before a wave's first cordon (runner `_canaries_admitted`): a ResourceQuota with no
    room for the canary's GPU refuses it at creation, which used to be found only at the first node's canary,
    after the whole wave was drained and switched."""
    admitted = ops.canary(NODE_DRA, GPU, PAUSE, 10, dry_run=True)
    assert admitted.dry_run
    _quota(kube, namespace, "no-gpus", {f"requests.{GPU}": "0"})
    with pytest.raises(ClusterError, match="exceeded quota") as err:
        ops.canary(NODE_DRA, GPU, PAUSE, 10, dry_run=True)
    assert getattr(err.value, "status", None) == 403
    assert not [p for p in _pods(kube, namespace) if p["metadata"]["name"].startswith("dra-migrate-canary-")]


def test_the_canary_runs_under_pod_security_restricted_and_a_cpu_memory_quota(
    ops: LiveOps, kube: Kube, namespace: str, mapping_class: str
) -> None:
    """The API server's own Pod Security admission (k8s.io/pod-security-admission, level restricted) and quota
    admission (pods must request what a quota on cpu/memory limits) admit the canary, and the scheduler's claim
    for its GPU too: both refused it before (root, no seccomp profile, no cpu/memory). A quota with no room for
    that claim is met by no pod admission: the dry run names it from the namespace's quotas."""
    kube.merge_patch(
        path_of("v1", "namespaces", namespace),
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    _quota(kube, namespace, "compute", {"requests.cpu": "2", "limits.cpu": "2", "requests.memory": "2Gi",
                                        "limits.memory": "2Gi"})  # fmt: skip
    assert ops.canary(NODE_DRA, GPU, PAUSE, 10, dry_run=True).dry_run
    _switch_to_dra(ops, NODE_DRA)
    ops.set_unschedulable(NODE_DRA, True)
    try:
        change = ops.canary(NODE_DRA, GPU, PAUSE, 30)
    finally:
        ops.set_unschedulable(NODE_DRA, False)
    assert change.after["claim"]
    _quota(kube, namespace, "claims", {"count/resourceclaims.resource.k8s.io": "0"})
    with pytest.raises(ClusterError, match=f"ResourceQuota {namespace}/claims"):
        ops.canary(NODE_DRA, GPU, PAUSE, 10, dry_run=True)


def _quota(kube: Kube, namespace: str, name: str, hard: dict[str, str]) -> None:
    kube.create(path_of("v1", "resourcequotas", namespace=namespace),
                {"metadata": {"name": name}, "spec": {"hard": hard}})  # fmt: skip


def test_device_classes_are_created_once_and_only_ours_deleted(ops: LiveOps, kube: Kube) -> None:
    name, foreign = f"ops-mig-{RUN}", f"ops-foreign-{RUN}"
    try:
        created = ops.create_device_class(_class_manifest(name, "mig"))
        assert (created.before, created.after["exists"]) == ({"exists": False}, True)
        stored = kube.get(f"{CLASSES}/{name}")
        assert stored["metadata"]["labels"] == MANAGED
        again = ops.create_device_class(_class_manifest(name, "mig"))
        assert again.before == again.after
        with pytest.raises(StepFailed, match="different spec"):
            ops.create_device_class(_class_manifest(name, "gpu"))
        assert kube.get(f"{CLASSES}/{name}")["spec"] == stored["spec"]

        assert ops.delete_device_class(name, dry_run=True).after == {"exists": False}
        assert kube.get_or_none(f"{CLASSES}/{name}") is not None
        assert ops.delete_device_class(name).after == {"exists": False}
        assert kube.get_or_none(f"{CLASSES}/{name}") is None
        assert (gone := ops.delete_device_class(name)).before == gone.after

        kube.create(CLASSES, _class_manifest(foreign, "gpu"))
        kept = ops.delete_device_class(foreign)
        assert kept.before == kept.after and kept.after["managedBy"] is None
        assert kube.get_or_none(f"{CLASSES}/{foreign}") is not None
    finally:
        kube.delete(f"{CLASSES}/{name}")
        kube.delete(f"{CLASSES}/{foreign}")


def test_pending_gpu_pods(ops: LiveOps, kube: Kube, namespace: str) -> None:
    _create(kube, namespace, "pods", _pod("stuck", None, 1))
    _create(kube, namespace, "pods", _pod("stuck-cpu", None, 0))
    wait_for("pending GPU pod listed", lambda: f"{namespace}/stuck" in ops.pending_gpu_pods(0.5), timeout=10)
    listed = ops.pending_gpu_pods(0.5)
    assert f"{namespace}/stuck-cpu" not in listed
    assert f"{namespace}/stuck" not in ops.pending_gpu_pods(3600)
    # The backlog as apply's first run records it: the newest unscheduled GPU pod's creationTimestamp, as the
    # API server wrote it; the gate leaves out every pod created up to then, and judges one made after.
    pods, upto = ops.pending_gpu_backlog()
    stuck = kube.get(path_of("v1", "pods", "stuck", namespace))
    assert pods >= 1 and upto is not None and upto >= stuck["metadata"]["creationTimestamp"], (pods, upto)
    assert f"{namespace}/stuck" not in ops.pending_gpu_pods(0.5, created_after=upto)
    time.sleep(1.1)  # creationTimestamp has whole seconds: a later pod is a later second
    _create(kube, namespace, "pods", _pod("stuck-later", None, 1))
    later = f"{namespace}/stuck-later"
    wait_for("the later pod judged", lambda: later in ops.pending_gpu_pods(0.5, created_after=upto), timeout=10)


# -- retries ----------------------------------------------------------------------------------------


class _Response:
    def __init__(self, status: int, body: bytes = b"{}") -> None:
        self.status, self.body, self.headers = status, body, {"Retry-After": "0"} if status == 429 else {}

    def read(self) -> bytes:
        return self.body


class _FlakyClient:
    """Answers with the given outcomes in turn (an exception is raised, a status returned)."""

    class configuration:  # mimics ApiClient.configuration
        host = "https://flaky.invalid"

    def __init__(self, outcomes: list[int | Exception]) -> None:
        self.outcomes = outcomes
        self.calls = 0

    def param_serialize(self, **kw: Any) -> tuple[str, str, dict[str, str], Any, None]:
        return kw["method"], kw["resource_path"], kw["header_params"], kw["body"], None

    def call_api(self, method: str, url: str, **kw: Any) -> _Response:
        outcome = self.outcomes[min(self.calls, len(self.outcomes) - 1)]
        self.calls += 1
        if isinstance(outcome, Exception):
            raise outcome
        return _Response(outcome, b'{"kind": "Status", "message": "nope"}' if outcome >= 400 else b'{"ok": 1}')


def test_transient_errors_are_retried_and_permanent_ones_are_not() -> None:
    from urllib3.exceptions import ProtocolError

    flaky = _FlakyClient([503, ProtocolError("Connection aborted.", ConnectionResetError()), 429, 200])
    assert CoreKube(flaky, retries=4, backoff_s=0.01).get("/api/v1/nodes") == {"ok": 1}
    assert flaky.calls == 4

    forbidden = _FlakyClient([403, 200])
    with pytest.raises(ApiError, match="nope") as err:
        CoreKube(forbidden, retries=4, backoff_s=0.01).get("/api/v1/nodes")
    assert (err.value.status, forbidden.calls) == (403, 1)

    down = _FlakyClient([ConnectionRefusedError("refused")])
    with pytest.raises(Unreachable, match=r"flaky\.invalid"):
        CoreKube(down, retries=2, backoff_s=0.01).get("/api/v1/nodes")
    assert down.calls == 3


# -- replace-pool (plan/strategies.py): what only a real API server shows -----------------------------


def test_annotations_are_idempotent_and_null_removes_them(ops: LiveOps, kube: Kube) -> None:
    key = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
    first = ops.set_annotation(NODE_B, key, "true")
    assert first.before == {"annotations": {key: None}} and first.after == {"annotations": {key: "true"}}
    assert ops.set_annotation(NODE_B, key, "true").before == first.after  # repeated: nothing changes
    dry = ops.set_annotation(NODE_B, key, None, dry_run=True)
    assert dry.dry_run and key in kube.get(path_of("v1", "nodes", NODE_B))["metadata"]["annotations"]
    ops.set_annotation(NODE_B, key, None)  # the inverse: a merge patch with null removes it
    assert key not in (kube.get(path_of("v1", "nodes", NODE_B))["metadata"].get("annotations") or {})


def test_pool_nodes_and_wait_pool_read_the_label_selector_and_the_slices(ops: LiveOps) -> None:
    _switch_to_dra(ops, NODE_DRA)
    seen = {n["name"]: n for n in ops.pool_nodes({POOL_LABEL: POOL})}
    assert set(seen) == {NODE_A, NODE_B, NODE_DRA}
    assert seen[NODE_DRA]["devices"] == 2 and seen[NODE_DRA]["ready"]
    assert seen[NODE_B]["devices"] == 0  # still on the device plugin: no slices
    new_pool = {POOL_LABEL: POOL, LABEL_DRA_KUBELET_PLUGIN: "true"}
    assert ops.wait_pool(new_pool, 1, 2, 30).after == {"nodes": [NODE_DRA]}
    with pytest.raises(StepFailed, match="1 of 2 node"):
        ops.wait_pool(new_pool, 2, 2, 1.0)
