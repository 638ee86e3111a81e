"""The drain against pods marked not to be interrupted that the reviewed plan did not name.

`check` and the plan name, per pool, the GPU pods marked `karpenter.sh/do-not-disrupt: "true"` or
`cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` / `"on-completion"` (`pods-marked-do-not-disrupt`),
and the drain evicts them anyway, as `kubectl drain` does. But the drain read no mark itself: a pod marked after
the plan was reviewed (a training job someone protected yesterday) was evicted without a word. Karpenter's own
drain does not evict such a pod at all (kubernetes-sigs/karpenter v1.6.2 pkg/utils/pod/scheduling.go
`IsEvictable`: `!HasDoNotDisrupt(pod)`). Now the drain refuses, before evicting anything on the node, a marked
pod the plan's finding did not name, and evicts the ones it named with a warning each.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.execute.contract import StepFailed
from tests.unit.test_drain_late_pods import LateBinder, ops_on

NODE, NS, GPU = "gpu-1", "team", "nvidia.com/gpu"
KARPENTER = "karpenter.sh/do-not-disrupt"
AUTOSCALER = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def live_pod(
    name: str,
    annotations: dict[str, str] | None = None,
    *,
    owner: str = "ReplicaSet",
    gpu: bool = True,
    phase: str = "Running",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}"}
    meta["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True, "apiVersion": "apps/v1"}]
    if annotations is not None:
        meta["annotations"] = annotations
    limits = {GPU: "1"} if gpu else {"cpu": "1"}
    return {
        "metadata": meta,
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": phase},
    }


def Pods(*pods: dict[str, Any], late: dict[str, Any] | None = None) -> LateBinder:
    """One node's pods; an eviction removes the pod (its grace period over at once). `late`: bound to the node
    after the first eviction, as the scheduler does from a snapshot taken before the cordon."""
    return LateBinder(list(pods), [late] if late is not None else [])


@pytest.mark.parametrize(
    "annotations",
    [{KARPENTER: "true"}, {AUTOSCALER: "false"}, {AUTOSCALER: "on-completion"}],
    ids=["karpenter", "autoscaler-false", "autoscaler-on-completion"],
)
def test_a_mark_the_plan_did_not_name_stops_the_drain_before_anything_is_evicted(annotations: dict[str, str]) -> None:
    fake = Pods(live_pod("a-plain"), live_pod("trainer", annotations))
    with pytest.raises(StepFailed) as err:
        ops_on(fake).drain(NODE, "gpu", 10, marked_named=frozenset({f"{NS}/someone-else"}))
    assert fake.evicted == [], "nothing on the node evicted, not even its unmarked pod"
    (key, value), *_ = annotations.items()
    message = str(err.value)
    assert f'{NS}/trainer ({key}: "{value}")' in message and "\n" not in message
    assert "nothing evicted" in message
    hint = err.value.hint
    assert f"kubectl annotate pod -n {NS} trainer {key}-" in hint and "dra-migrate plan" in hint
    assert err.value.details == {"budgets": [], "pods": [f"{NS}/trainer"]}


def test_a_mark_the_plan_named_is_evicted_with_a_warning_and_journaled(caplog: pytest.LogCaptureFixture) -> None:
    fake = Pods(live_pod("a-plain"), live_pod("trainer", {KARPENTER: "true"}))
    with caplog.at_level(logging.WARNING, logger="dra_migrate"):
        change = ops_on(fake).drain(NODE, "gpu", 10, marked_named=frozenset({f"{NS}/trainer"}))
    assert sorted(fake.evicted) == ["a-plain", "trainer"]
    lines = [r.getMessage() for r in caplog.records if "trainer" in r.getMessage()]
    assert len(lines) == 1 and KARPENTER in lines[0] and NODE in lines[0]
    assert not any("a-plain" in r.getMessage() for r in caplog.records)
    assert change.before["marked"] == [f'{NS}/trainer ({KARPENTER}: "true")']


@pytest.mark.parametrize(
    ("case", "pod"),
    [
        ("do-not-disrupt false is no mark", live_pod("p", {KARPENTER: "false"})),
        ('do-not-disrupt True: Karpenter compares to "true" exactly', live_pod("p", {KARPENTER: "True"})),
        ("safe-to-evict true is no mark", live_pod("p", {AUTOSCALER: "true"})),
        ("another annotation", live_pod("p", {"example.com/keep": "true"})),
        ("finished", live_pod("p", {KARPENTER: "true"}, phase="Succeeded")),
        ("a DaemonSet's (the drain skips it)", live_pod("p", {KARPENTER: "true"}, owner="DaemonSet")),
        ("a mirror pod (the drain skips it)", live_pod("p", {KARPENTER: "true", "kubernetes.io/config.mirror": "x"})),
    ],
)
def test_what_is_no_mark_or_no_pod_the_drain_interrupts_does_not_stop_it(case: str, pod: dict[str, Any]) -> None:
    fake = Pods(live_pod("a-plain"), pod)
    ops_on(fake).drain(NODE, "gpu", 10, marked_named=frozenset())
    assert "a-plain" in fake.evicted, case


def test_a_marked_pod_already_being_deleted_is_only_waited_for() -> None:
    going = live_pod("going", {KARPENTER: "true"})
    going["metadata"]["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    fake = Pods(live_pod("a-plain"), going)
    real_list = fake.list_all

    def list_all(path: str, query: Any = ()) -> tuple[list[dict[str, Any]], str]:
        out = real_list(path, query)
        fake.pods.pop("uid-going", None)  # its kubelet finishes it after this read
        return out

    fake.list_all = list_all  # type: ignore[method-assign]
    change = ops_on(fake).drain(NODE, "gpu", 10, marked_named=frozenset())
    assert fake.evicted == ["a-plain"] and "marked" not in change.before


def test_a_marked_pod_bound_after_the_first_list_stops_the_next_round() -> None:
    fake = Pods(live_pod("a-plain"), late=live_pod("late", {AUTOSCALER: "false"}))
    with pytest.raises(StepFailed, match=f"{NS}/late"):
        ops_on(fake).drain(NODE, "gpu", 10, marked_named=frozenset())
    assert fake.evicted == ["a-plain"] and "uid-late" in fake.pods, "the late marked pod was not evicted"


def test_a_dry_run_reports_it_too() -> None:
    fake = Pods(live_pod("trainer", {KARPENTER: "true"}))
    with pytest.raises(StepFailed, match="trainer"):
        ops_on(fake).drain(NODE, "gpu", 10, dry_run=True, marked_named=frozenset())


def test_under_drain_all_a_marked_pod_without_devices_is_evicted_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The plan's check reads no pod without devices (the snapshot keeps none), so no review could name it:
    `--drain all` evicts it as planned, said on stderr and in the journal."""
    fake = Pods(live_pod("web", {KARPENTER: "true"}, gpu=False))
    with caplog.at_level(logging.WARNING, logger="dra_migrate"):
        change = ops_on(fake).drain(NODE, "all", 10, marked_named=frozenset())
    assert fake.evicted == ["web"]
    assert change.before["marked"] == [f'{NS}/web ({KARPENTER}: "true")']
    assert any("web" in r.getMessage() for r in caplog.records)


def test_the_default_names_no_marked_pod() -> None:
    """A caller that passes nothing (a test, a future action) refuses every marked pod: the safe side."""
    fake = Pods(live_pod("trainer", {KARPENTER: "true"}))
    with pytest.raises(StepFailed):
        ops_on(fake).drain(NODE, "gpu", 10)


# -- what the plan's review named ----------------------------------------------------------------------------


def _state_pod(name: str, annotations: dict[str, str] | None) -> dict[str, Any]:
    from tests.unit.helpers import container, pod, pod_spec

    p = pod(name, pod_spec(container(limits={GPU: "1"})), node="gpu-1")
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "o", "uid": f"u-{name}", "controller": True}
    ]
    if annotations is not None:
        p["metadata"]["annotations"] = annotations
    return p


def _plan(*pods: dict[str, Any], acceptances: Any = ()) -> Any:
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams
    from tests.unit.test_checks import gpu_node, make

    return build_plan(make(gpu_node("gpu-1", pool="h100"), *pods), PlanParams(), acceptances=acceptances)


def test_the_plan_names_every_marked_pod_its_finding_names_and_no_other() -> None:
    pods = [_state_pod(f"m-{i}", {KARPENTER: "true"}) for i in range(5)]  # the message shows 3, the objects all
    plain = _state_pod("plain", None)
    plan = _plan(*pods, plain)
    assert plan.marked_pods_named() == frozenset(f"ml/m-{i}" for i in range(5))


def test_an_accepted_finding_names_its_pods_too() -> None:
    """Accepting it in the ignore file records that it was seen: the plan keeps it under review.acceptedRisks."""
    import datetime as dt

    from dra_migrate.checks.ignore import Acceptance

    plan = _plan(
        _state_pod("m", {AUTOSCALER: "false"}),
        acceptances=[Acceptance("pods-marked-do-not-disrupt", "seen, runs at night", expires=dt.date(2999, 1, 1))],
    )
    assert not any(f["id"] == "pods-marked-do-not-disrupt" for f in plan.findings)
    assert plan.marked_pods_named() == frozenset({"ml/m"})


def test_a_mark_added_between_plan_and_apply_stops_the_drain_and_one_reviewed_does_not() -> None:
    """The hostile case end to end: the plan made while the pod had no mark, the pod marked before its wave."""
    unmarked_then = _plan(_state_pod("trainer", None))
    marked_then = _plan(_state_pod("trainer", {KARPENTER: "true"}))
    now = live_pod("trainer", {KARPENTER: "true"})
    now["metadata"]["namespace"] = "ml"

    fake = Pods(dict(now))
    with pytest.raises(StepFailed, match="ml/trainer"):
        ops_on(fake).drain(NODE, "gpu", 10, marked_named=unmarked_then.marked_pods_named())
    assert fake.evicted == []

    fake = Pods(dict(now))
    ops_on(fake).drain(NODE, "gpu", 10, marked_named=marked_then.marked_pods_named())
    assert fake.evicted == ["trainer"]


# -- the runner: each drain told what the plan named; a refusal fails the wave as any drain failure -----------


def test_the_runner_hands_each_drain_the_plans_named_marked_pods(tmp_path: Path) -> None:
    from tests.unit.test_runner import Rig, make_plan

    rig = Rig(tmp_path, make_plan([["a"]]))
    seen: list[Any] = []
    real = rig.ops.drain

    def drain(node: str, scope: str, timeout_s: float, **kw: Any) -> Any:
        seen.append(kw.get("marked_named"))
        return real(node, scope, timeout_s, **kw)

    rig.ops.drain = drain  # type: ignore[method-assign]
    assert rig.run().ok
    assert seen == [rig.plan.marked_pods_named()]


def test_a_refused_drain_fails_the_wave_and_rolls_the_node_back(tmp_path: Path) -> None:
    from dra_migrate.execute.runner import FAILED
    from tests.unit.test_runner import BEFORE, Rig, make_plan

    rig = Rig(tmp_path, make_plan([["a", "b"]]))
    rig.ops.nodes["p0-a"].marked = {"ml/trainer": f'{KARPENTER}: "true"'}
    result = rig.run()
    assert result.outcome == FAILED and "ml/trainer" in (result.failure or "")
    assert all(s == BEFORE for s in rig.nodes().values()), "the wave rolled back"
    assert rig.ops.nodes["p0-a"].marked, "the marked pod was not evicted"
    failed = [r for r in rig.records() if r["event"] == "end" and r.get("result") == "failed"]
    assert [r["stepId"].rsplit("/", 1)[-1] for r in failed] == ["drain"]
    assert failed[0]["details"]["pods"] == ["ml/trainer"]
