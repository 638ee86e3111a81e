#!/usr/bin/env python3
"""Coverage-guided fuzzing of the readers of hostile input, with atheris (Google's libFuzzer for Python).

    make fuzz [FUZZ_SECONDS=300]                   # every target in turn
    python tools/fuzz/targets.py TARGET CORPUS_DIR [libFuzzer flags]

Each target feeds bytes the engine mutates to one reader and fails on any exception but the one-line
refusal the CLI prints (`InputError`): an internal error is a bug, whatever the input. Targets:

  snapshot  load_snapshot, then the checks and the plan built on what was read (JSON Lines or YAML)
  convert   convert_text of a manifest stream, with the option sets that take other code paths
  plan      the streaming reader `show` uses and `io.load`, on a plan file (edits are refused by digest)
  cel       compile_selector of an expression, then Selector.matches on a device (ResourceSlice JSON after
            a NUL byte): compile may only raise SelectorError, evaluation only SelectorEvaluationError, and
            a refusal may not be an internal error relabelled (the catch-all of compile_selector)
  templates a `--templates` table, then each of its kinds resolved and converted on a workload of that kind
  ignore    an ignore file (`--ignore-file`), then the acceptances applied to a finding of each rule
  journal   a journal file read as `status` reads it (read_records, Progress, its summary), and the same
            bytes as one in-cluster journal chunk (ConfigMap data, one record per key)

Seeds are the project's own fixtures (`make fuzz` copies them into the corpus directory once). Not part
of `make test`: a fuzzing run has no end, and CI has 90 minutes. What it found is in docs/testing.md.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
import tempfile
from pathlib import Path
from typing import Any

import atheris
import orjson

with atheris.instrument_imports():
    from dra_migrate.checks.catalog import all_rules
    from dra_migrate.checks.ignore import load_ignore_file, split_accepted
    from dra_migrate.checks.model import Finding, ObjectRef, Severity
    from dra_migrate.checks.run import assess
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.cluster.templates import TemplateTable
    from dra_migrate.convert.claims import ConvertOptions
    from dra_migrate.convert.files import convert_text
    from dra_migrate.dra.cel import SelectorError, SelectorEvaluationError, compile_selector
    from dra_migrate.errors import InputError
    from dra_migrate.execute import cluster_journal
    from dra_migrate.execute.journal import Progress, read_records
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


DEVICE: dict[str, Any] = {
    "name": "gpu-0",
    "attributes": {"type": {"string": "gpu"}, "index": {"int": 0}, "driverVersion": {"version": "580.65.6"}},
    "capacity": {"memory": {"value": "80Gi"}},
}


CATCH_ALL = "the offline CEL evaluator cannot read this expression ("


def cel(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    expression, nul, device_json = text.partition("\0")
    try:
        selector = compile_selector(expression)
    except SelectorError as e:
        if str(e).startswith(CATCH_ALL):  # compile_selector's last resort: an exception nobody expected
            raise AssertionError(f"internal error relabelled as a refusal: {e}") from e.__cause__
        return
    device = DEVICE
    if nul:
        with contextlib.suppress(ValueError):
            device = orjson.loads(device_json)
    if not isinstance(device, dict):
        return  # a ResourceSlice's devices[] item is an object: the snapshot reader sees to that
    for driver in ("gpu.nvidia.com", "dra.example.com"):
        with contextlib.suppress(SelectorEvaluationError):
            selector.matches(device, driver)


WORKLOAD: dict[str, Any] = {
    "metadata": {"name": "w", "namespace": "ml"},
    "spec": {
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}},
    },
}


def templates(data: bytes) -> None:
    path = SCRATCH / "t.yaml"
    path.write_bytes(data)
    table = TemplateTable.builtin().extended(path)
    for key in table.kind_keys():
        group, _, kind = key.rpartition("/")
        doc = {"apiVersion": f"{group}/v1" if group else "v1", "kind": kind, **WORKLOAD}
        for resolved in table.resolve(key, doc):
            resolved.containers(), resolved.init_containers(), resolved.pod_spec()
        convert_text(orjson.dumps(doc).decode(), "w.yaml", table, CONVERT_OPTIONS[0])


def ignore(data: bytes) -> None:
    path = SCRATCH / "i.yaml"
    path.write_bytes(data)
    acceptances = load_ignore_file(path, [r.id for r in all_rules()])
    job = ObjectRef("JobSet", "llama", "ml")
    findings = [Finding(r.id, Severity.WARNING, "m", "r", (job,)) for r in all_rules()]
    for a in acceptances:
        a.to_dict()
    _kept, accepted, _expired = split_accepted(findings, acceptances, dt.date(2026, 12, 4))
    for x in accepted:
        x.to_record()


PLAN_DIGEST = "sha256:" + "0" * 64


def journal(data: bytes) -> None:
    path = SCRATCH / "j.jsonl"
    path.write_bytes(data)
    for require_owner in (True, False):
        with contextlib.suppress(InputError):
            records = read_records(path, plan_digest=PLAN_DIGEST, require_owner=require_owner)
            progress = Progress.from_records(records)
            ids = list(progress.steps)
            progress.summary(ids), progress.summary(ids, "rollback"), progress.current, progress.failed
    lines = [line for line in data.split(b"\n") if line]
    data_map = {}
    for i, line in enumerate(lines):
        head = line[:12].split(b" ", 1)
        key = head[0].decode("utf-8", "replace") if len(head) == 2 else str(i + 1)
        data_map[key] = line.decode("utf-8", "replace")
    chunk = {"metadata": {"name": "j-0"}, "data": data_map}
    records = cluster_journal._all_records([chunk], "in-cluster journal")  # the pure decoding of a chunk
    Progress.from_records(records)


TARGETS = {
    "snapshot": snapshot,
    "convert": convert,
    "plan": plan,
    "cel": cel,
    "templates": templates,
    "ignore": ignore,
    "journal": journal,
}


def refusals_only(target: Any) -> Any:
    def one(data: bytes) -> None:
        with contextlib.suppress(InputError):  # the CLI's one-line refusal: what hostile input should get
            target(data)

    return one


if __name__ == "__main__":
    name = sys.argv.pop(1)
    atheris.Setup(sys.argv, refusals_only(TARGETS[name]))
    atheris.Fuzz()
