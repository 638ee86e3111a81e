#!/usr/bin/env python3
"""Seeds for the fuzz targets whose inputs the project keeps inside other files (tools/fuzz/run).

  python tools/fuzz/seeds.py TARGET CORPUS_DIR

cel        every conformance case (tests/conformance/cases.json): its expression, a NUL, its device
templates  the built-in table and each YAML block of docs/pod-templates.md
ignore     each YAML block of docs/ignore-file.md
journal    a journal as apply writes it (two runs, a failure, a rollback), and its torn form
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "0" * 64  # targets.PLAN_DIGEST


def _yaml_blocks(doc: Path) -> list[str]:
    return re.findall(r"```ya?ml\n(.*?)```", doc.read_text(), re.S)


def cel() -> list[bytes]:
    cases = json.loads((ROOT / "tests/conformance/cases.json").read_text())
    return [(c["expression"] + "\0" + json.dumps(c.get("device") or {})).encode() for c in cases]


def templates() -> list[bytes]:
    builtin = (ROOT / "dra_migrate/cluster/templates.yaml").read_bytes()
    return [builtin] + [b.encode() for b in _yaml_blocks(ROOT / "docs/pod-templates.md")]


def ignore() -> list[bytes]:
    return [b.encode() for b in _yaml_blocks(ROOT / "docs/ignore-file.md")]


def journal() -> list[bytes]:
    t = "2026-12-04T10:00:00.000000Z"
    records: list[dict[str, object]] = [
        {
            "event": "run-start",
            "phase": "apply",
            "planDigest": DIGEST,
            "actor": "a",
            "dryRun": False,
            "cluster": {"uid": "u", "server": "https://x", "context": "c"},
        },
        {
            "event": "start",
            "phase": "apply",
            "stage": "pool-a",
            "wave": "1",
            "stepId": "pool-a/n1/cordon",
            "action": "cordon",
            "target": "Node n1",
        },
        {"event": "end", "phase": "apply", "stepId": "pool-a/n1/cordon", "result": "ok", "before": {"a": 1}},
        {"event": "start", "phase": "apply", "stepId": "pool-a/n1/drain"},
        {"event": "end", "phase": "apply", "stepId": "pool-a/n1/drain", "result": "failed", "error": "timeout"},
        {"event": "run-end", "result": "failed", "left": ["pool-a/n1/drain"]},
        {"event": "run-start", "phase": "rollback", "planDigest": DIGEST, "dryRun": True},
        {"event": "start", "phase": "rollback", "stepId": "pool-a/n1/cordon"},
        {"event": "end", "phase": "rollback", "stepId": "pool-a/n1/cordon", "result": "dry-run"},
        {"event": "lock", "holder": "h", "lockId": "l"},
        {"event": "gate", "stages": ["pool-a"], "pending": []},
    ]
    lines = [json.dumps({"seq": i + 1, "time": t, **r}) for i, r in enumerate(records)]
    whole = "\n".join(lines) + "\n"
    return [whole.encode(), whole.encode()[:-17], "\n".join(lines[:3]).encode()]


if __name__ == "__main__":
    target, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate({"cel": cel, "templates": templates, "ignore": ignore, "journal": journal}[target]()):
        (out / f"seed-{i:04d}").write_bytes(seed)
