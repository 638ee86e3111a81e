"""Plan diffs and drift as documents (plain text or Markdown): the verdict and summary first, details last.

Both take the `to_dict()` shapes, so the table and the JSON output cannot disagree. Sections with
nothing in them are left out: a reviewer reads only what changed.
"""

from __future__ import annotations

from typing import Any

import orjson

from dra_migrate.checks.model import objects_text
from dra_migrate.render import Document, change, styled
from dra_migrate.render.view import Table

_CELL = 60  # longest value in a details cell; JSON output has the whole value


def _value(value: Any, limit: int = _CELL) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    text = text if text != "" else '""'
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(digest: Any) -> str:
    """sha256:abcdef… -> the first 12 hex digits, enough to tell plans apart on screen."""
    text = str(digest or "")
    return text.removeprefix("sha256:")[:12] or "(no digest)"


def _code(text: str, markdown: bool) -> str:
    return f"`{text}`" if markdown else text


def details_table(details: list[dict[str, Any]]) -> Table:
    """Every value that differs between plan A and plan B (`diff` and the report's "Changes against an
    older plan" show this one table); long values cut to `_CELL` characters (JSON has them whole)."""
    rows: list[list[Any]] = [
        [
            d["path"],
            change(d["change"]),
            "-" if d["change"] == "added" else _value(d["old"]),
            "-" if d["change"] == "removed" else _value(d["new"]),
        ]
        for d in details
    ]
    return Table(["path", "change", "A", "B"], rows)


def plan_diff_document(report: dict[str, Any], markdown: bool = False) -> Document:
    doc = Document()
    s = report["summary"]
    a, b = report["a"], report["b"]
    doc.heading("Plan diff")
    doc.line(f"A: {a['cluster']['name']} (digest {_short(a['digest'])})")
    doc.line(f"B: {b['cluster']['name']} (digest {_short(b['digest'])})")
    if report["identical"]:
        doc.line("No differences: the plans are the same (ordering and digests aside).")
        return doc
    rows: list[list[Any]] = [
        ["stages", len(s["stages"]["added"]), len(s["stages"]["removed"]), f"{len(s['stages']['moved'])} moved"],
        ["waves", len(s["waves"]["added"]), len(s["waves"]["removed"]), "-"],
        ["nodes", len(s["nodes"]["added"]), len(s["nodes"]["removed"]), f"{len(s['nodes']['moved'])} moved"],
        ["parameters", "-", "-", f"{len(s['parameters'])} changed"],
        ["findings", len(s["findings"]["added"]), len(s["findings"]["removed"]), "-"],
        ["applicable", "-", "-", "changed" if s["applicable"] else "same"],
        [
            "DeviceClasses to create",
            len(s["deviceClasses"]["added"]),
            len(s["deviceClasses"]["removed"]),
            f"{len(s['deviceClasses']['changed'])} changed",
        ],
        ["details", "-", "-", f"{len(report['details'])} value(s)"],
    ]
    doc.heading("Summary")
    doc.table(["what", "added", "removed", "changed"], rows)

    if s["parameters"]:
        doc.heading("Parameters changed")
        doc.table(
            ["parameter", "A", "B"],
            [[_code(p["name"], markdown), _value(p["old"]), _value(p["new"])] for p in s["parameters"]],
        )
    if s["applicable"]:
        doc.heading("Applicability changed")
        verdict = {True: "applicable", False: "NOT applicable"}
        doc.line(f"{verdict[s['applicable']['old']]} -> {verdict[s['applicable']['new']]}")
    stage_rows = [[n, change("added"), "-", "-"] for n in s["stages"]["added"]]
    stage_rows += [[n, change("removed"), "-", "-"] for n in s["stages"]["removed"]]
    stage_rows += [[m["stage"], change("moved"), f"#{m['from']}", f"#{m['to']}"] for m in s["stages"]["moved"]]
    if stage_rows:
        doc.heading("Stages")
        doc.table(["stage", "change", "A position", "B position"], stage_rows)
    wave_rows = [[w["stage"], w["wave"], change("added")] for w in s["waves"]["added"]]
    wave_rows += [[w["stage"], w["wave"], change("removed")] for w in s["waves"]["removed"]]
    if wave_rows:
        doc.heading("Waves")
        doc.table(["stage", "wave", "change"], wave_rows)
    node_rows = [[n["node"], change("added"), "-", f"{n['stage']}/{n['wave']}"] for n in s["nodes"]["added"]]
    node_rows += [[n["node"], change("removed"), f"{n['stage']}/{n['wave']}", "-"] for n in s["nodes"]["removed"]]
    node_rows += [[n["node"], change("moved"), n["from"], n["to"]] for n in s["nodes"]["moved"]]
    if node_rows:
        doc.heading("Nodes")
        doc.table(["node", "change", "A (stage/wave)", "B (stage/wave)"], node_rows)
    finding_rows = [
        [_code(str(f["id"]), markdown), f["severity"], ", ".join(objects_text(f["objects"])) or "-", change(what)]
        for what in ("added", "removed")
        for f in s["findings"][what]
    ]
    if finding_rows:
        doc.heading("Findings")
        doc.table(["id", "severity", "objects", "change"], finding_rows)
    class_rows = [[n, change(what)] for what in ("added", "removed", "changed") for n in s["deviceClasses"][what]]
    if class_rows:
        doc.heading("DeviceClasses to create")
        doc.table(["class", "change"], class_rows)

    doc.heading(f"Details ({len(report['details'])})")
    doc.add(details_table(report["details"]))
    return doc


_DRIFT_ROWS = (
    ("serverVersion", "server version changed"),
    ("nodesAdded", "GPU nodes added"),
    ("nodesRemoved", "planned nodes removed"),
    ("nodesMoved", "planned nodes now in another pool"),
    ("labelsChanged", "planned labels changed (inverses would restore stale values)"),
    ("unschedulableChanged", "planned nodes cordoned or uncordoned since"),
    ("placementChanged", "planned plugin switches changed (the DaemonSets select otherwise)"),
    ("consumersAdded", "GPU consumers added"),
    ("consumersRemoved", "GPU consumers removed"),
    ("consumersChanged", "GPU consumers changed"),
    ("objects", "fingerprint objects that differ"),
)


def _obj(o: dict[str, Any]) -> str:
    return f"{o['kind']} {o['namespace']}/{o['name']}" if o["namespace"] else f"{o['kind']} {o['name']}"


def _gpu(totals: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(totals.items())) or "none"


def drift_document(report: dict[str, Any], markdown: bool = False) -> Document:
    doc = Document()
    s = report["summary"]
    doc.heading("Drift since the plan")
    doc.line(f"Plan: {report['plan']['cluster']['name']} (digest {_short(report['plan']['digest'])})")
    if report["holds"]:
        doc.line(styled("The plan still holds: nothing it depends on changed.", "good"))
    else:
        doc.line(styled(f"The plan NO LONGER HOLDS: {s['total']} change(s) since it was made. Regenerate it.", "bad"))
    if s["statusOnly"]:
        doc.line(
            f"{s['statusOnly']} object(s) changed status only (resourceVersion moved, uid and content the same): "
            "not drift."
        )
    if report["holds"]:
        return doc
    doc.heading("Summary")
    doc.table(["drift", "count"], [[label, s[key]] for key, label in _DRIFT_ROWS if s.get(key)])

    if report["serverVersion"]:
        v = report["serverVersion"]
        doc.heading("Server version")
        doc.line(f"{v['planned'] or 'unknown'} -> {v['now'] or 'unknown'}")
    n = report["nodes"]
    node_rows = [[x["node"], change("added"), "-", x["pool"], "-"] for x in n["added"]]
    node_rows += [
        [x["node"], change("removed"), f"{x['pool']} ({x['stage']}/{x['wave']})", "-", x["reason"]]
        for x in n["removed"]
    ]
    node_rows += [[x["node"], change("moved"), x["planned"], x["now"], "pool changed"] for x in n["moved"]]
    if node_rows:
        doc.heading("Nodes")
        doc.table(["node", "change", "planned pool", "pool now", "note"], node_rows)
    original_rows = [
        [x["node"], _code(x["key"], markdown), _value(x["planned"]), _value(x["now"])] for x in report["labelsChanged"]
    ]
    original_rows += [
        [x["node"], "(unschedulable)", _value(x["planned"]), _value(x["now"])] for x in report["unschedulableChanged"]
    ]
    if original_rows:
        doc.heading("Planned nodes' original values")
        doc.table(["node", "label", "planned", "now"], original_rows)
    placement_rows = [
        [x["node"], x["plugin"], _placement(x["planned"], markdown), _placement(x["now"], markdown)]
        for x in report.get("placementChanged") or []
    ]
    if placement_rows:
        doc.heading("Plugin placement")
        doc.line("what switching each plugin means on the node, from its DaemonSet as installed: planned and now")
        doc.table(["node", "plugin", "planned", "now"], placement_rows)
    c = report["consumers"]
    consumer_rows = [[_obj(x), change("added"), _gpu(x["gpu"])] for x in c["added"]]
    consumer_rows += [[_obj(x), change("removed"), "-"] for x in c["removed"]]
    consumer_rows += [[_obj(x), change(x["change"]), _gpu(x["gpu"])] for x in c["changed"]]
    if consumer_rows:
        doc.heading("GPU consumers")
        doc.line(
            "changed: its spec differs from the plan's (pod templates, replicas, ...); GPU now: what it requests today."
        )
        doc.table(["consumer", "change", "GPU now"], consumer_rows)
    if report["objects"]:
        doc.heading("Fingerprint")
        doc.table(
            ["object", "change", "planned (uid / content)", "now (uid / content)"],
            [[_obj(o), change(o["change"]), _recorded(o["planned"]), _recorded(o["now"])] for o in report["objects"]],
        )
    return doc


def _placement(p: dict[str, Any], markdown: bool) -> str:
    ds = p.get("daemonSet") or "no DaemonSet"
    if p.get("mode") == "label":
        switch = f"{p.get('label')}={p.get('value')}"
        return f"{_code(switch, markdown)} ({ds})"
    return f"{p.get('mode')} ({ds})"


def _recorded(r: dict[str, str] | None) -> str:
    return f"{r['uid'][:8]} / {r['content']}" if r else "-"


def plan_diff_names(report: dict[str, Any]) -> list[str]:
    """`-o name`: the paths that differ."""
    return [str(d["path"]) for d in report["details"]]


def drift_names(report: dict[str, Any]) -> list[str]:
    """`-o name`: the nodes, consumers and objects that drifted."""
    n, c = report["nodes"], report["consumers"]
    names = [f"Node {x['node']}" for kind in ("added", "removed", "moved") for x in n[kind]]
    names += [f"Node {x['node']}" for x in report.get("placementChanged") or []]
    names += [_obj(x) for kind in ("added", "removed", "changed") for x in c[kind]]
    names += [_obj(o) for o in report["objects"]]
    return list(dict.fromkeys(names))
