"""The report's reading order as view-model blocks (render/view.py), which render/ draws as Markdown and HTML.

One layout for both formats, so they cannot disagree about what a report says; it takes the
`Report.to_dict()` shape, so the JSON cannot either. Where a command shows the same thing, the section
uses that command's view function (findings, capacity), so the command and the report cannot disagree.
Sections whose source was not given say what would fill them instead of disappearing: a reviewer sees
what the report does not cover.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.plan.actions import Action
from dra_migrate.plan.estimate import estimate_text
from dra_migrate.render import to_yaml
from dra_migrate.render.checks import capacity_table
from dra_migrate.render.diff import details_table
from dra_migrate.render.disruption import WaveRow, gangs_table, waves_table
from dra_migrate.render.inventory import consumers_note, consumers_table, pools_table
from dra_migrate.render.rehearsal import (
    CAPACITY_HEADERS as REHEARSED_CAPACITY_HEADERS,
)
from dra_migrate.render.rehearsal import (
    CONTINUITY_HEADERS,
    PENDING_HEADERS,
    STALLED_HEADERS,
    WAVE_HEADERS,
    continuity_line,
    continuity_rows,
    end_line,
    pending_rows,
    stalled_rows,
    summary_line,
    wave_rows,
)
from dra_migrate.render.rehearsal import capacity_rows as rehearsed_capacity_rows
from dra_migrate.render.view import Badge, Chart, Code, Section
from dra_migrate.render.view import cell as _cell
from dra_migrate.report.accepted import accepted_risks
from dra_migrate.report.model import SINCE_PLANNING, PlanInfo, Wave, unplain
from dra_migrate.report.platforms import strategies_section
from dra_migrate.report.scale import (
    NAMES,
    capacity_summary,
    consumers_summary,
    detailed,
    diff_details_summary,
    diff_rows_summary,
    findings_rows,
    findings_summary,
    fingerprint_summary,
    gangs_summary,
    gates_summary,
    names,
    pools_summary,
    stage_steps,
    step_rows,
    steps_summary,
    strategies_summary,
    verification_summary,
    waves_summary,
)

# Section ids: stable anchors in the HTML, and what the browser test looks for.
SECTIONS = (
    ("cluster", "Cluster"),
    ("identity", "Identity"),
    ("plan", "Plan"),
    ("capacity", "Capacity before and after"),
    ("findings", "Findings"),
    ("inventory", "Inventory"),
    ("deviceclasses", "DeviceClasses to create"),
    ("stages", "Stages and waves"),
    ("rehearsal", "Rehearsal on a twin"),
    ("diff", "Changes against an older plan"),
    ("timeline", "Execution timeline"),
    ("verification", "Final verification"),
    ("fingerprint", "Fingerprinted objects"),
)
TITLES = dict(SECTIONS)
NEEDS_CLUSTER = "Not available: this section needs `--snapshot FILE` or a live cluster (`--kubeconfig`/`--context`)."


def counts(m: dict[str, int] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((m or {}).items())) or "-"


def short(digest: Any) -> str:
    return str(digest or "").removeprefix("sha256:")[:12] or "-"


def layout(r: dict[str, Any]) -> tuple[str, list[str], list[Section]]:
    """(title, lead lines, sections) of a report."""
    title = f"Migration report: {r['cluster']['name']}"
    # The report's own `plan` section (what was reported on), read back typed.
    info, cluster = unplain(PlanInfo, r["plan"]), r["cluster"]
    lead = [
        f"dra-migrate {r['tool']['version']} · report format {r['formatVersion']} · plan {info.path} "
        f"(digest {short(info.digest)}{', edited and rebased' if info.edited else ''}) · "
        f"Kubernetes {cluster['kubernetesVersion'] or 'version unknown'}",
        _applicability(r)
        + f" Verdict: {(r['verification'] or {}).get('verdict', 'not-run (no journal)')}"
        + _changed_since(r)
        + ".",
    ]
    # Summary and risk first (who, what, capacity, findings), then the detail a reviewer checks it by.
    sections = [
        _cluster(r),
        _identity(r),
        _plan(r),
        _capacity(r),
        _findings(r),
        _inventory(r),
        _device_classes(r),
        _stages(r),
        _rehearsal(r),
        _diff(r),
        _timeline(r),
        _verification(r),
        _fingerprint(r),
    ]
    return title, lead, sections


def _applicability(r: dict[str, Any]) -> str:
    if r["plan"]["applicable"]:
        return "Applicable: no blockers."
    free = [st["name"] for st in r["stages"] if st.get("applicable")]
    alone = f" Stages that can be applied alone (`apply --stage`): {names(free)}." if free else ""
    return "NOT applicable as a whole: the plan has blockers (see Findings)." + alone


def applicability_badge(r: dict[str, Any]) -> Badge:
    if r["plan"]["applicable"]:
        return Badge("applicable", "good")
    if any(st.get("applicable") for st in r["stages"] if st.get("pool")):
        return Badge("partly applicable", "warn")
    return Badge("not applicable", "bad")


_VERDICT_TONE = {"verified": "good", "failed": "bad", "rolled-back": "warn", "incomplete": "warn", "not-run": "mute"}


def _changed_since(r: dict[str, Any]) -> str:
    since = (r.get("verification") or {}).get("changedSince") or []
    return f"; {len(since)} node(s) changed since (Final verification)" if since else ""


def verification_badge(r: dict[str, Any]) -> Badge:
    v = r.get("verification") or {}
    verdict = str(v.get("verdict", "not-run"))
    since = v.get("changedSince") or []
    if since:  # what the migration did no longer holds on some nodes: the badge must not read "good"
        return Badge(f"verification: {verdict}; {len(since)} node(s) changed since", "bad")
    return Badge(f"verification: {verdict}", _VERDICT_TONE.get(verdict, "note"))


def _section(id_: str) -> Section:
    return Section(id_, TITLES[id_])


def _cluster(r: dict[str, Any]) -> Section:
    c, fp = r["cluster"], r["fingerprint"]
    s = _section("cluster")
    read = {
        "plan": "the plan only (no cluster read for this report)",
        "snapshot": f"snapshot {c['location']}" + (f", taken {c['takenAt']}" if c.get("takenAt") else ""),
        "live": f"live cluster {c['location']}",
    }.get(c["source"], str(c["source"]))
    s.table(
        ["", ""],
        [
            ["cluster", c["name"]],
            ["server version", c["kubernetesVersion"] or "unknown"],
            ["fingerprint", fp["digest"]],
            ["objects fingerprinted", f"{len(fp['objects'])} (listed at the end)"],
            ["inventory read from", read],
        ],
    )
    return s


def _fingerprint(r: dict[str, Any]) -> Section:
    s = _section("fingerprint")
    s.p("What the plan depends on; apply refuses the plan when any of these was replaced or changed since.")
    if not detailed(r["fingerprint"]["objects"]):
        fingerprint_summary(s, r["fingerprint"]["objects"])
        return s
    s.table(
        ["kind", "object", "uid", "content hash"],
        [
            [o["kind"], f"{o['namespace']}/{o['name']}" if o["namespace"] else o["name"], o["uid"], o["content"]]
            for o in r["fingerprint"]["objects"]
        ],
    )
    return s


def _identity(r: dict[str, Any]) -> Section:
    s = _section("identity")
    who = r["identity"]
    if who is None:
        s.p(
            "Not recorded: the identity is asked of the API server (a SelfSubjectReview) only when the report "
            "reads a live cluster (`--kubeconfig`/`--context`). The journal's actors are in the timeline."
        )
    else:
        s.table(["", ""], [["user", who["username"]], ["groups", ", ".join(who["groups"]) or "-"], ["via", who["via"]]])
    return s


def _plan(r: dict[str, Any]) -> Section:
    p = r["plan"]
    s = _section("plan")
    s.table(
        ["", ""],
        [
            ["file", p["path"]],
            ["digest", p["digest"]],
            ["edited", "yes, rebased after a hand edit" if p["edited"] else "no"],
            *[["earlier digest", d] for d in p["previousDigests"]],
            ["applicable", p["applicable"]],
            ["parameters", ", ".join(f"{k}={_value(v)}" for k, v in p["parameters"].items())],
        ],
    )
    s.blocks.append(applicability_badge(r))
    ways = r.get("strategies") or []
    (strategies_section if detailed(ways) else strategies_summary)(s, ways)
    left = r.get("excludedPools") or []
    if left:
        sub = s.sub("excluded", f"Pools left out ({len(left)})")
        sub.table(
            ["pool", "why", "its findings"],
            [
                [
                    x["pool"],
                    x["reason"],
                    ", ".join(f"{f['id']} ({f['severity']})" for f in x.get("findings") or []) or "-",
                ]
                for x in left
            ],
        )
    return s


def _value(v: Any) -> str:
    if isinstance(v, list):
        return ", ".join(str(x) for x in v) or "-"
    return _cell(v)


def _inventory(r: dict[str, Any]) -> Section:
    s = _section("inventory")
    inv = r["inventory"]
    if inv is None:
        s.p(NEEDS_CLUSTER)
        return s
    if inv.get("source") == "plan":
        s.p(
            f"As recorded in the plan at planning time: {inv['consumerCount']} GPU consumer(s) in "
            f"{len(inv['pools'])} pool(s). The list of consumers needs `--snapshot FILE` or a live cluster."
        )
        _pool_table(s, inv)
        return s
    cons = inv["consumers"]
    gpus: dict[str, int] = {}
    for c in cons:
        for k, v in c["totals"].items():
            gpus[k] = gpus.get(k, 0) + v
    s.p(f"{len(cons)} GPU consumer(s) in {len(inv['pools'])} pool(s); GPUs over all replicas: {counts(gpus)}.")
    cs = s.sub("consumers", f"Consumers ({len(cons)})")
    shown = cons if detailed(cons) else consumers_summary(cons)
    if len(shown) < len(cons):
        cs.p(
            f"The {len(shown)} holding the most GPUs; every one: `report -o json` (`inventory.consumers`) or "
            "`dra-migrate inventory -o wide`. Per pool, the Pools table counts them."
        )
    cs.add(consumers_table(shown))
    note = consumers_note(cons)
    if note:
        cs.p(note)
    _pool_table(s, inv)
    return s


def _pool_table(s: Section, inv: dict[str, Any]) -> None:
    pools = s.sub("pools", "Pools")
    pools.add(pools_table(inv["pools"] if detailed(inv["pools"]) else pools_summary(pools, inv["pools"])))


def _findings(r: dict[str, Any]) -> Section:
    fs = r["findings"]
    s = _section("findings")
    planned = [f for f in fs if not str(f["message"]).startswith(SINCE_PLANNING)]
    by = {sev: sum(1 for f in planned if f["severity"] == sev) for sev in ("blocker", "warning", "info")}
    s.p(f"At planning time: {by['blocker']} blocker(s), {by['warning']} warning(s), {by['info']} info.")
    if len(planned) < len(fs):
        s.p(f"In the cluster read for this report, since planning: {len(fs) - len(planned)} more blocker(s).")
    if detailed(fs):
        s.add(findings_rows(fs))
    else:
        findings_summary(s, fs)
    accepted_risks(s, r.get("acceptedRisks") or [])
    return s


def _device_classes(r: dict[str, Any]) -> Section:
    s = _section("deviceclasses")
    dcs = r["deviceClasses"]
    if not dcs:
        s.p("None: every GPU resource in use is already mapped, or none is in use.")
    for dc in dcs:
        s.p(f"{dc['name']} (serves {dc['resource'] or 'no extended resource'}):")
        s.blocks.append(Code(to_yaml(dc["manifest"]), "yaml"))
    return s


def _capacity(r: dict[str, Any]) -> Section:
    s = _section("capacity")
    cap = r["capacity"]
    if cap is None:
        s.p(NEEDS_CLUSTER)
        return s
    src = r.get("capacitySource")
    if src == "plan":
        s.p("As recorded in the plan at planning time (the decision it rests on); no cluster was read for this report.")
    else:
        s.p(f"As read now ({src}); what the plan recorded at planning time is compared below.")
    s.p(
        "before: what the device plugin advertises today (shared replicas counted); after: the DRA devices the "
        "mapping DeviceClass matches on the pool's nodes; demand: today's requests."
    )
    if not detailed(cap):
        cap = capacity_summary(s, cap)
    s.blocks.append(Chart(cap))
    s.add(capacity_table(cap))
    changes = r.get("capacityChanges")
    if changes is not None:
        ch = s.sub("capacity-changes", "Changed since the plan was made")
        ch.table(
            ["pool", "resource", "figure", "at planning", "now"],
            [[c["pool"], c["resource"], c["field"], c["planned"], c["now"]] for c in changes],
            empty="No change: capacity and demand are as the plan recorded them.",
        )
    return s


def _wave_rows(stages: list[dict[str, Any]]) -> list[WaveRow]:
    """The report's waves (`report.model.Wave`, read back typed) as the disruption table's rows."""
    return [
        WaveRow(st["name"], w.name, w.nodes, w.evicted_pods, w.soak_after)
        for st in stages
        for w in (unplain(Wave, doc) for doc in st.get("waves") or [])
    ]


def _stages(r: dict[str, Any]) -> Section:
    s = _section("stages")
    sm = r["summary"]
    waves = _wave_rows(r["stages"])
    s.p(
        f"{len(sm.get('pools') or [])} pool(s), {sm.get('nodes')} node(s), {sm.get('waves')} wave(s), "
        f"{sm.get('evictedPods')} pod(s) evicted, estimated "
        f"{estimate_text(sm, 'soaks included', [len(w.nodes) for w in waves])}; "
        f"at most {r['plan']['parameters'].get('maxUnavailable')} of a pool unavailable at once."
    )
    if detailed(waves):
        s.sub("disruption", "Disruption per wave").add(waves_table(waves, names))
    else:
        waves_summary(s.sub("disruption", "Disruption per wave"), waves)
    gangs = sm.get("gangs") or []
    if gangs:
        g = s.sub("gangs", "Disruption per gang")
        g.p(
            "A gang's pods run all or nothing: it is broken once for every wave that evicts any of them "
            "(one is the least a migration can do; the planner keeps a gang's nodes in one wave where it can)."
        )
        if detailed(gangs):
            g.add(gangs_table(gangs))
        else:
            gangs_summary(g, gangs)
    stages: list[dict[str, Any]] = r["stages"]
    if len(stages) <= NAMES:
        for st in stages:
            stage_steps(s, [st], step_rows(st["steps"]))
        return s
    # Many pools: stages whose steps (and blockers) read the same are shown once, their pools named.
    s.p(f"{len(stages)} stages; those with the same steps and blockers shown once (each stage: `report -o json`).")
    by: dict[tuple[Any, ...], tuple[list[dict[str, Any]], list[tuple[Any, ...]]]] = {}
    for st in stages:
        rows = step_rows(st["steps"])
        by.setdefault((tuple(rows), tuple(st.get("blockedBy") or []), st["pool"] is None), ([], rows))[0].append(st)
    for group, rows in by.values():
        stage_steps(s, group, rows)
    return s


def _diff(r: dict[str, Any]) -> Section:
    s = _section("diff")
    d = r["diff"]
    if d is None:
        s.p("Not requested: `--against OLDER_PLAN` compares this plan with an earlier one.")
        return s
    against = d["a"]["cluster"]["name"]
    s.p(f"Against {against} (A, digest {short(d['a']['digest'])}); this plan (B): {short(d['b']['digest'])}.")
    if d["identical"]:
        s.p("No differences: the plans are the same (ordering and digests aside).")
        return s
    sm = d["summary"]
    rows: list[list[Any]] = []
    rows += [["stage", n, "added"] for n in sm["stages"]["added"]]
    rows += [["stage", n, "removed"] for n in sm["stages"]["removed"]]
    rows += [["stage", m["stage"], f"moved #{m['from']} -> #{m['to']}"] for m in sm["stages"]["moved"]]
    rows += [["wave", f"{w['stage']}/{w['wave']}", "added"] for w in sm["waves"]["added"]]
    rows += [["wave", f"{w['stage']}/{w['wave']}", "removed"] for w in sm["waves"]["removed"]]
    rows += [["node", n["node"], f"added in {n['stage']}/{n['wave']}"] for n in sm["nodes"]["added"]]
    rows += [["node", n["node"], f"removed from {n['stage']}/{n['wave']}"] for n in sm["nodes"]["removed"]]
    rows += [["node", n["node"], f"moved {n['from']} -> {n['to']}"] for n in sm["nodes"]["moved"]]
    rows += [["parameter", p["name"], f"{_value(p['old'])} -> {_value(p['new'])}"] for p in sm["parameters"]]
    rows += [["finding", f["id"], f"added ({f['severity']})"] for f in sm["findings"]["added"]]
    rows += [["finding", f["id"], f"removed ({f['severity']})"] for f in sm["findings"]["removed"]]
    if sm["applicable"]:
        rows.append(["applicable", "-", f"{_cell(sm['applicable']['old'])} -> {_cell(sm['applicable']['new'])}"])
    rows += [["DeviceClass", n, ch] for ch in ("added", "removed", "changed") for n in sm["deviceClasses"][ch]]
    if not detailed(rows):
        rows = diff_rows_summary(s, rows)
    s.table(["what", "name", "change"], rows, empty="Only details changed (below).")
    details = s.sub("diff-details", f"Details ({len(d['details'])})")
    if detailed(d["details"]):
        details.add(details_table(d["details"]))
    else:
        diff_details_summary(details, d["details"])
    return s


def _timeline(r: dict[str, Any]) -> Section:
    s = _section("timeline")
    t = r["timeline"]
    if t is None:
        s.p("Not run yet: no journal (`--journal FILE`, default `<plan>.journal.jsonl` beside the plan).")
        return s
    applied, undone = _tally(t["apply"]), _tally(t["rollback"])
    s.p(
        f"From {t['journal']}: {len(t['runs'])} run(s), {applied[0]} step(s) applied{applied[1]}, "
        f"{undone[0]} undone by rollbacks{undone[1]}."
    )
    runs = s.sub("runs", "Runs")
    runs.table(
        ["#", "phase", "started", "ended", "actor", "result", "error"],  # a run is an operator's command: all
        [
            [
                i,
                x["phase"] + (" (dry run)" if x["dryRun"] else ""),
                x["started"],
                x["ended"],
                x["actor"],
                x["result"] or "never ended",
                x["error"],
            ]
            for i, x in enumerate(t["runs"], 1)
        ],
    )
    headers = ["step", "action", "target", "started", "ended", "actor", "result", "error or note"]

    def rows(entries: list[dict[str, Any]]) -> list[list[Any]]:
        return [
            [
                e["stepId"],
                e["action"],
                e["target"],
                e["started"],
                e["ended"],
                e["actor"],
                e["result"] or "never ended",
                e["error"] or e.get("note"),
            ]
            for e in entries
        ]

    ap = s.sub("apply-steps", "Applied steps")
    if detailed(t["apply"]):
        ap.table(headers, rows(t["apply"]), empty="No step applied.")
    else:
        steps_summary(ap, t["apply"], rows, headers, "steps applied")
    if t["gates"]:
        g = s.sub("gates", "Health gates")
        if not detailed(t["gates"]):
            gates_summary(g, t["gates"])
        else:
            g.table(
                ["time", "stage", "wave", "result", "pending GPU pods"],
                [[x["time"], x["stage"], x["wave"], x["result"], names(list(x["pending"]))] for x in t["gates"]],
            )
    rb = s.sub("rollbacks", f"Rollbacks ({undone[0]} step(s) undone{undone[1].replace(' (', '; ')[:-1]})")
    if t["rollback"]:
        rb.p(
            "Undos, newest first as they ran; each one ok restored the original value the plan recorded (skipped: "
            "nothing was left to restore)."
        )
    if detailed(t["rollback"]):
        rb.table(headers, rows(t["rollback"]), empty="No rollback.", css="rollback")
    else:
        steps_summary(rb, t["rollback"], rows, headers, "undos")
    return s


def _tally(entries: list[dict[str, Any]]) -> tuple[int, str]:
    """How many steps ended ok, and the others by result: (5, " (1 failed, 1 never ended)") or (5, "")."""
    others: dict[str, int] = {}
    for e in entries:
        if e["result"] != "ok":
            key = e["result"] or "never ended"
            others[key] = others.get(key, 0) + 1
    ok = sum(1 for e in entries if e["result"] == "ok")
    return ok, (f" ({', '.join(f'{n} {k}' for k, n in others.items())})" if others else "")


def rehearsal_badge(r: dict[str, Any]) -> Badge:
    result = (r.get("rehearsal") or {}).get("result")
    return Badge(f"rehearsal: {result or 'not run'}", {"ok": "good", "failed": "bad"}.get(str(result), "mute"))


def _rehearsal(r: dict[str, Any]) -> Section:
    s = _section("rehearsal")
    rh = r.get("rehearsal")
    if rh is None:
        s.p(
            "No rehearsal given (it is optional). Run `dra-migrate rehearse PLAN --snapshot FILE -o json --out "
            "R.json`, then pass `--rehearsal R.json`."
        )
        return s
    s.blocks.append(rehearsal_badge(r))
    s.p(summary_line(rh) + ".")
    if rh.get("failure"):
        s.p(f"Stopped: {rh['failure']}")
    s.p(end_line(rh) + ".")
    if line := continuity_line(rh):
        s.p(line + ".")
    s.table(WAVE_HEADERS, wave_rows(rh), empty="Nothing ran.")
    stalled, pending = stalled_rows(rh), pending_rows(rh)
    s.sub("rehearsal-stalled", "Stalled drains").table(STALLED_HEADERS, stalled, empty="No drain stalled.")
    s.sub("rehearsal-pending", "Pods left Pending").table(PENDING_HEADERS, pending, empty="No pod left Pending.")
    s.sub("rehearsal-capacity", "Capacity after, as the twin's scheduler saw it").table(
        REHEARSED_CAPACITY_HEADERS, rehearsed_capacity_rows(rh)
    )
    if rows := continuity_rows(rh):
        s.sub("rehearsal-quota", "Windows of unlimited or blocked GPU use").table(CONTINUITY_HEADERS, rows)
    unrepro = s.sub("rehearsal-unreproduced", "What the twin could not reproduce")
    for line in rh.get("unreproduced") or []:
        unrepro.p(f"- {line}")
    return s


def _verification(r: dict[str, Any]) -> Section:
    s = _section("verification")
    v = r["verification"]
    if v is None:
        s.p("Not run yet: no journal, so nothing was applied or verified.")
        return s
    last = v["lastRun"]
    meaning = {
        "verified": "every planned node's DRA readiness and canary ended ok, and the last run succeeded",
        "incomplete": "some planned nodes are not migrated yet, or the last run never ended",
        "failed": "the last run (an apply or a rollback) or a node's readiness or canary failed",
        "rolled-back": "the last run was a rollback, and it ended ok",
        "not-run": "the journal records no run",
    }
    s.p(f"Verdict: {v['verdict']} ({meaning.get(v['verdict'], '')}).")
    if last:
        s.p(
            f"Last run: {last['phase']}{' (dry run)' if last['dryRun'] else ''}, started {last['started'] or '?'}, "
            f"ended {last['ended'] or 'never'}, result {last['result'] or 'none (interrupted)'}"
            + (f": {last['error']}" if last["error"] else "")
            + "."
        )
    if not detailed(v["nodes"]):
        verification_summary(s, v["nodes"], [Action.WAIT_DRA_READY, Action.CANARY])
    else:
        s.table(
            ["stage", "wave", "node", Action.WAIT_DRA_READY, Action.CANARY],
            [[n["stage"], n["wave"], n["node"], n["waitDraReady"], n["canary"]] for n in v["nodes"]],
            empty="No nodes to migrate.",
        )
    since = v.get("changedSince")
    if since:
        s.p(
            f"Changed since (the cluster read for this report): {len(since)} node(s) verified at the time no longer "
            "hold the migration. A node its group recreated comes up from the group's template (add the plan's "
            "labels to it: in-place-pool-template); a device plugin back beside the DRA plugin is "
            "dual-advertising (`dra-migrate check` names the label to set again)."
        )
        s.table(["stage", "node", "now"], [[x["stage"], x["node"], x["now"]] for x in since])
    elif since is not None:
        s.p("The cluster read for this report shows every verified node still migrated.")
    return s
