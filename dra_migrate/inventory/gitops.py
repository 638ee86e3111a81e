"""Which GitOps controller owns an object, read from the marks the controllers put on what they apply.

An object a GitOps controller owns is reverted to its repository's copy at the next sync, so the tool never
patches it live: the change goes to the owning repository instead (docs/dependents.md "GitOps").

* Argo CD, annotation tracking (the default since Argo CD 2.x's `trackingMethod: annotation`; the only
  default in 3.x): `argocd.argoproj.io/tracking-id: <app>:<group>/<kind>:<namespace>/<name>`.
  Label tracking: `app.kubernetes.io/instance: <app>`. Source: Argo CD "Resource Tracking",
  https://argo-cd.readthedocs.io/en/release-3.3/user-guide/resource_tracking/ . Helm charts set the same
  label to their release name, so the label alone on an object Helm manages (`app.kubernetes.io/managed-by:
  Helm`) is not taken as Argo CD's.
* Flux: kustomize-controller labels what it applies `kustomize.toolkit.fluxcd.io/name` and `/namespace`
  (the Kustomization); helm-controller's releases carry `helm.toolkit.fluxcd.io/name` and `/namespace`
  (the HelmRelease). Source: https://fluxcd.io/flux/components/kustomize/kustomizations/ ("Garbage
  collection": objects are labelled with the Kustomization's name and namespace) and
  https://fluxcd.io/flux/components/helm/helmreleases/ .
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ARGO_TRACKING = "argocd.argoproj.io/tracking-id"
ARGO_INSTANCE = "app.kubernetes.io/instance"
FLUX_KUSTOMIZE = "kustomize.toolkit.fluxcd.io"
FLUX_HELM = "helm.toolkit.fluxcd.io"


@dataclass(frozen=True)
class GitOpsOwner:
    controller: str  # "argocd" or "flux"
    kind: str  # "Application", "Kustomization" or "HelmRelease"
    name: str
    namespace: str | None  # the Flux object's namespace; None for Argo CD (its namespace is not recorded)
    evidence: str  # the label or annotation it was read from

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.controller} {self.kind} {where}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "controller": self.controller,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "evidence": self.evidence,
        }


def _strmap(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def gitops_owner(obj: Mapping[str, Any]) -> GitOpsOwner | None:
    """The GitOps controller that owns `obj`, or None when no controller's mark is on it."""
    meta = _strmap(obj.get("metadata"))
    labels, annotations = _strmap(meta.get("labels")), _strmap(meta.get("annotations"))
    tracking = annotations.get(ARGO_TRACKING)
    if isinstance(tracking, str) and tracking:
        return GitOpsOwner("argocd", "Application", tracking.split(":", 1)[0], None, ARGO_TRACKING)
    for prefix, kind in ((FLUX_KUSTOMIZE, "Kustomization"), (FLUX_HELM, "HelmRelease")):
        name = labels.get(f"{prefix}/name")
        if isinstance(name, str) and name:
            ns = labels.get(f"{prefix}/namespace")
            return GitOpsOwner("flux", kind, name, ns if isinstance(ns, str) and ns else None, f"{prefix}/name")
    instance = labels.get(ARGO_INSTANCE)
    if isinstance(instance, str) and instance and labels.get("app.kubernetes.io/managed-by") != "Helm":
        return GitOpsOwner("argocd", "Application", instance, None, ARGO_INSTANCE)
    return None
