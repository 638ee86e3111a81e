"""Findings and capacity: the views `check` prints and the report's Findings and Capacity sections show
(`findings_table`, `capacity_table`: one function each, so the two cannot disagree)."""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.grouping import SHOWN
from dra_migrate.checks.model import objects_text
from dra_migrate.render import Document, styled, verdict
from dra_migrate.render.view import Table, first_few


def _objects(objects: list[Any], limit: int = 4) -> str:
    """A finding's objects as text ("Kind namespace/name"), from either form (`ObjectRef`)."""
    return first_few(objects_text(objects), limit)


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


def _named(items: list[str], limit: int | None) -> str:
    return (", ".join(items) or "-") if limit is None else first_few(items, limit)


def finding_scope(f: dict[str, Any], limit: int | None = None) -> str:
    """ "cluster", or "pool a, b" for a finding that blocks only some pools' stages (up to `limit` named)."""
    if f.get("scope") == "pool":
        pools = [str(p) for p in f.get("pools") or []]
        return "pool " + (", ".join(pools) if limit is None else first_few(pools, limit))
    return "cluster"


def findings_table(findings: list[dict[str, Any]], limit: int | None = None, empty: str = "No findings.") -> Table:
    """Findings as rows (the JSON form: `finding_json`), every object named; with `limit`, a finding's objects
    and pools up to `limit` and how many more (the report at fleet size: a warning naming 400 pools was one
    14,000-character cell, which a Markdown table pads every row to)."""
    rows: list[list[Any]] = [
        [f["severity"], f["id"], finding_scope(f, limit), f["message"],
         _named(objects_text(f["objects"] or []), limit), f["remediation"]]
        for f in findings
    ]  # fmt: skip
    return Table(FINDING_HEADERS, rows, empty=empty)


def capacity_table(capacity: list[dict[str, Any]]) -> Table:
    return Table(CAPACITY_HEADERS, capacity_rows(capacity), wide=frozenset({"device class"}))


def check_document(report: dict[str, Any], markdown: bool = False, wide: bool = False) -> Document:
    """Readiness: findings of one rule and cause as one block (`report["groups"]`), every finding with
    `wide`; accepted findings apart; capacity per pool."""
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
    groups = report.get("groups")
    if wide or groups is None:  # every finding (a report made before groups, or -o wide)
        groups = [{**f, "count": 1} for f in report["findings"]]
    limit = 1_000_000 if wide else SHOWN
    doc.heading(f"Findings ({len(report['findings'])})")
    if markdown:
        doc.add(findings_table(report["findings"]))  # every finding: the report's table (one rendering path)
    elif not groups:
        doc.line("No findings.")
    for g in [] if markdown else groups:
        # One block per group: messages are sentences, too long for table cells on a terminal.
        count = f" ({g['count']})" if g["count"] > 1 else ""
        doc.line(styled(f"{g['severity'].upper():8} {g['id']}{count}", _SEVERITY.get(g["severity"])))
        doc.line(f"         {_message(g)}")
        if g["objects"]:
            doc.line(f"         objects: {_objects(g['objects'], limit)}")
        doc.line(f"         fix: {g['remediation']}")
    accepted = report.get("accepted") or []
    if accepted:
        doc.heading(f"Accepted risks ({len(accepted)}, not counted)")
        doc.table(
            ["severity", "id", "objects", "reason", "expires"],
            [
                [a["severity"], a["id"], _objects(a["objects"], limit), a["reason"], a["expires"] or "-"]
                for a in accepted
            ],
        )
    doc.heading("Capacity per pool, before and after")
    doc.add(capacity_table(report["capacity"]))
    return doc


def _message(group: dict[str, Any]) -> str:
    more = group["count"] - 1
    return str(group["message"]) + (f" (and {more} more like it)" if more > 0 else "")


def rules_document(rules: list[dict[str, Any]]) -> Document:
    doc = Document()
    doc.heading(f"Rules ({len(rules)})")
    doc.table(["id", "severities", "checks"], [[r["id"], ", ".join(r["severities"]), r["summary"]] for r in rules])
    doc.line("dra-migrate explain RULE says what one means, why it matters and how to fix it.")
    return doc
