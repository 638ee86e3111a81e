"""Quota continuity on the twin (issue 27; docs/rehearse.md "Quota continuity"): through the whole rehearsal,
every namespace that had a GPU limit keeps one, and it never drops to zero; every Kueue ClusterQueue quota on
a GPU resource stays, and never drops to zero.

What a namespace's effective GPU limit is, per path a GPU request can take (k8s.io/kubernetes@v1.37.2
pkg/quota/v1/evaluator/core/pods.go and resource_claims.go; KEP-5004 "Resource Quota"):

* **old** (a pod's `nvidia.com/gpu` request, served by the device plugin): the smallest `requests.R` of the
  namespace's unscoped ResourceQuotas;
* **new** (a ResourceClaim of a DeviceClass C that serves R, the claim kube-scheduler makes for an extended-
  resource request included): the smallest of `C.deviceclass.resource.k8s.io/devices`,
  `requests.deviceclass.resource.kubernetes.io/C` and, when C's `extendedResourceName` is R, `requests.R`
  (DRAExtendedResource counts such a claim under it too). C is a class with `extendedResourceName: R`, or
  the class the plan's `set-quota` step pairs with R. The new path matters only once DRA devices are
  published (a ResourceSlice exists) and some class serves R: before that no such claim can be allocated.

Scoped quotas are left out: a claim never matches one (the claim evaluator's MatchingScopes returns nothing).

The watch is exact, not sampled: each collection is list+watched (`kube.Informer`), and every event is a state
of the collection the API server held, so a limit removed and re-added between two polls is still seen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from dra_migrate.cluster.quantity import parse_quantity
from dra_migrate.inventory.dependents import DEVICES_PER_CLASS, REQUESTS, queue_gpu_quotas
from dra_migrate.inventory.resources import GPU_PREFIX
from dra_migrate.kube import ApiError, Event, Informer, Kube
from dra_migrate.plan.actions import Action

# k8s.io/api@v0.37.2 core/v1/types.go ResourceRequestsDeviceClassPrefix (KEP-5004).
REQUESTS_PER_CLASS = "requests.deviceclass.resource.kubernetes.io/"
OLD, NEW = "old", "new"
# Violations kept in the report: the first of each (subject, path, kind) and a count; a flapping limit would
# otherwise fill it.
MAX_VIOLATIONS = 50

Obj = Mapping[str, Any]


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _qty(v: Any) -> Decimal | None:
    return parse_quantity(v)


def _min(values: Iterable[Decimal | None]) -> Decimal | None:
    found = [v for v in values if v is not None]
    return min(found) if found else None


# -- what a state holds ------------------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """One state of the twin: per (namespace, R) the effective limit of each path; per (queue, flavor, R)
    Kueue's nominalQuota; whether DRA devices are published; the resources some DeviceClass serves (without
    one, R has no DRA path: kube-scheduler backs an extended-resource request only through a class that
    maps it, KEP-5004)."""

    limits: dict[tuple[str, str], dict[str, Decimal | None]]
    queues: dict[tuple[str, str, str], Decimal | None]
    dra_live: bool
    served: frozenset[str] = frozenset()


def make_view(
    quotas: Iterable[Obj],
    classes: Iterable[Obj],
    pairs: Mapping[str, set[str]],
    cluster_queues: Iterable[Obj],
    dra_live: bool,
) -> View:
    classes = list(classes)
    served = frozenset(r for r, cs in serving_classes(classes, pairs).items() if cs)
    return View(quota_limits(quotas, classes, pairs), queue_quotas(cluster_queues), dra_live, served)


def serving_classes(classes: Iterable[Obj], plan_pairs: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """R -> the DeviceClasses that serve it: those with `extendedResourceName: R`, and the plan's pairs."""
    out: dict[str, set[str]] = {r: set(cs) for r, cs in plan_pairs.items()}
    for dc in classes:
        ext = _map(dc.get("spec")).get("extendedResourceName")
        if isinstance(ext, str) and ext:
            out.setdefault(ext, set()).add(str(_map(dc.get("metadata")).get("name") or ""))
    return out


def mapped_by_class(classes: Iterable[Obj]) -> set[str]:
    """The extended resources some DeviceClass maps (so its claims also count under `requests.R`)."""
    return {
        str(_map(dc.get("spec")).get("extendedResourceName"))
        for dc in classes
        if _map(dc.get("spec")).get("extendedResourceName")
    }


def quota_limits(
    quotas: Iterable[Obj], classes: Iterable[Obj], plan_pairs: Mapping[str, set[str]]
) -> dict[tuple[str, str], dict[str, Decimal | None]]:
    """(namespace, R) -> {old, new}: the effective limit of each path, None when nothing limits it. Every R
    that any unscoped quota of the namespace names, under its old or a new name, is listed."""
    classes = list(classes)
    serving = serving_classes(classes, plan_pairs)
    mapped = mapped_by_class(classes)
    by_ns: dict[str, list[Mapping[str, Any]]] = {}
    for q in quotas:
        spec = _map(q.get("spec"))
        if _list(spec.get("scopes")) or _map(spec.get("scopeSelector")).get("matchExpressions"):
            continue
        ns = str(_map(q.get("metadata")).get("namespace") or "")
        by_ns.setdefault(ns, []).append(_map(spec.get("hard")))
    out: dict[tuple[str, str], dict[str, Decimal | None]] = {}
    for ns, hards in by_ns.items():
        named = {k[len(REQUESTS) :] for h in hards for k in h if k.startswith(REQUESTS + GPU_PREFIX)}
        for r, cs in serving.items():
            new_keys = {f"{c}{DEVICES_PER_CLASS}" for c in cs} | {f"{REQUESTS_PER_CLASS}{c}" for c in cs}
            if any(k in h for h in hards for k in new_keys):
                named.add(r)
        for r in sorted(named):
            new_keys = {f"{c}{DEVICES_PER_CLASS}" for c in serving.get(r, ())}
            new_keys |= {f"{REQUESTS_PER_CLASS}{c}" for c in serving.get(r, ())}
            if r in mapped:
                new_keys.add(REQUESTS + r)
            out[(ns, r)] = {
                OLD: _min(_qty(h.get(REQUESTS + r)) for h in hards),
                NEW: _min(_qty(h.get(k)) for h in hards for k in new_keys),
            }
    return out


def queue_quotas(cluster_queues: Iterable[Obj]) -> dict[tuple[str, str, str], Decimal | None]:
    """(ClusterQueue, flavor, R) -> nominalQuota, for every nvidia.com/ resource a queue budgets."""
    out: dict[tuple[str, str, str], Decimal | None] = {}
    for cq in cluster_queues:
        name = str(_map(cq.get("metadata")).get("name") or "")
        for fname, rname, quota in queue_gpu_quotas(cq):
            out[(name, fname, rname)] = _qty(quota)
    return out


def plan_pairs(plan_body: Mapping[str, Any]) -> dict[str, set[str]]:
    """R -> the classes the plan's set-quota steps pair with it (`continues: {requests.R}`, `set: {C...}`)."""
    out: dict[str, set[str]] = {}
    for stage in _list(plan_body.get("stages")):
        for step in _list(_map(stage).get("steps")):
            if _map(step).get("action") != Action.SET_QUOTA:
                continue
            params = _map(_map(step).get("params"))
            cs = {k[: -len(DEVICES_PER_CLASS)] for k in _map(params.get("set")) if k.endswith(DEVICES_PER_CLASS)}
            for key in _map(params.get("continues")):
                if key.startswith(REQUESTS):
                    out.setdefault(key[len(REQUESTS) :], set()).update(cs)
    return out


# -- the check ----------------------------------------------------------------------------------------


@dataclass
class Violation:
    subject: str  # "namespace team-a nvidia.com/gpu" or "ClusterQueue research flavor h100 nvidia.com/gpu"
    path: str  # old | new | kueue
    kind: str  # unlimited | blocked
    at_s: float  # seconds into the rehearsal (real time)
    cause: str  # the event that made it: "MODIFIED ResourceQuota team-a/gpu"
    before: str | None  # the limit before the plan ran
    count: int = 1  # events that showed it

    def to_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "path": self.path,
            "kind": self.kind,
            "atSeconds": round(self.at_s, 1),
            "cause": self.cause,
            "before": self.before,
            "count": self.count,
        }

    def message(self) -> str:
        what = {
            ("old", "unlimited"): "pods' requests.{r} was left without a limit",
            ("old", "blocked"): "pods' requests.{r} was limited to 0",
            ("new", "unlimited"): "DRA claims for {r} were left without a limit",
            ("new", "blocked"): "DRA claims for {r} were limited to 0",
            ("kueue", "blocked"): "Kueue's quota for it was gone or 0 (nothing requesting it is admitted)",
        }[(self.path, self.kind)]
        r = self.subject.rsplit(" ", 1)[-1]
        return f"{self.subject}: {what.format(r=r)} at {self.at_s:.1f}s ({self.cause}; before the plan: {self.before})"


def _fmt(v: Decimal | None) -> str | None:
    return None if v is None else str(v)


@dataclass
class ContinuityCheck:
    """Fed every state of the twin in order (`observe`); the first state is the baseline: what each
    namespace and queue had before the plan ran. Pure: no clock, no API."""

    baseline: View | None = None
    events: int = 0
    violations: dict[tuple[str, str, str], Violation] = field(default_factory=dict)

    def observe(self, view: View, at_s: float, cause: str) -> None:
        self.events += 1
        if self.baseline is None:
            self.baseline = view
            return
        base = self.baseline
        for (ns, r), had in base.limits.items():
            old_before = had.get(OLD)
            if old_before is None:
                continue  # never limited: nothing to continue
            now = view.limits.get((ns, r), {OLD: None, NEW: None})
            subject = f"namespace {ns} {r}"
            self._judge(subject, OLD, now.get(OLD), old_before, at_s, cause)
            preexisting_gap = base.dra_live and r in base.served and had.get(NEW) is None
            if view.dra_live and r in view.served and not preexisting_gap:
                self._judge(subject, NEW, now.get(NEW), old_before, at_s, cause)
        for (cq, flavor, r), q in base.queues.items():
            if q is None:
                continue
            now_q = view.queues.get((cq, flavor, r))
            if now_q is None or (now_q == 0 and q > 0):
                self._add(f"ClusterQueue {cq} flavor {flavor} {r}", "kueue", "blocked", at_s, cause, _fmt(q))

    def _judge(self, subject: str, path: str, now: Decimal | None, before: Decimal, at_s: float, cause: str) -> None:
        if now is None:
            self._add(subject, path, "unlimited", at_s, cause, _fmt(before))
        elif now == 0 and before > 0:
            self._add(subject, path, "blocked", at_s, cause, _fmt(before))

    def _add(self, subject: str, path: str, kind: str, at_s: float, cause: str, before: str | None) -> None:
        key = (subject, path, kind)
        if key in self.violations:
            self.violations[key].count += 1
        elif len(self.violations) < MAX_VIOLATIONS:
            self.violations[key] = Violation(subject, path, kind, at_s, cause, before)

    def to_dict(self) -> dict[str, Any]:
        base = self.baseline
        return {
            "events": self.events,
            "namespaces": sorted(
                {f"{ns} {r}" for (ns, r), had in (base.limits.items() if base else ()) if had.get(OLD) is not None}
            ),
            "queues": sorted(f"{cq} {f} {r}" for (cq, f, r), q in (base.queues.items() if base else ()) if q),
            "violations": [v.to_dict() for v in self.violations.values()],
        }

    def failure(self) -> str | None:
        if not self.violations:
            return None
        first = next(iter(self.violations.values()))
        more = f" (+{len(self.violations) - 1} more)" if len(self.violations) > 1 else ""
        return f"quota continuity: {first.message()}{more}"


# -- the watch on the twin ----------------------------------------------------------------------------

QUOTAS = "/api/v1/resourcequotas"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLUSTER_QUEUES = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"


class ContinuityWatch:
    """Informers on the twin's ResourceQuotas, DeviceClasses, ResourceSlices and Kueue ClusterQueues (when
    served); every event re-computes the view and feeds the check, under one lock, in arrival order."""

    def __init__(self, kube: Kube, pairs: Mapping[str, set[str]], *, kueue: bool) -> None:
        self.check = ContinuityCheck()
        self._pairs = pairs
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._informers = {
            "ResourceQuota": Informer(kube, QUOTAS),
            "DeviceClass": Informer(kube, CLASSES),
            "ResourceSlice": Informer(kube, SLICES),
        }
        if kueue:
            self._informers["ClusterQueue"] = Informer(kube, CLUSTER_QUEUES)
        self._threads: list[threading.Thread] = []
        self._dra_live = False

    def start(self, timeout_s: float = 60) -> None:
        for kind, inf in self._informers.items():
            self._threads.append(inf.run(self._handler(kind), name=f"continuity {kind}"))
        deadline = time.monotonic() + timeout_s
        for inf in self._informers.values():
            inf.synced.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._t0 = time.monotonic()
            self.check = ContinuityCheck()  # the baseline: every collection listed, before the plan runs
            self.check.observe(self._view(), 0.0, "before the plan")

    def _handler(self, kind: str) -> Callable[[Event], None]:
        return lambda event: self._on_event(kind, event)

    def _on_event(self, kind: str, event: Event) -> None:
        with self._lock:
            if not all(i.synced.is_set() for i in self._informers.values()):
                return  # the first lists: the baseline is taken once all are in
            if kind == "ResourceSlice":
                live = bool(self._informers["ResourceSlice"].objects())
                if live == self._dra_live:
                    return
            meta = _map(event.object.get("metadata"))
            where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
            self.check.observe(self._view(), time.monotonic() - self._t0, f"{event.type} {kind} {where}")

    def _view(self) -> View:
        classes = self._informers["DeviceClass"].objects()
        self._dra_live = bool(self._informers["ResourceSlice"].objects())
        cqs = self._informers["ClusterQueue"].objects() if "ClusterQueue" in self._informers else []
        return make_view(self._informers["ResourceQuota"].objects(), classes, self._pairs, cqs, self._dra_live)

    def seen(self, kind: str, key: str) -> Obj | None:
        """The object as the watch last saw it ("namespace/name", or "name" when cluster-scoped)."""
        return self._informers[kind].get(key)

    def stop(self) -> ContinuityCheck:
        for inf in self._informers.values():
            inf.close()
        for t in self._threads:
            t.join(timeout=5)
        with self._lock:
            return self.check


def kueue_served(kube: Kube) -> bool:
    try:
        return kube.get_or_none("/apis/kueue.x-k8s.io/v1beta1") is not None
    except ApiError:
        return False
