"""Findings and capacity: the views `check` prints and the report's Findings and Capacity sections show
(`findings_table`, `capacity_table`: one function each, so the two cannot disagree)."""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.model import objects_text
from dra_migrate.render import Document, styled, verdict
from dra_migrate.render.view import Table


def _objects(objects: list[Any], limit: int = 4) -> str:
    """A finding's objects as text ("Kind namespace/name"), from either form (`ObjectRef`)."""
    objs = objects_text(objects)
    if len(objs) <= limit:
        return ", ".join(objs) or "-"
    return ", ".join(objs[:limit]) + f" (+{len(objs) - limit} more)"


_SEVERITY = {"blocker": "bad", "warning": "warn"}

CAPACITY_HEADERS = [
    "pool",
    "resource",
    "before (device plugin)",
    "after (DRA devices)",
    "demand",
    "fits",
    "device class",
]


def capacity_rows(capacity: list[dict[str, Any]]) -> list[list[Any]]:
    """Capacity rows (the `capacity` list of check's JSON), as `check` and `report` both show them."""
    return [
        [
            c["pool"],
            c["resource"],
            str(c["before"]) + (f" ({c['sharingReplicas']}x shared)" if c["sharingReplicas"] > 1 else ""),
            "-" if c["after"] is None else f"{c['after']} ({c['afterSource']})",
            c["demand"],
            verdict(bool(c["fits"])),
            c["deviceClass"] or "(none maps it)",
        ]
        for c in capacity
    ]


FINDING_HEADERS = ["severity", "id", "scope", "finding", "objects", "remediation"]


def finding_scope(f: dict[str, Any]) -> str:
    """"cluster", or "pool a, b" for a finding that blocks only some pools' stages."""
    if f.get("scope") == "pool":
        return "pool " + ", ".join(f.get("pools") or [])
    return "cluster"


def findings_table(findings: list[dict[str, Any]]) -> Table:
    """Findings as rows (the JSON form: `finding_json`), every object named."""
    rows: list[list[Any]] = [
        [f["severity"], f["id"], finding_scope(f), f["message"], ", ".join(objects_text(f["objects"] or [])) or "-",
         f["remediation"]]
        for f in findings
    ]  # fmt: skip
    return Table(FINDING_HEADERS, rows, empty="No findings.")


def capacity_table(capacity: list[dict[str, Any]]) -> Table:
    return Table(CAPACITY_HEADERS, capacity_rows(capacity), wide=frozenset({"device class"}))


def check_document(report: dict[str, Any], markdown: bool = False) -> Document:
    doc = Document()
    s = report["summary"]
    doc.heading("Readiness")
    doc.line(
        styled(
            f"Kubernetes {report['kubernetesVersion'] or 'version unknown'}: {s['blocker']} blocker(s), "
            f"{s['warning']} warning(s), {s['info']} info",
            "bad" if s["blocker"] else "warn" if s["warning"] else "good",
        )
    )
    doc.heading(f"Findings ({len(report['findings'])})")
    if markdown:
        doc.add(findings_table(report["findings"]))
    elif not report["findings"]:
        doc.line("No findings.")
    for f in [] if markdown else report["findings"]:
        # One block per finding: messages are sentences, too long for table cells on a terminal.
        doc.line(styled(f"{f['severity'].upper():8} {f['id']}", _SEVERITY.get(f["severity"])))
        doc.line(f"         {f['message']}")
        if f["objects"]:
            doc.line(f"         objects: {_objects(f['objects'])}")
        doc.line(f"         fix: {f['remediation']}")
    doc.heading("Capacity per pool, before and after")
    doc.add(capacity_table(report["capacity"]))
    return doc
