"""`show PLAN`: summary first (pools, nodes, waves, disruption, duration), then the stages."""

from __future__ import annotations

from typing import Any

from migrate.render import Document

_QUIET_PARAMS = ("skip", "via", "image", "placement", "expect", "driver")


def plan_document(plan: dict[str, Any]) -> Document:
    doc = Document()
    s = plan["summary"]
    fp = plan["fingerprint"]
    doc.heading("Plan")
    doc.line(
        f"cluster {plan['cluster']} · Kubernetes {fp.get('kubernetesVersion') or '?'} · "
        f"{'applicable' if plan['applicable'] else 'NOT applicable: resolve the blockers below'}"
        + (" · edited and rebased" if plan.get("edited") else "")
    )
    doc.line(
        f"{len(s['pools'])} pool(s), {s['nodes']} node(s), {s['waves']} wave(s), {s['evictedPods']} pod(s) evicted, "
        f"estimated {s['estimatedDuration']} (soaks included)"
    )
    p = plan["parameters"]
    doc.line(
        f"waves of at most {p['maxUnavailable']} of a pool · soak {p['soak']} · drain {p['drain']} pods · "
        f"device plugin off: {p['devicePluginLabel']}={p['devicePluginOff']} · DRA on: {p['draLabel']}={p['draOn']}"
    )
    blockers = [f for f in plan["findings"] if f["severity"] == "blocker"]
    if blockers:
        doc.heading(f"Blockers ({len(blockers)})")
        for f in blockers:
            doc.line(f"{f['id']}: {f['message']}")

    doc.heading("Disruption per wave")
    doc.table(
        ["stage", "wave", "nodes", "pods evicted", "soak after"],
        [
            [st["name"], w["name"], len(w["nodes"]), w["evictedPods"], w["soakAfter"]]
            for st in plan["stages"]
            for w in st.get("waves") or []
        ],
        empty="Nothing to migrate.",
    )

    gangs = s.get("gangs") or []
    if gangs:
        doc.heading("Disruption per gang")
        doc.table(
            ["gang", "waves that evict it", "times broken"],
            [[g["gang"], ", ".join(g["waves"]), len(g["waves"])] for g in gangs],
        )

    for st in plan["stages"]:
        doc.heading(f"Stage {st['name']}")
        if "steps" in st:
            doc.table(
                ["step", "target", "timeout", "undo"],
                [
                    [x["action"], x["target"], x["timeout"], (x["inverse"] or {}).get("action", "-")]
                    for x in st["steps"]
                ],
            )
            continue
        doc.line(f"pool {st['pool']} · resources {', '.join(st['resources'])} · every node, in order:")
        doc.table(
            ["step", "action", "params", "timeout", "undo"],
            [
                [
                    x["id"],
                    x["action"],
                    # The essentials; `show -o json` has every parameter.
                    ", ".join(f"{k}={v}" for k, v in x["params"].items() if k not in _QUIET_PARAMS),
                    x["timeout"],
                    (x["inverse"] or {}).get("action", "-"),
                ]
                for x in st["nodeSteps"]
            ],
        )
        doc.table(
            ["wave", "node", "gpu pods", "other pods", "devices expected", "canary requests"],
            [
                [w["name"], n["node"], n["gpuPods"], n["otherPods"], n["expectedDevices"], n["canaryResource"]]
                for w in st["waves"]
                for n in w["nodes"]
            ],
        )
    return doc
