#!/usr/bin/env python3
"""Coverage-guided fuzzing of the readers of hostile input, with atheris (Google's libFuzzer for Python).

    make fuzz [FUZZ_SECONDS=300]                   # every target in turn
    python tools/fuzz/targets.py TARGET CORPUS_DIR [libFuzzer flags]

Each target feeds bytes the engine mutates to one reader and fails on any exception but the one-line
refusal the CLI prints (`InputError`): an internal error is a bug, whatever the input. Targets:

  snapshot  load_snapshot, then the checks and the plan built on what was read (JSON Lines or YAML)
  convert   convert_text of a manifest stream, with the option sets that take other code paths
  plan      the streaming reader `show` uses and `io.load`, on a plan file (edits are refused by digest)

Seeds are the project's own fixtures (`make fuzz` copies them into the corpus directory once). Not part
of `make test`: a fuzzing run has no end, and CI has 90 minutes. What it found is in docs/testing.md.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports():
    from dra_migrate.checks.run import assess
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.cluster.templates import TemplateTable
    from dra_migrate.convert.claims import ConvertOptions
    from dra_migrate.convert.files import convert_text
    from dra_migrate.errors import InputError
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan import stream
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

SCRATCH = Path(tempfile.mkdtemp(prefix="dra-migrate-fuzz-"))
CONVERT_OPTIONS = (
    ConvertOptions(),
    ConvertOptions(share_across_pod=True, gang=True, topology=True),
    ConvertOptions(shared_claim=True),
)


def snapshot(data: bytes) -> None:
    path = SCRATCH / ("s.jsonl" if data[:1] == b"{" else "s.yaml")
    path.write_bytes(data)
    state = load_snapshot(path)
    assess(state, pool_labels=("pool",))
    build_plan(state, PlanParams())


def convert(data: bytes) -> None:
    if not data:
        return
    try:
        text = data[1:].decode("utf-8")
    except UnicodeDecodeError:
        return  # convert reads text: a file that is not UTF-8 is refused before this
    convert_text(text, "f.yaml", TemplateTable.builtin(), CONVERT_OPTIONS[data[0] % len(CONVERT_OPTIONS)])


def plan(data: bytes) -> None:
    path = SCRATCH / "p.yaml"
    path.write_bytes(data)
    stream.scan(path)
    plan_io.load(path)


TARGETS = {"snapshot": snapshot, "convert": convert, "plan": plan}


def refusals_only(target: Any) -> Any:
    def one(data: bytes) -> None:
        with contextlib.suppress(InputError):  # the CLI's one-line refusal: what hostile input should get
            target(data)

    return one


if __name__ == "__main__":
    name = sys.argv.pop(1)
    atheris.Setup(sys.argv, refusals_only(TARGETS[name]))
    atheris.Fuzz()
