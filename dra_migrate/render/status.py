"""`status PLAN`: done, current and remaining per stage and node."""

from __future__ import annotations

from typing import Any

from dra_migrate.render import Document

# `status -o json`: bumped on an incompatible change; new keys may appear.
STATUS_FORMAT_VERSION = 1


def remaining_steps(report: dict[str, Any]) -> list[str]:
    """`-o name`: the ids of the steps still to run, in order."""
    return [step for s in report["stages"] for n in s["nodes"] for step in n["remaining"]]


def status_document(report: dict[str, Any]) -> Document:
    doc = Document()
    doc.heading("Progress")
    doc.line(
        f"{report['done']} of {report['steps']} step(s) done, {report['remaining']} remaining, "
        f"{report['rolledBack']} rolled back, over {report['runs']} run(s)"
    )
    last = report.get("lastRun")
    if last:
        overrides = ", ".join(f"{k}={v}" for k, v in sorted((last.get("overrides") or {}).items()))
        doc.line(
            f"last run: {last['phase']} {last.get('result') or 'not closed (crashed?)'}"
            + (f" with {overrides}" if overrides else "")
            + (f": {last['error']}" if last.get("error") else "")
        )
        left = last.get("rollbackLeft") or []
        if left:
            doc.line(f"left to undo: {len(left)} step(s), {', '.join(left[:5])}{', ...' if len(left) > 5 else ''} "
                     "(run rollback again to finish)")  # fmt: skip
    current = report["current"]
    if current and current.get("phase") == "rollback":
        doc.line(f"interrupted in the undo of: {current['stepId']} (run rollback again to finish it)")
    elif current:
        doc.line(f"interrupted in: {current['stepId']} (resume with apply, or rollback)")
    for f in report["failed"]:
        what = "the undo of " if f.get("phase") == "rollback" else ""
        doc.line(f"failed: {what}{f['stepId']}: {f.get('error', '')}")
    doc.heading("Stages")
    doc.table(
        ["stage", "node", "done", "current", "remaining"],
        [
            [
                s["stage"],
                n["node"] or "-",
                len(n["done"]),
                (n["current"] or "-").rsplit("/", 1)[-1],
                len(n["remaining"]),
            ]
            for s in report["stages"]
            for n in s["nodes"]
        ],
    )
    return doc
