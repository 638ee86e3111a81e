"""Gangs as the upstream controllers really make their pods: owner chains, labels, one gang per group."""

from __future__ import annotations

from typing import Any

from dra_migrate.inventory.model import build_inventory
from tests.unit.helpers import container, obj, pod, pod_spec, template
from tests.unit.test_checks import GPU, gpu_node, make

LWS_API = "leaderworkerset.x-k8s.io/v1"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"


def _lws(name: str, groups: int, size: int, gpus: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A LeaderWorkerSet and what its controller makes (lws v0.5.0): a leader StatefulSet it owns, whose pods
    are the leaders; per leader pod a worker StatefulSet the leader *pod* controls
    (pkg/controllers/pod_controller.go:148 setControllerReferenceWithStatefulSet(&pod, ...)), whose pods are
    the workers. Every pod carries the group index label."""
    ps = pod_spec(container(requests={GPU: gpus}))
    lws = obj(
        LWS_API,
        "LeaderWorkerSet",
        name,
        {"replicas": groups, "leaderWorkerTemplate": {"size": size, "workerTemplate": template(ps)}},
    )
    leader_sts = obj("apps/v1", "StatefulSet", name, {"replicas": groups, "template": template(ps)}, owner=lws)
    out = [leader_sts]
    node = 0
    for g in range(groups):
        leader = pod(f"{name}-{g}", ps, owner=leader_sts, node=f"n{node}")
        leader["metadata"]["labels"] = {GROUP_INDEX: str(g), "leaderworkerset.sigs.k8s.io/name": name}
        node += 1
        worker_sts = obj(
            "apps/v1", "StatefulSet", f"{name}-{g}", {"replicas": size - 1, "template": template(ps)}, owner=leader
        )
        out += [leader, worker_sts]
        for w in range(1, size):
            p = pod(f"{name}-{g}-{w}", ps, owner=worker_sts, node=f"n{node}")
            p["metadata"]["labels"] = {GROUP_INDEX: str(g), "leaderworkerset.sigs.k8s.io/name": name}
            node += 1
            out.append(p)
    return lws, out


def test_lws_worker_pods_belong_to_the_lws_through_their_leader_pod() -> None:
    lws, made = _lws("infer", 2, 3, 8)
    inv = build_inventory(make(*(gpu_node(f"n{i}") for i in range(6)), lws, *made))
    # One consumer: the worker StatefulSets are the LWS's, not workloads of their own counted again.
    [consumer] = [c for c in inv.consumers if c.kind != "Node"]
    assert (consumer.kind, consumer.name, consumer.totals, consumer.pods) == ("LeaderWorkerSet", "infer", {GPU: 48}, 6)


def test_lws_is_one_gang_per_group() -> None:
    # Each group is restarted whole (RecreateGroupOnPodRestart) and admitted whole by Kueue (pod group of
    # `size` pods: kueue v0.17.0 pkg/controller/jobs/leaderworkerset/leaderworkerset_pod_reconciler.go:146);
    # two groups need not run at once.
    lws, made = _lws("infer", 2, 3, 8)
    inv = build_inventory(make(*(gpu_node(f"n{i}") for i in range(6)), lws, *made))
    gangs = sorted(inv.gangs, key=lambda g: g.name)
    assert [(g.kind, g.name, g.min_count, g.pods, g.live_pods) for g in gangs] == [
        ("LeaderWorkerSet", "infer/0", 3, 3, 3),
        ("LeaderWorkerSet", "infer/1", 3, 3, 3),
    ]
    assert gangs[0].pod_names == {"ml/infer-0", "ml/infer-0-1", "ml/infer-0-2"}


QUEUE = {"kueue.x-k8s.io/queue-name": "gpu"}


def test_kueue_admits_a_deployments_pods_one_by_one_not_as_a_gang() -> None:
    # kueue v0.17.0 pkg/controller/jobs/deployment/deployment_webhook.go:91 only copies the queue label to the
    # pod template; each pod is its own Workload. A StatefulSet is one pod group (statefulset_reconciler.go:94).
    ps = pod_spec(container(requests={GPU: 1}))
    dep = obj("apps/v1", "Deployment", "serve", {"replicas": 4, "template": template(ps)}, labels=QUEUE)
    sts = obj("apps/v1", "StatefulSet", "shard", {"replicas": 3, "template": template(ps)}, labels=QUEUE)
    inv = build_inventory(make(gpu_node("n0"), dep, sts))
    assert [(g.kind, g.name) for g in inv.gangs] == [("StatefulSet", "shard")]


def test_kueue_plain_pod_group_is_a_gang_of_its_total_count() -> None:
    # kueue v0.17.0 pkg/controller/jobs/pod/constants/constants.go: pods labelled with one pod-group-name are
    # admitted together once pod-group-total-count of them exist; the pods read are the group (a pod's
    # annotations are not kept), the one that asks for no GPU needs no GPU node.
    ps = pod_spec(container(requests={GPU: 8}))
    pods = []
    for i in range(3):
        p = pod(f"grp-{i}", ps, node=f"n{i}")
        p["metadata"]["labels"] = {**QUEUE, "kueue.x-k8s.io/pod-group-name": "grp"}
        p["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "4"}
        pods.append(p)
    driver = pod("grp-driver", pod_spec(container()), node="n0")
    driver["metadata"]["labels"] = {**QUEUE, "kueue.x-k8s.io/pod-group-name": "grp"}
    inv = build_inventory(make(*(gpu_node(f"n{i}") for i in range(3)), *pods, driver))
    [gang] = inv.gangs
    assert (gang.kind, gang.name, gang.min_count, gang.pods, gang.live_pods) == ("KueuePodGroup", "grp", 3, 3, 3)
    assert gang.pools == {"p"}
