"""`convert` on real upstream GPU manifests (tests/unit/data/corpus/, sources and licenses in its README.md),
not on hand-made ones: every GPU request is found (converted, or refused on one line), the diff changes only
the lines the conversion must change, applies with `patch` to give the converted file, and a second pass
changes nothing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import FileResult, convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.convert.stream import parse_stream

CORPUS = Path(__file__).resolve().parent / "data" / "corpus"
FILES = sorted(CORPUS.rglob("*.yaml"))
TABLE = TemplateTable.builtin()
# Files whose requests the tool rightly cannot rewrite (the reason is the refusal's first words' subject)
REFUSED = {
    "kserve/llmisvc-qwen2-7b-gpu.yaml",  # LLMInferenceService: not in the pod-template table
    "nim-operator/multi-node-nimservice.yaml",  # NIMService's own spec.resources (no pod template)
    "nim-operator/nimservice-basic-llm.yaml",
    "production-stack/vllmruntime.yaml",  # VLLMRuntime's own `gpu:` field
    "trainer/flux-lammps-train-gpus.yaml",  # TrainJob resourcesPerNode
    "trainer/torchtune-llama3_2_1B.yaml",  # ClusterTrainingRuntime: cluster-scoped
}
GPU_KEY = re.compile(r"^nvidia\.com/(gpu|mig-.+)$")
# A line the conversion may remove: a device-plugin request, or the map it empties
REMOVABLE = re.compile(r"^\s*(nvidia\.com/(gpu|mig-[^:]+):.*|limits:|requests:|resources:)\s*$")


def _rel(p: Path) -> str:
    return p.relative_to(CORPUS).as_posix()


def _convert(path: Path, **opts: Any) -> FileResult:
    return convert_text(path.read_text(encoding="utf-8"), str(path), TABLE, ConvertOptions(**opts))[1]


def _gpu_requests(value: Any, under_resources: bool = False) -> int:
    """A plain scan: positive `nvidia.com/*` counts in any `resources` map, whatever the kind."""
    if isinstance(value, dict):
        found = 0
        for k, v in value.items():
            if under_resources and isinstance(k, str) and GPU_KEY.match(k) and v not in (0, "0", None):
                found += 1
            found += _gpu_requests(v, under_resources or k == "resources")
        return found
    if isinstance(value, list):
        return sum(_gpu_requests(v, under_resources) for v in value)
    return 0


def _scan(text: str) -> int:
    return sum(_gpu_requests(d.doc) for d in parse_stream(text, "x"))


def test_the_corpus_is_small_and_every_file_asks_for_gpus() -> None:
    assert len(FILES) >= 10
    assert sum(p.stat().st_size for p in FILES) < 300_000
    for p in FILES:
        text = p.read_text(encoding="utf-8")
        assert _scan(text) > 0 or (_rel(p) in REFUSED and re.search(r"\bgpu: ", text)), p
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    for p in FILES:
        assert _rel(p) in readme, f"{p} has no source line in the README"


@pytest.mark.parametrize("path", FILES, ids=_rel)
@pytest.mark.parametrize(
    "opts", [{}, {"shared_claim": True}, {"gang": True}], ids=["templates", "shared-claim", "gang"]
)
def test_every_request_is_converted_or_refused_on_one_line(path: Path, opts: dict[str, Any]) -> None:
    r = _convert(path, **opts)
    # --gang refuses serving kinds, Ray (autoscaled), Volcano and LWS of several groups, each with its reason
    if _rel(path) in REFUSED or (opts.get("gang") and r.problems):
        assert r.problems and not r.changed
        assert all("\n" not in p and p.startswith(f"{path}:") for p in r.problems), r.problems
        return
    if opts.get("gang"):
        assert "kind: PodGroup" in r.converted
    assert not r.problems, r.problems
    assert _scan(r.original) > 0
    assert _scan(r.converted) == 0, "a GPU request was left in the output"


@pytest.mark.parametrize("path", [p for p in FILES if _rel(p) not in REFUSED], ids=_rel)
def test_the_diff_removes_only_gpu_requests_and_applies_with_patch(path: Path, tmp_path: Path) -> None:
    r = _convert(path)
    diff = r.diff()
    removed = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    assert removed, diff
    for line in removed:
        assert REMOVABLE.match(line), f"the conversion rewrote a line it had no reason to touch: {line!r}"
    target = tmp_path / "f.yaml"
    target.write_text(r.original, encoding="utf-8")
    done = subprocess.run(
        ["patch", "--posix", "--batch", "--fuzz=0", str(target)], input=diff, text=True, capture_output=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert target.read_text(encoding="utf-8") == r.converted


@pytest.mark.parametrize("path", [p for p in FILES if _rel(p) not in REFUSED], ids=_rel)
def test_converting_the_converted_file_changes_nothing(path: Path) -> None:
    once = _convert(path).converted
    again = convert_text(once, str(path), TABLE, ConvertOptions())[1]
    assert not again.problems and again.converted == once


@pytest.mark.parametrize("path", [p for p in FILES if _rel(p) not in REFUSED], ids=_rel)
def test_each_template_comment_names_its_workload(path: Path) -> None:
    notes = re.findall(r"^# dra-migrate: replaces .* per pod of (\S+) ?(.*)$", _convert(path).converted, re.M)
    assert notes
    for kind, name in notes:
        assert name.strip(), f"{kind} named by nothing"
