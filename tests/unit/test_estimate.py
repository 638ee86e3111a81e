"""The plan's duration estimate: the simulator's timing model along the executor's steps."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from dra_migrate.plan.build import build_plan
from dra_migrate.plan.estimate import (
    ExecutorCosts,
    drain_holds,
    estimate_text,
    evicted_grace_periods,
    format_seconds,
    node_estimate,
    phase_range,
    plan_estimate,
    sync_wait,
    wave_estimate,
)
from dra_migrate.plan.params import PlanParams, parse_duration
from dra_migrate.plan.validate import recompute, summary_problems
from dra_migrate.sim.spec import GpuNodeSpec
from dra_migrate.sim.timing import REALISTIC, profile
from tests.unit.helpers import container, node, obj, pod, pod_spec, state

GPU = container(limits={"nvidia.com/gpu": 1})
FREE = ExecutorCosts(request_s=0, poll_s=0, scheduling_s=0)  # only the cluster's components count


def gpu_pod(name: str, on: str, grace: int | None = None, **extra: Any) -> dict[str, Any]:
    spec = pod_spec(GPU, **({"terminationGracePeriodSeconds": grace} if grace is not None else {}))
    return pod(name, spec, node=on, **extra)


def test_grace_periods_of_the_pods_a_drain_evicts() -> None:
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "uid": "u"}}
    mirror = gpu_pod("static", "n1", 99)
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    pods = [
        gpu_pod("a", "n1", 120),
        gpu_pod("b", "n1"),  # none set: Kubernetes' default
        gpu_pod("c", "n1", 0),
        gpu_pod("done", "n1", 500, phase="Succeeded"),
        gpu_pod("elsewhere", "n2", 700),
        pod("ds-pod", pod_spec(GPU, terminationGracePeriodSeconds=900), owner=ds, node="n1"),
        mirror,
    ]
    assert sorted(evicted_grace_periods(pods, "n1")) == [0, 30, 120]


def test_a_nodes_drain_is_its_longest_grace_and_nothing_else_of_its_pods() -> None:
    short = node_estimate("n", [30, 30, 30], costs=FREE)
    long = node_estimate("n", [30, 600], costs=FREE)
    empty = node_estimate("n", [], costs=FREE)
    assert short.steps["drain"] == pytest.approx(30)
    assert long.steps["drain"] == pytest.approx(600)
    assert empty.steps["drain"] == 0
    # Everything after the drain is the same whatever the pods were.
    for step in ("wait-dra-ready", "canary"):
        assert short.steps[step] == long.steps[step] == empty.steps[step]
    ready = max(REALISTIC.plugin_exit_s + REALISTIC.node_status_sync_s / 2, REALISTIC.dra_plugin_start_s)
    assert empty.steps["wait-dra-ready"] == pytest.approx(ready)
    assert empty.steps["canary"] == pytest.approx(REALISTIC.container_start_s + REALISTIC.canary_run_s)


def test_a_concurrent_wave_takes_its_slowest_node_and_a_sequential_one_the_sum() -> None:
    nodes = {"fast": [10.0], "slow": [300.0], "empty": []}
    concurrent = wave_estimate("pool-a", "wave-1", nodes, 0, costs=FREE)
    assert concurrent.slowest is not None and concurrent.slowest.node == "slow"
    assert concurrent.seconds == pytest.approx(concurrent.slowest.seconds)
    sequential = wave_estimate("pool-a", "wave-1", nodes, 0, costs=FREE, concurrent=False)
    one = node_estimate("x", [], costs=FREE)
    # Drains and canaries add up; the plugin wait is paid once (the others switched meanwhile).
    assert sequential.seconds == pytest.approx(10 + 300 + one.steps["wait-dra-ready"] + 3 * one.steps["canary"])


def test_the_slowest_status_sync_of_a_wider_wave_is_later() -> None:
    one = wave_estimate("s", "w", {"a": []}, 0, costs=FREE).seconds
    many = wave_estimate("s", "w", {f"n{i}": [] for i in range(200)}, 0, costs=FREE).seconds
    assert many - one == pytest.approx(REALISTIC.node_status_sync_s * (200 / 201 - 1 / 2))


def test_a_rate_limit_bounds_a_wide_wave_from_below() -> None:
    nodes = {f"n{i}": [30.0] for i in range(200)}
    unlimited = wave_estimate("s", "w", nodes, 0)
    limited = wave_estimate("s", "w", nodes, 0, costs=ExecutorCosts(qps=5))
    assert limited.seconds == pytest.approx(limited.requests / 5) and limited.seconds > unlimited.seconds
    assert unlimited.requests >= 200 * 20  # every node reads, writes and polls


def test_time_scale_scales_the_clusters_share_only() -> None:
    full = node_estimate("n", [60], costs=FREE)
    tenth = node_estimate("n", [60], costs=FREE, profile=profile("realistic", 0.1))
    assert tenth.seconds == pytest.approx(full.seconds / 10)
    with_costs = node_estimate("n", [60], profile=profile("realistic", 0.1))
    assert with_costs.seconds > tenth.seconds  # round trips and polls are not scaled


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (0.2, "1s"), (59.0, "59s"), (61.5, "1m2s"), (3600, "1h")])
def test_format_seconds_rounds_up(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


# -- in the plan -----------------------------------------------------------------------------------


def fleet(graces: dict[str, list[int]], other: dict[str, int] | None = None) -> Any:
    objects: list[dict[str, Any]] = []
    for name, gs in graces.items():
        labels = GpuNodeSpec.small(name, gpus=2, pool="pool-a").labels
        objects.append(node(name, labels=labels, gpus={"nvidia.com/gpu": "2"}))
        objects += [gpu_pod(f"{name}-p{i}", name, g) for i, g in enumerate(gs)]
        for i in range((other or {}).get(name, 0)):
            objects.append(pod(f"{name}-cpu{i}", pod_spec(container()), node=name))
    return state(*objects)


def test_the_plan_summary_holds_each_wave_and_adds_them_up_with_the_soaks() -> None:
    s = fleet({"n1": [30], "n2": [900], "n3": [], "n4": [60]})
    body = build_plan(s, PlanParams(max_unavailable="2", soak="5m")).to_dict()
    summary = body["summary"]
    waves = summary["waveEstimates"]
    assert list(waves) == ["pool-pool-a/wave-1", "pool-pool-a/wave-2"]
    by_wave = {w["name"]: [n["node"] for n in w["nodes"]] for w in body["stages"][1]["waves"]}
    slow_wave = next(k for k, nodes in by_wave.items() if "n2" in nodes)
    assert waves[f"pool-pool-a/{slow_wave}"]["slowestNode"] == "n2"
    assert parse_duration(waves[f"pool-pool-a/{slow_wave}"]["estimate"]) >= 900
    total = parse_duration(summary["estimatedDuration"])
    parts = sum(parse_duration(w["estimate"]) for w in waves.values()) + 300  # one soak between the waves
    assert parts - 3 <= total <= parts + 1  # each part rounded up on its own


def test_the_estimate_reads_the_pods_grace_periods() -> None:
    def total(grace: int) -> int:
        body = build_plan(fleet({"n1": [grace], "n2": [30]}), PlanParams(max_unavailable="100%", soak="0s")).to_dict()
        return parse_duration(body["summary"]["estimatedDuration"])

    assert total(3600) - total(30) == pytest.approx(3570, abs=1)


def test_drain_all_counts_the_other_pods_at_the_default_grace() -> None:
    s = fleet({"n1": [5]}, other={"n1": 3})
    gpu_only = build_plan(s, PlanParams(drain="gpu", soak="0s")).to_dict()["summary"]["estimatedDuration"]
    everything = build_plan(s, PlanParams(drain="all", soak="0s")).to_dict()["summary"]["estimatedDuration"]
    assert parse_duration(everything) - parse_duration(gpu_only) == pytest.approx(25, abs=1)


def test_plan_estimate_on_the_files_shape_matches_the_summary() -> None:
    s = fleet({"n1": [30], "n2": [45, 10], "n3": [], "n4": [5]})
    body = build_plan(s, PlanParams(max_unavailable="1", soak="1m")).to_dict()
    # Only what differs from the default 30 s is recorded; a node without GPU pods needs nothing.
    assert body["summary"]["drainGraceSeconds"] == {"n2": 45, "n4": 5}
    seconds, waves = plan_estimate(body["stages"], body["summary"]["drainGraceSeconds"])
    assert format_seconds(seconds) == body["summary"]["estimatedDuration"]
    assert {w.key: w.to_dict() for w in waves} == body["summary"]["waveEstimates"]


def test_a_node_whose_gpu_pods_cannot_be_evicted_records_no_wait() -> None:
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "uid": "u"}}
    s = fleet({"n1": []})
    s.objects["Pod"].append(pod("ds-pod", pod_spec(GPU, terminationGracePeriodSeconds=600), owner=ds, node="n1"))
    body = build_plan(s, PlanParams(soak="0s")).to_dict()
    assert body["summary"]["drainGraceSeconds"] == {"n1": 0}
    assert parse_duration(body["summary"]["waveEstimates"]["pool-pool-a/wave-1"]["estimate"]) < 20


# -- what the estimate cannot know: budgets that hold drains -------------------------------------


def budget(name: str, labels: dict[str, str], allowed: int | None = None, **spec: Any) -> dict[str, Any]:
    pdb = obj("policy/v1", "PodDisruptionBudget", name, {"selector": {"matchLabels": labels}, **spec})
    if allowed is not None:
        pdb["status"] = {"disruptionsAllowed": allowed}
    return pdb


def labelled(p: dict[str, Any], **labels: str) -> dict[str, Any]:
    p["metadata"]["labels"] = labels
    return p


def test_a_budget_holds_the_drains_of_a_wave_that_evicts_more_of_its_pods_than_it_allows() -> None:
    pods = [labelled(gpu_pod(f"web-{n}", n), app="web") for n in ("n1", "n2", "n3")]
    pods.append(gpu_pod("other", "n4"))
    one = budget("web", {"app": "web"}, allowed=1)
    # Two of its pods in one wave, one allowed: both nodes' drains can wait.
    assert drain_holds([one], pods, [["n1", "n2"], ["n3", "n4"]]) == {"n1": "ml/web", "n2": "ml/web"}
    # One per wave: each drain is let through.
    assert drain_holds([one], pods, [["n1"], ["n2"], ["n3", "n4"]]) == {}
    # None allowed (a slow pod not Ready, or maxUnavailable 0): the first drain already waits.
    assert drain_holds([budget("web", {"app": "web"}, allowed=0)], pods, [["n1"], ["n4"]]) == {"n1": "ml/web"}
    # No status in the snapshot: the budget's count says; a minAvailable the snapshot cannot size is a may.
    assert drain_holds([budget("web", {"app": "web"}, maxUnavailable=2)], pods, [["n1", "n2"]]) == {}
    assert drain_holds([budget("web", {"app": "web"}, minAvailable=1)], pods, [["n1"]]) == {"n1": "ml/web"}
    # Another namespace's budget selects none of these pods; a DaemonSet's pod is never evicted.
    elsewhere = budget("web", {"app": "web"}, allowed=0)
    elsewhere["metadata"]["namespace"] = "shop"
    assert drain_holds([elsewhere], pods, [["n1"]]) == {}
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "uid": "u"}}
    daemon = labelled(pod("ds-web", pod_spec(GPU), owner=ds, node="n4"), app="web")
    assert drain_holds([budget("web", {"app": "web"}, allowed=0)], [daemon], [["n4"]]) == {}


def test_a_held_drain_makes_the_estimate_a_range_up_to_the_drains_timeout() -> None:
    s = fleet({"n1": [30], "n2": [30]})
    for p in s.objects["Pod"]:
        labelled(p, app="web")
    plain = build_plan(s, PlanParams(max_unavailable="2", soak="0s", drain_timeout="10m")).to_dict()["summary"]
    assert "estimatedMaxDuration" not in plain and "drainHolds" not in plain  # a point: the plan's shape as before
    assert estimate_text(plain) == plain["estimatedDuration"]
    s.objects.setdefault("policy/PodDisruptionBudget", []).append(budget("web", {"app": "web"}, allowed=1))
    held = build_plan(s, PlanParams(max_unavailable="2", soak="0s", drain_timeout="10m")).to_dict()["summary"]
    assert held["drainHolds"] == {"n1": "ml/web", "n2": "ml/web"}
    assert held["estimatedDuration"] == plain["estimatedDuration"]  # the low end: no wait
    low, high = parse_duration(held["estimatedDuration"]), parse_duration(held["estimatedMaxDuration"])
    # the held drain (30 s of grace and a poll) stretched to the 10-minute timeout
    assert high - low == pytest.approx(600 - 30, abs=2)
    text = estimate_text(held)
    assert text.startswith(f"{held['estimatedDuration']}–{held['estimatedMaxDuration']}") and "ml/web" in text


def test_the_range_follows_from_the_plan_alone_and_an_edit_is_caught() -> None:
    s = fleet({"n1": [30], "n2": [30]})
    for p in s.objects["Pod"]:
        labelled(p, app="web")
    s.objects.setdefault("policy/PodDisruptionBudget", []).append(budget("web", {"app": "web"}, allowed=0))
    body = build_plan(s, PlanParams(max_unavailable="1", soak="0s")).to_dict()
    assert summary_problems(body) == []
    edited = copy.deepcopy(body)
    edited["summary"]["estimatedMaxDuration"] = body["summary"]["estimatedDuration"]  # "no wait, ever"
    assert [p.path for p in summary_problems(edited)] == [("summary",)]
    assert recompute(edited)["summary"] == body["summary"]


def _holds_wave_by_wave(
    pdbs: list[dict[str, Any]], pods: list[dict[str, Any]], waves: list[list[str]]
) -> dict[str, str]:
    """`drain_holds` as it was written before budgets were indexed by namespace: every wave, every budget."""
    from dra_migrate.inventory.placement import pdb_selects
    from dra_migrate.plan.estimate import disruptions_allowed, evicted

    by_node: dict[str, list[dict[str, Any]]] = {}
    for p in pods:
        if p["spec"].get("nodeName") and evicted(p):
            by_node.setdefault(str(p["spec"]["nodeName"]), []).append(p)
    out: dict[str, str] = {}
    for nodes in waves:
        for pdb in pdbs:
            ns = pdb["metadata"].get("namespace")
            covered = {
                n: sum(1 for p in by_node.get(n, []) if p["metadata"].get("namespace") == ns and pdb_selects(pdb, p))
                for n in nodes
            }
            allowed = disruptions_allowed(pdb)
            if sum(covered.values()) and (allowed is None or sum(covered.values()) > allowed):
                for n in nodes:
                    if covered[n]:
                        out.setdefault(n, f"{ns}/{pdb['metadata'].get('name')}")
    return dict(sorted(out.items()))


def test_budgets_hold_the_same_drains_as_when_each_was_checked_wave_by_wave() -> None:
    """Budgets are indexed by namespace and summed per wave (issue 29: budgets x nodes before): the holds
    are the wave-by-wave check's on random fleets, with overlapping budgets, several namespaces, budgets
    of every kind (allowed, a count, a percentage, none) and nodes listed in more than one wave."""
    rng = random.Random(41)
    for _ in range(400):
        nodes = [f"n{i}" for i in range(rng.randint(1, 8))]
        pods = []
        for i in range(rng.randint(0, 16)):
            p = labelled(gpu_pod(f"p{i}", rng.choice(nodes)), app=rng.choice(("a", "b")))
            p["metadata"]["namespace"] = rng.choice(("ml", "shop"))
            pods.append(p)
        pdbs = []
        for i in range(rng.randint(0, 4)):
            kind = rng.choice(("allowed", "count", "percent", "none"))
            spec = {"maxUnavailable": rng.randint(0, 2)} if kind == "count" else {}
            spec = {"maxUnavailable": rng.choice(("0%", "50%"))} if kind == "percent" else spec
            allowed = rng.randint(0, 2) if kind == "allowed" else None
            b = budget(f"b{i}", {"app": rng.choice(("a", "b"))}, allowed, **spec)
            b["metadata"]["namespace"] = rng.choice(("ml", "shop"))
            pdbs.append(b)
        waves = [rng.sample(nodes, rng.randint(1, len(nodes))) for _ in range(rng.randint(1, 4))]
        assert drain_holds(pdbs, pods, waves) == _holds_wave_by_wave(pdbs, pods, waves)


@pytest.mark.parametrize("n", [1, 2, 5, 60])
def test_the_slowest_sync_wait_of_a_wave_has_the_mean_and_quantiles_of_the_largest_of_n_uniform_phases(n: int) -> None:
    """The formulas against the thing they model: n kubelets whose timers tick at random phases."""
    rng = random.Random(n)
    draws = sorted(max(rng.uniform(0, 10) for _ in range(n)) for _ in range(20_000))
    assert sync_wait(10, n) == pytest.approx(sum(draws) / len(draws), abs=0.1)
    for q in (0.05, 0.5, 0.95):
        assert sync_wait(10, n, q) == pytest.approx(draws[int(q * len(draws))], abs=0.15)


def test_a_plan_of_one_node_says_its_estimate_as_the_range_its_kubelets_sync_phase_makes() -> None:
    """One node's wait for its kubelet's status sync is anywhere in the 10 s period (on the real NVIDIA
    stack the same apply took 9.7, 7.0 and 4.5 s started 0, 2.5 and 6 s later: docs/twin.md); a fleet's
    waves each wait for their slowest node, near the whole period whatever the phases: a point."""
    one = build_plan(fleet({"n1": [30]}), PlanParams(soak="0s")).to_dict()["summary"]
    point = parse_duration(one["estimatedDuration"])
    below, above = phase_range([1])
    assert (below, above) == pytest.approx((4.5, 4.5))  # the 5th and 95th percentile of a 10 s period
    text = estimate_text(one, "soaks included", [1])
    assert text.startswith(
        f"{one['estimatedDuration']}, {format_seconds(point - below)}–{format_seconds(point + above)} "
    )
    assert "status syncs" in text and "soaks included" in text
    assert estimate_text(one, "soaks included") == f"{one['estimatedDuration']} (soaks included)"  # sizes unknown
    fleet_below, fleet_above = phase_range([67] * 30)  # the 2,000-node generator's waves
    assert fleet_above < fleet_below < 10  # seconds, over a 2 h 34 m estimate
    assert estimate_text({"estimatedDuration": "2h34m21s"}, "", [67] * 30) == "2h34m21s"
    soaked = build_plan(fleet({"n1": [30], "n2": [30]}), PlanParams(max_unavailable="1", soak="5m")).to_dict()
    assert "status syncs" not in estimate_text(soaked["summary"], "", [1, 1])  # 5 min of soak: within a tenth


def test_the_sync_range_and_a_budgets_hold_are_said_together() -> None:
    s = fleet({"n1": [30]})
    for p in s.objects["Pod"]:
        labelled(p, app="web")
    s.objects.setdefault("policy/PodDisruptionBudget", []).append(budget("web", {"app": "web"}, allowed=0))
    held = build_plan(s, PlanParams(soak="0s", drain_timeout="10m")).to_dict()["summary"]
    low, high = parse_duration(held["estimatedDuration"]), parse_duration(held["estimatedMaxDuration"])
    text = estimate_text(held, "", [1])
    span = text.split(" (")[0].split(", ")[1]
    assert span == f"{format_seconds(low - 4.5)}–{format_seconds(high + 4.5)}"
    assert "status syncs" in text and "ml/web" in text
