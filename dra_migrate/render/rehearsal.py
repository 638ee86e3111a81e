"""`rehearse`: the result first, then per wave what stalled, what stayed Pending and why.

The row builders are shared with the audit report's "Rehearsal" section (`report --rehearsal FILE`),
so the terminal and the report cannot tell the same rehearsal differently.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.render import Document

WAVE_HEADERS = ["stage", "wave", "result", "seconds", "gate", "stalled drains", "pending pods"]
STALLED_HEADERS = ["stage/wave", "pod", "budgets"]
PENDING_HEADERS = ["stage/wave", "pod", "scheduler's reason"]
CAPACITY_HEADERS = ["pool", "resource", "after", "demand", "fits"]


def summary_line(r: dict[str, Any]) -> str:
    estimate = r.get("estimatedDuration") or "?"
    if r.get("estimatedMaxDuration"):
        estimate += f"–{r['estimatedMaxDuration']} (budgets can hold drains)"
    return (
        f"result {str(r['result']).upper()} · rehearsed {r['rehearsedDuration']} (time scale {r.get('timeScale')}, "
        f"unscaled) · plan's estimate {estimate}"
    )


def end_line(r: dict[str, Any]) -> str:
    end = r.get("endState") or {}
    return f"end state: {end.get('nodesMigrated', 0)} of {end.get('nodes', 0)} GPU node(s) migrated"


def _where(w: dict[str, Any]) -> str:
    return f"{w.get('stage')}/{w.get('wave') or '-'}"


def wave_rows(r: dict[str, Any]) -> list[list[Any]]:
    return [
        [w["stage"], w["wave"] or "-", w["result"], w["seconds"], w.get("gate") or "-", len(w["stalledDrains"]),
         len(w["pendingPods"])]
        for w in r["waves"]
    ]  # fmt: skip


def stalled_rows(r: dict[str, Any]) -> list[list[Any]]:
    return [
        [_where(w), s.get("pod"), ", ".join(s.get("budgets") or []) or "-"]
        for w in r["waves"]
        for s in w["stalledDrains"]
    ]


def pending_rows(r: dict[str, Any]) -> list[list[Any]]:
    return [[_where(w), p.get("pod"), p.get("reason")] for w in r["waves"] for p in w["pendingPods"]]


def capacity_rows(r: dict[str, Any]) -> list[list[Any]]:
    return [
        [c["pool"], c["resource"], c["after"], c["demand"], "yes" if c["fits"] else "NO"]
        for c in (r.get("endState") or {}).get("capacity", [])
    ]


CONTINUITY_HEADERS = ["WHAT", "PATH", "WINDOW", "AT", "CAUSE", "BEFORE THE PLAN"]


def continuity_line(r: dict[str, Any]) -> str | None:
    """The quota continuity check in one line (rehearse/continuity.py), None when the rehearsal has none."""
    qc = r.get("quotaContinuity")
    if not isinstance(qc, dict):
        return None
    ns, queues, bad = len(qc.get("namespaces") or []), len(qc.get("queues") or []), len(qc.get("violations") or [])
    watched = f"{ns} namespace GPU limit(s) and {queues} Kueue quota(s) watched over {qc.get('events', 0)} state(s)"
    if bad:
        return f"quota continuity FAILED: {bad} window(s) of unlimited or blocked GPU use; {watched}"
    return f"quota continuity ok: no window of unlimited or blocked GPU use; {watched}"


def continuity_rows(r: dict[str, Any]) -> list[list[Any]]:
    return [
        [v["subject"], v["path"], v["kind"], f"{v['atSeconds']}s", v["cause"], v.get("before") or "-"]
        for v in (r.get("quotaContinuity") or {}).get("violations") or []
    ]


def rehearsal_document(r: dict[str, Any]) -> Document:
    doc = Document()
    doc.heading("Rehearsal")
    doc.line(summary_line(r))
    if r.get("failure"):
        doc.line(f"stopped: {r['failure']}")
    doc.line(end_line(r))
    if line := continuity_line(r):
        doc.line(line)
    if rows := continuity_rows(r):
        doc.heading("Windows of unlimited or blocked GPU use")
        doc.table(CONTINUITY_HEADERS, rows)
    doc.heading("Waves")
    doc.table(WAVE_HEADERS, wave_rows(r), empty="Nothing ran.")
    if stalled := stalled_rows(r):
        doc.heading("Stalled drains")
        doc.table(STALLED_HEADERS, stalled)
    if pending := pending_rows(r):
        doc.heading("Pods left Pending")
        doc.table(PENDING_HEADERS, pending)
    doc.heading("Capacity after, as the twin's scheduler sees it")
    doc.table(CAPACITY_HEADERS, capacity_rows(r))
    doc.heading("Not reproduced")
    for line in r.get("unreproduced") or []:
        doc.line(f"- {line}")
    return doc
