"""`rehearse`: the result first, then per wave what stalled, what stayed Pending and why."""

from __future__ import annotations

from typing import Any

from migrate.render import Document


def rehearsal_document(r: dict[str, Any]) -> Document:
    doc = Document()
    doc.heading("Rehearsal")
    doc.line(
        f"result {r['result'].upper()} · rehearsed {r['rehearsedDuration']} (time scale {r['timeScale']}, "
        f"unscaled) · plan's estimate {r.get('estimatedDuration') or '?'}"
    )
    if r.get("failure"):
        doc.line(f"stopped: {r['failure']}")
    end = r.get("endState") or {}
    doc.line(f"end state: {end.get('nodesMigrated', 0)} of {end.get('nodes', 0)} GPU node(s) migrated")
    doc.heading("Waves")
    doc.table(
        ["stage", "wave", "result", "seconds", "gate", "stalled drains", "pending pods"],
        [
            [w["stage"], w["wave"] or "-", w["result"], w["seconds"], w["gate"] or "-", len(w["stalledDrains"]),
             len(w["pendingPods"])]
            for w in r["waves"]
        ],
        empty="Nothing ran.",
    )  # fmt: skip
    stalled = [(w, s) for w in r["waves"] for s in w["stalledDrains"]]
    if stalled:
        doc.heading("Stalled drains")
        doc.table(
            ["stage/wave", "pod", "budgets"],
            [[f"{w['stage']}/{w['wave']}", s["pod"], ", ".join(s["budgets"]) or "-"] for w, s in stalled],
        )
    pending = [(w, p) for w in r["waves"] for p in w["pendingPods"]]
    if pending:
        doc.heading("Pods left Pending")
        doc.table(
            ["stage/wave", "pod", "scheduler's reason"],
            [[f"{w['stage']}/{w['wave']}", p["pod"], p["reason"]] for w, p in pending],
        )
    doc.heading("Capacity after, as the twin's scheduler sees it")
    doc.table(
        ["pool", "resource", "after", "demand", "fits"],
        [
            [c["pool"], c["resource"], c["after"], c["demand"], "yes" if c["fits"] else "NO"]
            for c in end.get("capacity", [])
        ],
    )
    doc.heading("Not reproduced")
    for line in r.get("unreproduced") or []:
        doc.line(f"- {line}")
    return doc
