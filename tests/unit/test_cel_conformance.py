"""The conformance tier: our verdict against kube-apiserver + kube-scheduler v1.37.2's on cases extracted
from upstream test files (tests/conformance/cases.json; answers computed by tools/cel-conformance).

Invariant: never a wrong "match" (we say true where Kubernetes rejects, errors or says false). A refusal
(UnsupportedSelectorError) is allowed and counted separately; every other verdict must agree, except the
recorded known disagreements, which must never grow.
"""

from __future__ import annotations

import collections

from tests.conformance.verdicts import load, outcome, verdict

CASES = load()
OURS = {c["id"]: verdict(c["expression"], c["device"]) for c, _ in CASES}
# Known disagreements (none of them a match): measured, README lists the figure; lowering is welcome.
MAX_DISAGREEMENTS = 3


def test_cases_are_present_for_every_suite() -> None:
    suites = collections.Counter(c["suite"] for c, _ in CASES)
    for suite in ("dra-compile", "apiserver-quantity", "apiserver-semver", "celgo-strings", "celgo-lists",
                  "celgo-comprehensions", "celspec-comparisons"):  # fmt: skip
        assert suites[suite] >= 10, suite


def test_never_a_wrong_match() -> None:
    wrong = [(c["id"], c["expression"], a) for c, a in CASES if outcome(OURS[c["id"]], a["verdict"]) == "wrong match"]
    assert not wrong


def test_dra_compile_suite_agrees_everywhere_it_answers() -> None:
    for case, answer in CASES:
        if case["suite"] == "dra-compile":
            ours = OURS[case["id"]]
            assert ours in (answer["verdict"], "refused"), (case["expression"], ours, answer)


def test_disagreements_do_not_grow() -> None:
    bad = [
        (c["expression"], OURS[c["id"]], a["verdict"])
        for c, a in CASES
        if outcome(OURS[c["id"]], a["verdict"]) == "disagree"
    ]
    assert len(bad) <= MAX_DISAGREEMENTS, bad[:20]
