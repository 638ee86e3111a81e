"""Which cluster a snapshot, plan or journal came from, and the refusal to mix two clusters.

A cluster's identity is the uid of its `kube-system` Namespace: created once with the cluster, never
reused, readable with `get namespaces/kube-system`, and the same whatever the kubeconfig calls the
cluster (the convention Kubernetes tooling uses for a cluster id, e.g. the OpenTelemetry collector's
k8sattributes `k8s.cluster.uid`). The API server URL and the context name are kept beside it for
humans only: two contexts may name one cluster, and one URL may front two clusters over time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dra_migrate.errors import InputError

ALLOW_HINT = "pass --allow-other-cluster if comparing two clusters is the point"


@dataclass(frozen=True)
class ClusterIdentity:
    uid: str | None  # the kube-system Namespace's metadata.uid; None when it could not be read
    server: str | None = None
    context: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"uid": self.uid, "server": self.server, "context": self.context}

    @classmethod
    def from_dict(cls, value: Any) -> ClusterIdentity | None:
        if not isinstance(value, dict):
            return None

        def text(key: str) -> str | None:
            v = value.get(key)
            return str(v) if isinstance(v, str) and v else None

        return cls(text("uid"), text("server"), text("context"))

    def describe(self) -> str:
        """`prod-east (https://10.0.0.1:6443, kube-system uid 1f2e…)`: the names for humans, the uid as proof."""
        name = self.context or self.server or "an unnamed cluster"
        details = [d for d in (self.server if self.context else None, f"kube-system uid {self.uid}") if d]
        return f"{name} ({', '.join(details)})"


def refuse_other_cluster(
    a: ClusterIdentity | None, a_what: str, b: ClusterIdentity | None, b_what: str, *, allow: bool = False
) -> None:
    """Refuse to combine two inputs of two clusters, naming both. Only a recorded uid decides: an input
    that does not know its cluster (a plain `kubectl get` dump, an older plan) is not refused."""
    if allow or a is None or b is None or not a.uid or not b.uid or a.uid == b.uid:
        return
    raise InputError(f"{a_what} is of cluster {a.describe()}, but {b_what} is of cluster {b.describe()}", ALLOW_HINT)


# The `cluster` object of every JSON output. Here, beside the identity, not in `state.py`: `show -o json`
# of a plan needs it and none of the cluster model (issue 29 holds `show`'s memory to 5x the plan file).
CLUSTER_KEYS = ("name", "kubernetesVersion", "source", "location", "context", "takenAt")


def cluster_object(
    name: str,
    kubernetes_version: str | None,
    source: str,
    location: str | None = None,
    context: str | None = None,
    taken_at: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The `cluster` object of every JSON output: the same keys everywhere (`CLUSTER_KEYS`), a value null
    when the output's input does not know it (a plan records only its cluster's name and server version);
    `extra`, keyed as it is to appear, only where there is more to say (inventory, check, match)."""
    core = dict(zip(CLUSTER_KEYS, (name, kubernetes_version, source, location, context, taken_at), strict=True))
    return {**core, **extra}
