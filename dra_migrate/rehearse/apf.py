"""API Priority and Fairness for the tool, and the API server's own count of its requests on the twin.

`flow_objects` is the FlowSchema and PriorityLevelConfiguration shipped in deploy/apf.yaml (a unit test
keeps the file equal to them): the tool's ServiceAccount gets a priority level of its own, so a migration's
requests neither compete with the workloads' in global-default nor can they crowd out the system's. Why
these figures: the built-in levels' nominal shares are workload-high 40, global-default 20, workload-low 100,
leader-election 10 and catch-all 5 (k8s.io/apiserver@v0.37.2 pkg/apis/flowcontrol/bootstrap/default.go);
a migration is a background job of a few requests a second, so it gets leader-election's 10, lends half
of it when idle, and queues (not rejects) when its seats are taken. The schema's precedence 1000 comes
after the mandatory and system schemas (up to kube-system-service-accounts, 900) and before
service-accounts (9000), which would otherwise classify a ServiceAccount into workload-low.

On the twin, `tool_identity` runs the executor as that ServiceAccount with the schema installed, and
`RequestMeter` reads how many requests the API server dispatched for it
(apiserver_flowcontrol_dispatched_requests_total{flow_schema="dra-migrate"}, KEP-1040's metrics) and how
many it rejected with 429, between two moments and at its busiest.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from dra_migrate.cluster.yamlio import load_yaml_documents
from dra_migrate.sim.kube import ApiError, Kube, path_of

NAME = "dra-migrate"
NAMESPACE = "dra-migrate"
FLOW_API = "flowcontrol.apiserver.k8s.io/v1"
NOMINAL_SHARES = 10
LENDABLE_PERCENT = 50
PRECEDENCE = 1000


def flow_objects(namespace: str = NAMESPACE, service_account: str = NAME) -> list[dict[str, Any]]:
    """The PriorityLevelConfiguration and the FlowSchema that classifies the ServiceAccount into it."""
    level = {
        "apiVersion": FLOW_API,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": NAME},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": NOMINAL_SHARES,
                "lendablePercent": LENDABLE_PERCENT,
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 50},
                },
            },
        },
    }
    schema = {
        "apiVersion": FLOW_API,
        "kind": "FlowSchema",
        "metadata": {"name": NAME},
        "spec": {
            "priorityLevelConfiguration": {"name": NAME},
            "matchingPrecedence": PRECEDENCE,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {"kind": "ServiceAccount", "serviceAccount": {"name": service_account, "namespace": namespace}}
                    ],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "clusterScope": True,
                            "namespaces": ["*"],
                        }
                    ],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }
    return [level, schema]


def install_flow_objects(kube: Kube) -> None:
    for obj in flow_objects():
        plural = "prioritylevelconfigurations" if obj["kind"] == "PriorityLevelConfiguration" else "flowschemas"
        kube.create_or_exists(path_of(FLOW_API, plural), obj)


def tool_identity(kube: Kube, admin_kubeconfig: Path, into: Path) -> Path:
    """A kubeconfig for the twin's executor as the ServiceAccount dra-migrate/dra-migrate, classified by
    the FlowSchema above. On the private twin it is bound to cluster-admin (the rehearsal also creates what
    the tool would not, e.g. its namespaces); deploy/rbac holds what a real cluster grants it."""
    kube.create_or_exists("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    kube.create_or_exists(path_of("v1", "serviceaccounts", namespace=NAMESPACE), {"metadata": {"name": NAME}})
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{NAME}-twin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
    }
    kube.create_or_exists(path_of("rbac.authorization.k8s.io/v1", "clusterrolebindings"), binding)
    install_flow_objects(kube)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 86400}}
    token = kube.create(path_of("v1", "serviceaccounts", NAME, NAMESPACE, sub="token"), request)["status"]["token"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "twin", "cluster": _current_cluster(admin_kubeconfig)}],
        "users": [{"name": NAME, "user": {"token": token}}],
        "contexts": [{"name": NAME, "context": {"cluster": "twin", "user": NAME}}],
        "current-context": NAME,
    }
    path = into / "tool.kubeconfig"
    path.write_text(json.dumps(config))  # JSON is YAML: any kubeconfig reader takes it
    path.chmod(0o600)
    return path


def _current_cluster(kubeconfig: Path) -> dict[str, Any]:
    """The server and CA of the kubeconfig's current context (the twin's, written by tools/k8s/up)."""
    (data,) = load_yaml_documents(kubeconfig.read_text(), str(kubeconfig))
    contexts = {c["name"]: c["context"] for c in data.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in data.get("clusters") or []}
    return dict(clusters[contexts[data["current-context"]]["cluster"]])


_COUNTED = (
    "apiserver_request_total{",
    "apiserver_flowcontrol_dispatched_requests_total{",
    "apiserver_flowcontrol_rejected_requests_total{",
)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}\s+(\S+)")


def scrape(kube: Kube) -> dict[str, float]:
    """From the API server's /metrics: requests dispatched and rejected for the tool's FlowSchema, and all
    requests it served (apiserver_request_total summed)."""
    resp = kube._send("GET", "/metrics", (), None, None, (10, 60))
    data = resp.read()
    if not 200 <= resp.status <= 299:
        raise ApiError("GET", "/metrics", resp.status, data)
    text = data.decode() if isinstance(data, bytes) else str(data)
    out = {"tool": 0.0, "toolRejected": 0.0, "all": 0.0}
    for line in text.splitlines():
        # Most of the text is histogram buckets of other metrics: a prefix test spares them the pattern (the
        # scrape every 5 s was 4 % of the rehearsal's interpreter time, py-spy --gil, 2,000 nodes).
        if not line.startswith(_COUNTED):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2), float(m.group(3))
        ours = f'flow_schema="{NAME}"' in labels
        if name == "apiserver_flowcontrol_dispatched_requests_total" and ours:
            out["tool"] += value
        elif name == "apiserver_flowcontrol_rejected_requests_total" and ours:
            out["toolRejected"] += value
        elif name == "apiserver_request_total":
            out["all"] += value
            out[BY + _verb_resource(labels)] = out.get(BY + _verb_resource(labels), 0.0) + value
    return out


BY = "by:"  # scrape's keys of all requests by verb and resource ("by:PATCH nodes/status")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _verb_resource(labels: str) -> str:
    """ "PATCH nodes/status" of an apiserver_request_total sample's labels (verb, resource, subresource)."""
    found = dict(_LABEL.findall(labels))
    sub = found.get("subresource", "")
    return f"{found.get('verb', '?')} {found.get('resource', '') or '-'}{'/' + sub if sub else ''}"


class RequestMeter:
    """Samples `scrape` every `every_s` seconds between `start` and `stop`; `summary` gives the totals and
    the busiest interval's rate of the tool's requests."""

    def __init__(self, kube: Kube, every_s: float = 5.0) -> None:
        self.kube = kube
        self.every_s = every_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="apf-meter", daemon=True)

    def start(self) -> None:
        self.samples.append((time.monotonic(), scrape(self.kube)))
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.samples.append((time.monotonic(), scrape(self.kube)))
            except (ApiError, OSError):
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.every_s + 60)
        self.samples.append((time.monotonic(), scrape(self.kube)))

    def summary(self, migrated_nodes: int) -> dict[str, Any]:
        (t0, first), (t1, last) = self.samples[0], self.samples[-1]
        tool = last["tool"] - first["tool"]
        peak = _peak(self.samples, "tool")
        by = {
            k[len(BY) :]: last[k] - first.get(k, 0.0) for k in last if k.startswith(BY) and last[k] > first.get(k, 0.0)
        }
        busiest = sorted(by.items(), key=lambda kv: -kv[1])[:TOP_REQUESTS]
        return {
            "toolRequests": round(tool),
            "toolRequestsPerMigratedNode": round(tool / migrated_nodes, 1) if migrated_nodes else None,
            "toolPeakRequestsPerSecond": round(peak, 1),
            "toolMeanRequestsPerSecond": round(tool / (t1 - t0), 1) if t1 > t0 else None,
            "toolRejected429": round(last["toolRejected"] - first["toolRejected"]),
            "allRequests": round(last["all"] - first["all"]),
            "allPeakRequestsPerSecond": round(_peak(self.samples, "all"), 1),
            # Every client's requests (KWOK's, the controllers', the scheduler's, the tool's), the busiest
            # kinds, per migrated node: where a node's writes come from.
            "allPerMigratedNodeByRequest": (
                {k: round(v / migrated_nodes, 2) for k, v in busiest} if migrated_nodes else None
            ),
            "sampleSeconds": self.every_s,
        }


TOP_REQUESTS = 12


def _peak(samples: list[tuple[float, dict[str, float]]], key: str) -> float:
    """The busiest interval's rate of `key` between consecutive samples."""
    return max(
        ((b[key] - a[key]) / (tb - ta) for (ta, a), (tb, b) in itertools.pairwise(samples) if tb > ta),
        default=0.0,
    )
