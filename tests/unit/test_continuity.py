"""Quota continuity through a rehearsal (issue 27; dra_migrate/rehearse/continuity.py): the effective GPU limit
of each namespace under the old and the new quota names, and Kueue's quota, judged over a sequence of states.
The hostile sequences are what a plan that ordered its quota changes wrongly would leave on the twin."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from dra_migrate.rehearse.continuity import ContinuityCheck, View, make_view, plan_pairs, quota_limits

R = "nvidia.com/gpu"
CLASS = "gpu.nvidia.com"  # the driver's class: no extendedResourceName, so its claims count only per class
MAPPED = "gpu-extended.nvidia.com"  # a class that maps nvidia.com/gpu
OLD_KEY = f"requests.{R}"
NEW_KEY = f"{CLASS}.deviceclass.resource.k8s.io/devices"
PAIRS = {R: {CLASS}}


def quota(hard: dict[str, str], ns: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "gpu", "namespace": ns}, "spec": {"hard": hard, **spec}}


def device_class(name: str, ext: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"extendedResourceName": ext} if ext else {}}


def cq(quota_value: Any, flavor: str = "h100") -> dict[str, Any]:
    resources = [{"name": "cpu", "nominalQuota": 10}]
    if quota_value is not None:
        resources.append({"name": R, "nominalQuota": quota_value})
    return {
        "metadata": {"name": "research"},
        "spec": {"resourceGroups": [{"flavors": [{"name": flavor, "resources": resources}]}]},
    }


def view(quotas: list[dict[str, Any]], *, dra: bool, classes: tuple[dict[str, Any], ...] = (), queues=()) -> View:
    return make_view(quotas, classes, PAIRS, queues, dra)


def run(*views: View) -> ContinuityCheck:
    check = ContinuityCheck()
    for i, v in enumerate(views):
        check.observe(v, float(i), f"event {i}")
    return check


def test_effective_limits_under_old_and_new_names() -> None:
    limits = quota_limits([quota({OLD_KEY: "8", NEW_KEY: "6", "requests.cpu": "10"})], [], PAIRS)
    assert limits == {("team-a", R): {"old": Decimal(8), "new": Decimal(6)}}
    # A class that maps R: its claims count under requests.R as well (DRAExtendedResource).
    mapped = quota_limits([quota({OLD_KEY: "8"})], [device_class(MAPPED, R)], {})
    assert mapped == {("team-a", R): {"old": Decimal(8), "new": Decimal(8)}}
    # A scoped quota never counts a claim, and is not a namespace's limit.
    assert quota_limits([quota({OLD_KEY: "8"}, scopes=["BestEffort"])], [], PAIRS) == {}
    # The other per-class name counts too.
    per_class = quota_limits([quota({f"requests.deviceclass.resource.kubernetes.io/{CLASS}": "3"})], [], PAIRS)
    assert per_class == {("team-a", R): {"old": None, "new": Decimal(3)}}


def test_the_plans_order_has_no_window() -> None:
    """The plan: the device limit is added in prepare, before any node publishes DRA devices; the old
    limit stays throughout."""
    check = run(
        view([quota({OLD_KEY: "8"})], dra=False),
        view([quota({OLD_KEY: "8", NEW_KEY: "8"})], dra=False),  # set-quota
        view([quota({OLD_KEY: "8", NEW_KEY: "8"})], dra=True),  # the first wave publishes devices
    )
    assert check.violations == {} and check.failure() is None
    assert check.to_dict()["namespaces"] == [f"team-a {R}"] and check.events == 3


def test_a_limit_removed_before_the_new_one_exists_is_flagged() -> None:
    check = run(
        view([quota({OLD_KEY: "8"})], dra=False),
        view([quota({"requests.cpu": "10"})], dra=False),  # the old limit removed first ...
        view([quota({NEW_KEY: "8"})], dra=False),  # ... the new one added after: a window
    )
    [v] = check.violations.values()
    assert (v.subject, v.path, v.kind, v.cause, v.before) == (
        f"namespace team-a {R}",
        "old",
        "unlimited",
        "event 1",
        "8",
    )
    assert v.count == 2  # the old path stays unlimited once the new name replaced it
    assert "left without a limit" in (check.failure() or "")


def test_dra_devices_published_before_the_device_limit_is_flagged() -> None:
    """The driver's class does not map R: until set-quota runs, its claims are not limited at all."""
    check = run(
        view([quota({OLD_KEY: "8"})], dra=False),
        view([quota({OLD_KEY: "8"})], dra=True),  # a wave ran before prepare's set-quota
        view([quota({OLD_KEY: "8", NEW_KEY: "8"})], dra=True),
    )
    [v] = check.violations.values()
    assert (v.path, v.kind, v.cause) == ("new", "unlimited", "event 1")


def test_a_limit_of_zero_where_there_was_capacity_is_blocked() -> None:
    check = run(
        view([quota({OLD_KEY: "8"})], dra=False),
        view([quota({OLD_KEY: "8", NEW_KEY: "0"})], dra=True),
    )
    assert [(v.path, v.kind) for v in check.violations.values()] == [("new", "blocked")]
    zero_before = run(view([quota({OLD_KEY: "0"})], dra=False), view([quota({OLD_KEY: "0"})], dra=False))
    assert zero_before.violations == {}  # it had no capacity: 0 stays 0, nothing newly blocked


def test_a_gap_that_was_there_before_the_plan_is_not_a_transition() -> None:
    check = run(view([quota({OLD_KEY: "8"})], dra=True), view([quota({OLD_KEY: "8"})], dra=True))
    assert check.violations == {}


def test_kueue_quota_gone_or_zero_is_blocked() -> None:
    base = view([], dra=False, queues=[cq(12)])
    assert run(base, view([], dra=False, queues=[cq(12)])).violations == {}
    gone = run(base, view([], dra=False, queues=[cq(None)]))  # the flavor no longer budgets nvidia.com/gpu
    assert [(v.subject, v.kind) for v in gone.violations.values()] == [
        (f"ClusterQueue research flavor h100 {R}", "blocked")
    ]
    assert run(base, view([], dra=False, queues=[cq("0")])).violations
    assert run(base, view([], dra=False, queues=[])).violations  # the queue deleted


def test_plan_pairs_come_from_set_quota_steps() -> None:
    body = {
        "stages": [
            {
                "name": "prepare",
                "steps": [
                    {"action": "create-deviceclass", "params": {}},
                    {
                        "action": "set-quota",
                        "params": {"set": {NEW_KEY: "8"}, "continues": {OLD_KEY: "8"}, "namespace": "a", "name": "q"},
                    },
                ],
            }
        ]
    }
    assert plan_pairs(body) == {R: {CLASS}}


def test_without_a_class_that_serves_the_resource_there_is_no_dra_path_to_limit() -> None:
    """No class maps R and no set-quota pairs one: kube-scheduler cannot back an R request with DRA, so the
    new path is not a window even with devices published."""
    check = ContinuityCheck()
    for i, dra in enumerate((False, True)):
        check.observe(make_view([quota({OLD_KEY: "8"})], [], {}, [], dra), float(i), f"event {i}")
    assert check.violations == {}
    # ... until a class that maps it appears: then requests.R counts its claims too, so still no window.
    check.observe(make_view([quota({OLD_KEY: "8"})], [device_class(MAPPED, R)], {}, [], True), 2.0, "event 2")
    assert check.violations == {}
