"""Our verdict on a conformance case, in the Go program's vocabulary (tools/cel-conformance/main.go)."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

from dra_migrate.dra.cel import SelectorError, SelectorEvaluationError, UnsupportedSelectorError, compile_selector

HERE = Path(__file__).parent


def load() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    cases = json.loads((HERE / "cases.json").read_text())
    answers = {a["id"]: a for a in json.loads((HERE / "answers.json").read_text())}
    return [(c, answers[c["id"]]) for c in cases]


def verdict(expression: str, device: dict[str, Any]) -> str:
    """true, false, rejected, error, or refused (UnsupportedSelectorError: no offline verdict)."""
    try:
        selector = compile_selector(expression)
    except UnsupportedSelectorError:
        return "refused"
    except SelectorError:
        return "rejected"
    try:
        return "true" if selector.matches(device, str(device.get("driver", ""))) else "false"
    except SelectorEvaluationError:
        return "error"


def outcome(ours: str, theirs: str) -> str:
    if ours == theirs:
        return "agree"
    if ours == "refused":
        return "refused"
    return "wrong match" if ours == "true" else "disagree"


def tally() -> dict[str, collections.Counter[str]]:
    by_suite: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for case, answer in load():
        by_suite[case["suite"]][outcome(verdict(case["expression"], case["device"]), answer["verdict"])] += 1
    return by_suite


if __name__ == "__main__":  # the README table: python -m tests.conformance.verdicts
    totals: collections.Counter[str] = collections.Counter()
    print("| suite | cases | agree | refused | disagree | wrong matches |")
    print("|---|---|---|---|---|---|")
    for suite, n in sorted(tally().items()):
        totals.update(n)
        print(f"| {suite} | {n.total()} | {n['agree']} | {n['refused']} | {n['disagree']} | {n['wrong match']} |")
    t = totals
    print(f"| **all** | {t.total()} | {t['agree']} | {t['refused']} | {t['disagree']} | {t['wrong match']} |")
