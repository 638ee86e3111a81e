"""Admission policies that name the GPU extended resources: they judge or change pods by their
`nvidia.com/gpu` request, and a pod that gets its GPUs from a ResourceClaim requests none. A converted
workload, or any ResourceClaim for the new DeviceClasses, passes a validating policy unjudged (a GPU limit per
namespace that no longer limits) and a mutating one unchanged (the toleration, node selector or runtime class
it added is missing).

Read from the policy engines' own objects (their spec, never their metadata or status):
- Kubernetes: ValidatingAdmissionPolicy and MutatingAdmissionPolicy (admissionregistration.k8s.io/v1; the
  mutating one GA in 1.36, k8s.io/apiserver v0.37.2 pkg/features/kube_features.go);
- Kyverno (kyverno/kyverno v1.15.2 config/crds): ClusterPolicy and Policy (kyverno.io/v1), rule by rule, a rule
  with `mutate` changing pods and any other judging them; ValidatingPolicy and MutatingPolicy
  (policies.kyverno.io/v1alpha1);
- OPA Gatekeeper (open-policy-agent/gatekeeper v3.21.0 charts/gatekeeper/crds): ConstraintTemplate
  (templates.gatekeeper.sh/v1, its Rego or CEL) and the Assign and ModifySet mutators
  (mutations.gatekeeper.sh/v1).

A policy's text is its logic, so here, unlike a ConfigMap's, the text decides. Where in the spec the name
appears is reported, so a reader can tell a selection (`matchConditions`, `preconditions`, Rego) from an
output (a toleration the policy writes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.dependents import expr_reads, ns_name
from dra_migrate.inventory.gitops import GitOpsOwner, gitops_owner

VALIDATING, MUTATING = "validating", "mutating"
# kind key -> what its policies do to a pod (None: rule by rule, Kyverno's own policies).
POLICY_KINDS: dict[str, str | None] = {
    "admissionregistration.k8s.io/ValidatingAdmissionPolicy": VALIDATING,
    "admissionregistration.k8s.io/MutatingAdmissionPolicy": MUTATING,
    "kyverno.io/ClusterPolicy": None,
    "kyverno.io/Policy": None,
    "policies.kyverno.io/ValidatingPolicy": VALIDATING,
    "policies.kyverno.io/MutatingPolicy": MUTATING,
    "templates.gatekeeper.sh/ConstraintTemplate": VALIDATING,
    "mutations.gatekeeper.sh/Assign": MUTATING,
    "mutations.gatekeeper.sh/ModifySet": MUTATING,
}
_SHOWN_PLACES = 3


@dataclass(frozen=True)
class GpuPolicy:
    kind: str  # kind key
    namespace: str
    name: str
    action: str  # VALIDATING or MUTATING
    rule: str | None  # a Kyverno rule's name
    terms: tuple[str, ...]
    places: tuple[str, ...]  # where in the spec, as paths
    owner: GitOpsOwner | None


def gpu_policies(state: ClusterState) -> list[GpuPolicy]:
    """Every policy (a Kyverno one rule by rule) whose spec names a GPU extended resource."""
    out: list[GpuPolicy] = []
    for key, action in POLICY_KINDS.items():
        for obj in state.of(key):
            spec = obj.get("spec")
            if not isinstance(spec, Mapping):
                continue
            if action is not None:
                _note(out, key, obj, action, None, spec, "spec")
                continue
            rules = spec.get("rules")
            for i, rule in enumerate(rules if isinstance(rules, list) else ()):
                if isinstance(rule, Mapping):
                    name = str(rule.get("name") or i)
                    _note(out, key, obj, MUTATING if "mutate" in rule else VALIDATING, name, rule, f"spec.rules[{i}]")
    return out


def _note(
    out: list[GpuPolicy], key: str, obj: Mapping[str, Any], action: str, rule: str | None, part: Any, at: str
) -> None:
    terms: set[str] = set()
    places: list[str] = []
    for path, text in _strings(part, at):
        found, _ = expr_reads(text)
        if found:
            terms.update(found)
            if path not in places:  # a map key and its value share a path
                places.append(path)
    if terms:
        ns, name = ns_name(obj)
        owner = gitops_owner(obj)
        out.append(GpuPolicy(key, ns, name, action, rule, tuple(sorted(terms)), tuple(places), owner))


def _strings(value: Any, at: str) -> Iterator[tuple[str, str]]:
    """(path, text) of every string in a value, keys included, in document order. An explicit stack: a
    policy is the user's data, and may nest deeper than Python recurses."""
    stack: list[tuple[Any, str]] = [(value, at)]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            yield path, v
        elif isinstance(v, Mapping):
            children = []
            for k, child in v.items():
                if isinstance(k, str):  # a Kyverno pattern keys on the resource name: `nvidia.com/gpu: "?*"`
                    children.append((k, f"{path}.{k}"))
                children.append((child, f"{path}.{k}"))
            stack.extend(reversed(children))
        elif isinstance(v, list):
            stack.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(v))))


def shown_places(p: GpuPolicy) -> str:
    more = len(p.places) - _SHOWN_PLACES
    return ", ".join(p.places[:_SHOWN_PLACES]) + (f" and {more} more" if more > 0 else "")
