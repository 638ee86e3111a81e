"""The report's long sections at fleet size: summarized per stage, wave, kind or cause, with the detail that
matters kept whole (failures, nodes not verified, gangs broken more than once, blockers).

A table of at most DETAIL rows is shown as it is, so a report of a small fleet reads as before. Past that,
a reviewer cannot read it: at 10,000 nodes the per-step timeline alone was 90,000 rows (a 24 MB HTML page).
Every row stays in `report -o json` (the JSON is `Report.to_dict()`, untouched by this module), and each
summary says where: the key of the JSON, or `status PLAN -o wide` for the steps per node.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from dra_migrate.checks.grouping import group_findings
from dra_migrate.checks.model import objects_text
from dra_migrate.render.checks import findings_table
from dra_migrate.render.plan import step_params, subject_of, undo_text
from dra_migrate.render.view import Badge, Section, Table, first_few, text

DETAIL = 100  # rows a table shows as they are; past that, the section is summarized
NAMES = 10  # names in one cell before "(+N more)" (a wave's nodes, a finding's objects, a group's pools)
IN_JSON = "every row: `report -o json`"


def detailed(rows: list[Any]) -> bool:
    """Whether a table of these rows is shown row by row."""
    return len(rows) <= DETAIL


def fingerprint_summary(s: Section, objects: list[dict[str, Any]]) -> None:
    """The fingerprinted objects counted per kind."""
    per = Counter(str(o["kind"]) for o in objects)
    s.p(f"{len(objects)} object(s), counted per kind ({IN_JSON}, `fingerprint.objects`: uid and content hash).")
    s.table(["kind", "objects"], [[k, n] for k, n in sorted(per.items())])


def findings_summary(s: Section, findings: list[dict[str, Any]]) -> None:
    """Every blocker on its own row; warnings and infos one row per rule and severity, counted."""
    blockers = [f for f in findings if f["severity"] == "blocker"]
    others = [f for f in findings if f["severity"] != "blocker"]
    s.p(
        f"{len(findings)} findings: every blocker below on its own row, then the warnings and infos one row per "
        f"rule, counted ({IN_JSON}, `findings`; `dra-migrate check -o wide`)."
    )
    s.add(findings_rows(blockers, empty="No blockers."))
    # One row per rule and severity: `check` groups by cause too (rule and remediation), but a rule whose
    # remediation names its object (gang-workload-split, per gang) would still be a row per finding.
    rows: dict[tuple[str, str], list[Any]] = {}
    for g in group_findings(others):
        row = rows.setdefault((g.severity, g.id), [g.severity, g.id, 0, g.messages[0], [], [g.remediation]])
        row[2] += g.count
        row[4] += list(g.objects)
        row[5] += [] if g.remediation in row[5] else [g.remediation]
    s.table(
        ["severity", "id", "findings", "first", "objects", "remediation"],
        [[*r[:4], _objects(r[4]), r[5][0] + (f" (+{len(r[5]) - 1} other remediations)" if len(r[5]) > 1 else "")]
         for r in rows.values()],
        empty="No warnings or infos.",
    )  # fmt: skip


def findings_rows(findings: list[dict[str, Any]], empty: str = "No findings.") -> Table:
    """`check`'s findings table, a finding's objects and pools named up to NAMES."""
    return findings_table(findings, NAMES, empty)


def _objects(objects: list[Any]) -> str:
    return first_few([str(o) for o in objects_text(objects)], NAMES)


def names(items: list[str]) -> str:
    return first_few(items, NAMES)


def grouped(
    rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], tuple[Any, ...]], name: str
) -> list[tuple[tuple[Any, ...], list[str]]]:
    """Rows of the same `key` together, in the order the first comes, with the `name` of each."""
    out: dict[tuple[Any, ...], list[str]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(str(r[name]))
    return list(out.items())


def strategies_summary(s: Section, ways: list[dict[str, Any]]) -> None:
    """How the pools are cut over, one row per strategy, platform, stack owner and reason."""
    sub = s.sub("strategies", f"How each pool is cut over ({len(ways)})")
    sub.p(f"One row per way and reason, its pools counted ({IN_JSON}, `strategies`).")

    def key(x: dict[str, Any]) -> tuple[Any, ...]:
        return (x["strategy"], x.get("platform") or "-", x.get("stackOwner") or "-", x["why"],
                ", ".join(x.get("sources") or []) or "-")  # fmt: skip

    sub.table(
        ["pools", "strategy", "platform", "gpu stack", "why", "sources"],
        [[f"{len(pools)}: {names(pools)}", *k] for k, pools in grouped(ways, key, "pool")],
    )


def capacity_summary(s: Section, capacity: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Past DETAIL pools: each pool and resource that does not fit, then the totals per resource over all."""
    short = [c for c in capacity if not c["fits"]]
    per: dict[str, list[dict[str, Any]]] = {}
    for c in capacity:
        per.setdefault(str(c["resource"]), []).append(c)
    totals = [
        {
            "pool": f"all {len({c['pool'] for c in cs})} pools",
            "resource": resource,
            "before": sum(c["before"] for c in cs),
            "after": sum(c["after"] or 0 for c in cs),
            "demand": sum(c["demand"] for c in cs),
            "fits": all(c["fits"] for c in cs),
            "deviceClass": ", ".join(sorted({str(c["deviceClass"]) for c in cs if c["deviceClass"]})) or None,
            "sharingReplicas": 1,
            "afterSource": "total",
        }
        for resource, cs in per.items()
    ]
    s.p(
        f"{len(capacity)} pool and resource rows: each of the {len(short)} that do not fit, then the totals per "
        f"resource ({IN_JSON}, `capacity`; `dra-migrate check -o wide`)."
    )
    return short + totals


def pools_summary(s: Section, pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Past DETAIL pools, their totals as one row (each pool short of capacity is under Capacity)."""

    def total(key: str) -> dict[str, int] | None:
        maps = [p.get(key) for p in pools]
        if all(m is None for m in maps):
            return None
        out: Counter[str] = Counter()
        for m in maps:
            out.update(m or {})
        return dict(sorted(out.items()))

    s.p(f"{len(pools)} pools, totalled ({IN_JSON}, `inventory.pools`; each pool short of capacity: Capacity above).")
    nodes = sum(p["nodes"] if isinstance(p["nodes"], int) else len(p["nodes"]) for p in pools)
    return [
        {
            "name": f"all {len(pools)} pools",
            "nodes": nodes,
            "allocatable": total("allocatable"),
            "requested": total("requested"),
            "consumers": None,  # a consumer on several pools is counted in each: no total
            "draDevices": total("draDevices"),
        }
    ]


def gangs_summary(s: Section, gangs: list[dict[str, Any]]) -> None:
    """Gangs counted by how many times they are broken; the DETAIL broken most often named."""
    times = Counter(len(g["waves"]) for g in gangs)
    s.p(
        f"{len(gangs)} gang(s), counted by the times each is broken (once is the least a migration can do); "
        f"then the {min(DETAIL, len(gangs))} broken most often ({IN_JSON}, `summary.gangs`)."
    )
    s.table(["times broken", "gangs"], [[k, n] for k, n in sorted(times.items())])
    worst = sorted(gangs, key=lambda g: -len(g["waves"]))[:DETAIL]
    s.table(
        ["gang", "waves that evict it", "times broken"],
        [[g["gang"], names(list(g["waves"])), len(g["waves"])] for g in worst],
    )


def waves_summary(s: Section, waves: list[Any]) -> None:
    """The waves counted per stage: how many, the most nodes one takes out at once, the pods they evict; past
    DETAIL stages, the stages of the same shape (waves, most nodes at once, soak) as one row."""
    per: dict[str, list[Any]] = {}
    for w in waves:
        per.setdefault(w.stage, []).append(w)
    rows = [
        [stage, len(ws), sum(len(w.nodes) for w in ws), max(len(w.nodes) for w in ws),
         sum(w.evicted_pods for w in ws), ", ".join(sorted({str(w.soak_after) for w in ws}))]
        for stage, ws in per.items()
    ]  # fmt: skip
    how = "per stage"
    if len(rows) > DETAIL:
        how = "stages of the same shape (waves, most nodes at once, soak) together"
        shapes: dict[tuple[Any, ...], list[list[Any]]] = {}
        for r in rows:
            shapes.setdefault((r[1], r[3], r[5]), []).append(r)
        rows = [
            [f"{len(rs)}: {names([r[0] for r in rs])}", k[0], sum(r[2] for r in rs), k[1], sum(r[4] for r in rs), k[2]]
            for k, rs in shapes.items()
        ]
    s.p(
        f"{len(waves)} waves, {how} ({IN_JSON}, `stages[].waves`; each wave and its nodes: "
        "`dra-migrate show PLAN -o wide`)."
    )
    s.table(["stage", "waves", "nodes", "most nodes unavailable at once", "pods evicted", "soak after each"], rows)


def step_rows(steps: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A stage's step table as rows (what stages sharing one are grouped by)."""
    return [
        (
            x["id"],
            x["action"],
            x["target"],
            step_params(x.get("params") or {}, quiet=False, what=subject_of(x["action"])),
            x["timeout"],
            undo_text({"action": x["undo"], "restore": x.get("restore") or {}}) if x["undo"] else "-",
        )
        for x in steps
    ]


def stage_steps(s: Section, group: list[dict[str, Any]], rows: list[tuple[Any, ...]]) -> None:
    """One stage, or stages of the same steps and blockers, and the steps each of their nodes goes through."""
    st = group[0]
    title = f"Stage {st['name']}" if len(group) == 1 else f"Stages {st['name']} and {len(group) - 1} more"
    sub = s.sub(f"stage-{st['name']}", title)
    blocked = st.get("blockedBy") or []
    sub.blocks.append(Badge("blocked by " + ", ".join(blocked), "bad") if blocked else Badge("applicable", "good"))
    if len(group) > 1:
        pools = [str(x["pool"]) for x in group]
        resources = sorted({r for x in group for r in x["resources"]})
        sub.p(f"{len(group)} pools {names(pools)} · resources {', '.join(resources)} · every node, in order:")
    elif st["pool"]:
        sub.p(f"pool {st['pool']} · resources {', '.join(st['resources'])} · every node, in order:")
    sub.table(["step", "action", "target", "sets", "timeout", "undo"], [list(x) for x in rows])


def diff_rows_summary(s: Section, rows: list[list[Any]]) -> list[list[Any]]:
    """The diff's changes with its waves and nodes counted per kind of change and stage (a wider wave moves
    most of a fleet's nodes), or per kind of change alone past DETAIL stages; every other change (stages,
    parameters, findings, DeviceClasses) kept."""
    per: dict[tuple[str, str], Counter[str]] = {}
    for r in rows:
        if r[0] == "wave":  # ["wave", "S/W", "added" | "removed"]
            per.setdefault(("waves", str(r[2])), Counter())[str(r[1]).split("/")[0]] += 1
        elif r[0] == "node":  # "added in S/W", "removed from S/W", "moved S/W -> S2/W2"
            words = str(r[2]).split()
            stage = (words[1] if words[0] == "moved" else words[-1]).split("/")[0]
            per.setdefault(("nodes", words[0]), Counter())[stage] += 1
    s.p(
        f"Waves and nodes added, removed or moved are counted per kind of change and stage ({IN_JSON}, "
        "`diff.summary.waves`, `diff.summary.nodes`)."
    )
    counted: list[list[Any]] = []
    stages = sum(len(c) for c in per.values())
    for (what, change), c in per.items():
        if stages <= DETAIL:
            counted += [[what, f"{n} of stage {stage}", change] for stage, n in c.items()]
        else:
            counted.append([what, f"{sum(c.values())} of {len(c)} stages: {names(list(c))}", change])
    return [r for r in rows if r[0] not in ("wave", "node")] + counted


def diff_details_summary(s: Section, details: list[dict[str, Any]]) -> None:
    """The diff's details counted per field (list positions left out) and change, with the first of each."""
    per: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in details:
        per.setdefault((re.sub(r"\[[^\]]*\]", "[]", str(d["path"])), str(d["change"])), []).append(d)
    s.p(f"Counted per field and change, the first of each shown ({IN_JSON}, `diff.details`; `dra-migrate diff A B`).")
    s.table(
        ["field", "change", "values", "first", "A", "B"],
        [[path, change, len(ds), ds[0]["path"], names([_short(ds[0].get("old"))]), names([_short(ds[0].get("new"))])]
         for (path, change), ds in per.items()],
    )  # fmt: skip


def _short(value: Any) -> str:
    out = "-" if value is None else text(value)
    return out if len(out) <= 80 else out[:77] + "..."


# --- the journal ----------------------------------------------------------------------------------------


def per_wave(
    rows: list[dict[str, Any]], clean: Callable[[dict[str, Any]], bool]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Rows per (stage, wave); per stage (wave "all N") when that is more than DETAIL rows (a plan of 400
    pools of 5 waves is 2,000 waves); and past DETAIL stages, the stages whose every row is `clean` as one."""
    per: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for x in rows:
        per.setdefault((str(x["stage"] or "-"), str(x["wave"] or "-")), []).append(x)
    if len(per) <= DETAIL:
        return per
    stages: dict[str, list[dict[str, Any]]] = {}
    waves: dict[str, int] = {}
    for (stage, _), xs in per.items():
        stages.setdefault(stage, []).extend(xs)
        waves[stage] = waves.get(stage, 0) + 1
    if len(stages) <= DETAIL:
        return {(stage, f"all {waves[stage]}"): xs for stage, xs in stages.items()}
    out = {(stage, f"all {waves[stage]}"): xs for stage, xs in stages.items() if not all(map(clean, xs))}
    rest = [stage for stage in stages if (stage, f"all {waves[stage]}") not in out]
    if rest:
        out[(f"{len(rest)} other stages: {names(rest)}", "all")] = [x for stage in rest for x in stages[stage]]
    return out


def _state(e: dict[str, Any]) -> str:
    return str(e["result"] or "never ended")


def steps_summary(s: Section, entries: list[dict[str, Any]], rows: Callable[[list[dict[str, Any]]], list[list[Any]]],
                  headers: list[str], what: str) -> None:  # fmt: skip
    """Steps per stage and wave (how many, their results, first start and last end); then every step that
    did not end ok, row by row."""
    per = per_wave(entries, lambda e: e["result"] == "ok")
    s.p(
        f"{len(entries)} {what}, per stage and wave; every one that did not end ok is listed after "
        f"({IN_JSON}, `timeline`; per node: `dra-migrate status PLAN -o wide`)."
    )
    s.table(
        ["stage", "wave", "steps", "ok", "not ok", "first started", "last ended"],
        [
            [
                stage,
                wave,
                len(es),
                sum(1 for e in es if e["result"] == "ok"),
                ", ".join(f"{n} {k}" for k, n in Counter(_state(e) for e in es if e["result"] != "ok").items()) or "-",
                min((str(e["started"]) for e in es if e["started"]), default="-"),
                max((str(e["ended"]) for e in es if e["ended"]), default="-"),
            ]
            for (stage, wave), es in per.items()
        ],
    )
    bad = [e for e in entries if e["result"] != "ok"]
    s.p(f"Not ended ok ({len(bad)}):")
    s.table(headers, rows(bad), empty="None: every one ended ok.")


def gates_summary(s: Section, gates: list[dict[str, Any]]) -> None:
    """Health gates: the failed ones row by row, the others counted."""
    bad = [g for g in gates if g["result"] != "ok"]
    s.p(f"{len(gates)} gate(s), {len(gates) - len(bad)} ok; every other one below ({IN_JSON}, `timeline.gates`).")
    s.table(
        ["time", "stage", "wave", "result", "pending GPU pods"],
        [[x["time"], x["stage"], x["wave"], x["result"], names(list(x["pending"]))] for x in bad],
        empty="No gate failed.",
    )


def node_verdict(n: dict[str, Any]) -> str:
    states = (n["waitDraReady"], n["canary"])
    if states == ("ok", "ok"):
        return "verified"
    for bad in ("failed", "interrupted", "rolled-back"):
        if bad in states:
            return bad
    return "not-run" if "ok" not in states else "incomplete"


VERDICTS = ("verified", "failed", "interrupted", "rolled-back", "incomplete", "not-run")


def verification_summary(s: Section, nodes: list[dict[str, Any]], columns: list[str]) -> None:
    """Nodes per stage and wave by verdict; every node failed, interrupted, rolled back or half done named."""
    per = {
        k: Counter(node_verdict(n) for n in ns)
        for k, ns in per_wave(nodes, lambda n: node_verdict(n) == "verified").items()
    }
    s.p(
        f"{len(nodes)} node(s) per stage and wave; each one neither verified nor still to run is listed after "
        f"({IN_JSON}, `verification.nodes`; per node: `dra-migrate status PLAN -o wide`)."
    )
    s.table(
        ["stage", "wave", "nodes", *VERDICTS],
        [[stage, wave, sum(c.values()), *(c[v] for v in VERDICTS)] for (stage, wave), c in per.items()],
    )
    odd = [n for n in nodes if node_verdict(n) not in ("verified", "not-run")]
    s.p(f"Nodes not verified ({len(odd)}):")
    s.table(
        ["stage", "wave", "node", *columns],
        [[n["stage"], n["wave"], n["node"], n["waitDraReady"], n["canary"]] for n in odd],
        empty="None: every node is verified or still to run.",
    )


def consumers_summary(consumers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The DETAIL consumers holding the most GPUs (ties in the inventory's order)."""
    order = sorted(range(len(consumers)), key=lambda i: -sum(consumers[i]["totals"].values()))
    return [consumers[i] for i in sorted(order[:DETAIL])]
