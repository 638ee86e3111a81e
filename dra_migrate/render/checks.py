"""Findings and capacity as tables (plain text or Markdown)."""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.model import objects_text
from dra_migrate.render import Document, styled, verdict


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
        doc.table(
            ["severity", "id", "finding", "objects", "remediation"],
            [
                [f["severity"], f"`{f['id']}`", f["message"], _objects(f["objects"]), f["remediation"]]
                for f in report["findings"]
            ],
            empty="No findings.",
        )
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
    doc.table(CAPACITY_HEADERS, capacity_rows(report["capacity"]), wide=["device class"])
    return doc
