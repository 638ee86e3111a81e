"""The inventory: the views `inventory` prints; the report's Inventory section shows the same consumers
and pools tables (`consumers_table`, `pools_table`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from dra_migrate.render import Document, counts, styled
from dra_migrate.render.view import Table, first_few

# Kinds that exist in the core, apps or batch groups: a CRD with the same name (Knative's Service,
# Volcano's Job) is shown with its group so the table is never ambiguous.
_BUILTIN_KINDS = {"Pod", "Service", "Job", "CronJob", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"}


def _kind(c: dict[str, Any]) -> str:
    group = c["apiVersion"].rpartition("/")[0]
    if c["kind"] in _BUILTIN_KINDS and group not in ("", "apps", "batch"):
        return f"{c['kind']}.{group}"
    return str(c["kind"])


def _served_by(n: dict[str, Any]) -> str:
    """Who hands out the node's GPUs: the device plugin, DRA, both (a blocker) or neither."""
    dp, dra = bool(n["devicePluginEnabled"]), bool(n["draPluginEnabled"])
    if dp and dra:
        return styled("both", "bad")
    return "device plugin" if dp else styled("DRA", "good") if dra else "none"


def consumer_names(inv: dict[str, Any]) -> list[str]:
    """`-o name`: kind/namespace/name of each consumer (kind with its group when ambiguous)."""
    return [f"{_kind(x)}/{x['namespace'] or '-'}/{x['name']}" for x in inv["consumers"]]


CONSUMER_HEADERS = ["namespace", "kind", "name", "gpus (total)", "per pod × replicas", "pods", "pools"]
POOL_HEADERS = ["pool", "nodes", "allocatable", "requested", "GPU consumers", "dra devices"]
PLATFORM_HEADERS = ["platform", "strategy", "group", "gpu stack", "switching"]


def consumers_table(consumers: list[dict[str, Any]]) -> Table:
    """GPU consumers (the inventory's JSON form), one row each; `*` marks those counted from live pods."""
    rows: list[list[Any]] = [
        [
            x["namespace"] or "-",
            _kind(x),
            x["name"] + (" *" if x["source"] == "pods" else ""),
            counts(x["totals"]),
            "; ".join(f"{counts(t['resources'])} × {t['replicas']}" for t in x["templates"]) or "(from pods)",
            x["pods"],
            first_few(x["pools"]),
        ]
        for x in consumers
    ]
    return Table(CONSUMER_HEADERS, rows, empty="No GPU consumers.", wide=frozenset({"per pod × replicas"}))


def consumers_note(consumers: list[dict[str, Any]]) -> str | None:
    if any(x["source"] == "pods" for x in consumers):
        return "* counted from live pods: the template shows no GPU request (see notes in -o json)"
    return None


def pools_table(pools: list[dict[str, Any]], consumers: list[dict[str, Any]] | None = None) -> Table:
    """GPU pools: nodes, what the device plugin offers and what is requested, the consumers placed on them
    (counted from `consumers`, or as a pool records it), and the DRA devices already published."""

    # Counted in one pass: a pool at a time over every consumer was pools x consumers (2,000 pools).
    on = Counter(pool for c in consumers or () for pool in set(c["pools"]))

    def placed(p: dict[str, Any]) -> Any:
        return on[p["name"]] if consumers is not None else p.get("consumers")

    rows: list[list[Any]] = [
        [
            p["name"],
            len(p["nodes"]) if isinstance(p["nodes"], list) else p["nodes"],
            counts(p["allocatable"]),
            counts(p["requested"]),
            placed(p),
            counts(p["draDevices"]) if p.get("draDevices") is not None else "-",
        ]
        for p in pools
    ]
    return Table(POOL_HEADERS, rows)


def platforms_table(pools: list[dict[str, Any]]) -> Table:
    """Per pool: its platform, the strategy the plan uses for it, and (wide) its group, who manages its GPU
    stack and what switching takes (inventory/platform.py; the report's 'How each pool is cut over')."""
    rows = [[p["name"], *_platform_cells(p.get("platform"))] for p in pools]
    return Table(["pool", *PLATFORM_HEADERS], rows, wide=frozenset(PLATFORM_HEADERS[2:]))


def inventory_document(inv: dict[str, Any]) -> Document:
    """Build the human view from the inventory's JSON contract, so both always agree."""
    doc = Document()
    c = inv["cluster"]
    doc.heading("Cluster")
    doc.line(
        f"Kubernetes {c['kubernetesVersion'] or 'version unknown (state it with --kubernetes-version)'}"
        f" · {c['source']} {c['location']}"
        + (f" · context {c['context']}" if c.get("context") else "")
        + (f" · taken {c['takenAt']}" if c.get("takenAt") else "")
    )
    doc.line(
        f"Objects read: {sum(c['objects'].values()) + c['podsWithoutDevices']}"
        + (f" · skipped (kinds not read): {counts(c['skipped'])}" if c["skipped"] else "")
    )

    doc.heading(f"GPU consumers ({len(inv['consumers'])})")
    doc.add(consumers_table(inv["consumers"]))
    note = consumers_note(inv["consumers"])
    if note:
        doc.line(note)

    doc.heading(f"GPU pools ({len(inv['pools'])})")
    doc.add(pools_table(inv["pools"], inv["consumers"]))
    doc.heading(f"Platforms ({len(inv['pools'])})")
    doc.add(platforms_table(inv["pools"]))

    doc.heading(f"GPU nodes ({len(inv['nodes'])})")
    doc.table(
        [
            "node",
            "pool",
            "product",
            "allocatable",
            "requested",
            "served by",
            "device plugin",
            "dra plugin",
            "dra devices",
        ],
        [
            [
                n["name"],
                n["pool"],
                n["gfd"].get("product", "-"),
                counts(n["allocatable"]),
                counts(n["requested"]),
                _served_by(n),
                "on" if n["devicePluginEnabled"] else "off",
                "on" if n["draPluginEnabled"] else "off",
                counts(n["draDevices"]),
            ]
            for n in inv["nodes"]
        ],
        wide=["product", "requested", "device plugin", "dra plugin", "dra devices"],
    )

    _operator(doc, inv["operator"])
    _dra(doc, inv["dra"])
    return doc


def _operator(doc: Document, op: dict[str, Any]) -> None:
    doc.heading("NVIDIA stack")
    cp = op["clusterPolicy"]
    if cp:
        dp = cp["devicePlugin"]
        cfg = dp.get("config") or {}
        doc.line(
            f"ClusterPolicy {cp['name']}: state {cp['state'] or '-'}, driver {cp['driverVersion'] or '-'}, "
            f"MIG strategy {cp['migStrategy'] or '-'}, CDI {'on' if cp['cdiEnabled'] else 'off'}, device plugin "
            f"{'on' if dp['enabled'] else 'off'}"
            + (f" (config {cfg.get('name')}, default key {cfg.get('default') or '-'})" if cfg.get("name") else "")
        )
    else:
        doc.line("ClusterPolicy: none")
    if op["ignoredClusterPolicies"]:
        doc.line(f"Ignored ClusterPolicies: {', '.join(op['ignoredClusterPolicies'])}")
    for d in op["nvidiaDrivers"]:
        doc.line(f"NVIDIADriver {d['name']}: version {d['version'] or '-'}, state {d['state'] or '-'}")
    for g in op["gpuClusters"]:
        doc.line(f"GPUCluster {g['name']}: DRA driver {g['draDriverVersion'] or '-'}, state {g['state'] or '-'}")
    doc.line(f"Device-plugin DaemonSets: {', '.join(op['devicePluginDaemonSets']) or 'none'}")
    doc.table(
        ["config", "key", "strategy", "resources (advertised as × replicas)", "nodes"],
        [
            [
                f"{s['namespace']}/{s['configMap']}",
                s["key"] + (" (default)" if s["default"] else ""),
                s["error"] or s["strategy"],
                ", ".join(f"{r['advertisedAs']} × {r['replicas']}" for r in s["resources"]) or "-",
                len(s["nodes"]),
            ]
            for s in op["sharingConfigs"]
        ],
        wide=["nodes"],
        empty="Sharing configs: none",
    )


def _dra(doc: Document, dra: dict[str, Any]) -> None:
    doc.heading("DRA")
    plugin = dra["nvidiaDraPlugin"]
    doc.line(
        f"NVIDIA DRA kubelet plugin: {'installed' if plugin['installed'] else 'not installed'}"
        + (f" (DaemonSets: {', '.join(plugin['daemonSets'])})" if plugin["daemonSets"] else "")
        + f"; nodes with gpu.nvidia.com slices: {len(plugin['nodesWithSlices'])}"
    )
    doc.table(
        ["device class", "extendedResourceName", "selectors"],
        [
            [d["name"], d["extendedResourceName"] or "-", " && ".join(d["selectors"]) or "-"]
            for d in dra["deviceClasses"]
        ],
        empty="DeviceClasses: none",
    )
    claims = dra["resourceClaims"]
    ext = sum(1 for x in claims if x["extendedResourceClaim"])
    doc.line(
        f"ResourceClaims: {len(claims)} ({ext} for extended resources, "
        f"{sum(1 for x in claims if x['allocated'])} allocated); templates: {len(dra['resourceClaimTemplates'])}"
    )


def _platform_cells(platform: dict[str, Any] | None) -> list[str]:
    """platform (its provisioner and group), who manages the GPU stack, the strategy and what it takes."""
    if not platform:
        return ["-", "-", "-", "-", "-"]
    group = f"{platform['provisioner']} {platform['group']}" if platform.get("group") else "-"
    return [platform["platform"], platform["strategy"], group, platform["stackOwner"], platform["switching"]]
