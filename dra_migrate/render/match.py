"""`match` as tables."""

from __future__ import annotations

from typing import Any

from dra_migrate.render import Document


def match_document(report: dict[str, Any]) -> Document:
    doc = Document()
    doc.heading("Devices each DeviceClass selects")
    rows = []
    for c in report["classes"]:
        label = c["name"] + (" (proposed)" if c["proposed"] else "")
        if not c["pools"]:
            rows.append([label, c["extendedResourceName"] or "-", "-", 0, 0, "-"])
        for p in c["pools"]:
            sources = sorted({n["source"] for n in p["nodes"]})
            rows.append(
                [label, c["extendedResourceName"] or "-", p["pool"], len(p["nodes"]), p["devices"], "/".join(sources)]
            )
    doc.table(
        ["device class", "extendedResourceName", "pool", "nodes", "devices", "source"], rows, empty="No DeviceClasses."
    )
    doc.line("source: published = the node's ResourceSlices; predicted = what the NVIDIA DRA driver would publish")
    for c in report["classes"]:
        if c["evaluationErrors"]:
            doc.line(
                f"{c['name']}: {c['evaluationErrors']} device(s) could not be evaluated, so the scheduler cannot "
                f"allocate them with this class; first: {c['firstEvaluationError']}"
            )
    return doc
