"""`convert --gang`: a PodGroup with gang.minCount for multi-pod training kinds, each pod wired to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions

MANIFESTS = Path(__file__).resolve().parents[2] / "fixtures" / "manifests"
TABLE = TemplateTable.builtin()


def convert(text: str, **opts: Any) -> tuple[list[dict[str, Any]], list[str]]:
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions(gang=True, **opts))
    return [d for d in YAML(typ="safe").load_all(out) if d], result.problems


def _pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if "containers" in v and isinstance(v["containers"], list):
                found.append(v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(doc.get("spec"))
    return found


def test_pytorchjob_gets_a_podgroup_for_every_worker() -> None:
    out, problems = convert((MANIFESTS / "pytorchjob.yaml").read_text())
    assert problems == []
    [pg] = [d for d in out if d["kind"] == "PodGroup"]
    assert pg["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert pg["metadata"] == {"name": "llama-pretrain-gang", "namespace": "training"}
    assert pg["spec"] == {"schedulingPolicy": {"gang": {"minCount": 4}}}  # one master, three workers
    [job] = [d for d in out if d["kind"] == "PyTorchJob"]
    specs = _pod_specs(job)
    assert len(specs) == 2
    assert all(s["schedulingGroup"] == {"podGroupName": "llama-pretrain-gang"} for s in specs)
    # Every worker keeps its own claim from a template: none is shared at PodGroup level.
    assert all(s["resourceClaims"][0].get("resourceClaimTemplateName") for s in specs)


INDEXED_JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: sweep, namespace: ml}
spec:
  completionMode: Indexed
  parallelism: 8
  completions: %d
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: w
        image: img
        resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.mark.parametrize(("completions", "min_count"), [(8, 8), (16, 8), (5, 5)])
def test_indexed_job_min_count_is_the_pods_it_starts_at_once(completions: int, min_count: int) -> None:
    out, problems = convert(INDEXED_JOB % completions)
    assert problems == []
    [pg] = [d for d in out if d["kind"] == "PodGroup"]
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == min_count


@pytest.mark.parametrize(
    ("fixture", "why"),
    [
        ("raycluster.yaml", "autoscaler"),
        ("deployment.yaml", "not a multi-pod training kind"),
        ("leaderworkerset.yaml", "each LeaderWorkerSet group"),
    ],
)
def test_refused_where_the_framework_or_the_kind_decides(fixture: str, why: str) -> None:
    text = (MANIFESTS / fixture).read_text()
    out, problems = convert(text)
    assert problems and why in problems[0], problems
    assert not [d for d in out if d["kind"] == "PodGroup"]
    assert "schedulingGroup" not in text and all("schedulingGroup" not in str(d) for d in out)


def test_shared_claim_at_podgroup_level_is_refused_with_the_gate_named() -> None:
    _, problems = convert((MANIFESTS / "pytorchjob.yaml").read_text(), shared_claim=True)
    assert problems and "DRAWorkloadResourceClaims" in problems[0]


def test_volcano_job_is_refused() -> None:
    text = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: vj, namespace: ml}
spec:
  minAvailable: 2
  tasks:
  - name: w
    replicas: 2
    template:
      spec:
        containers:
        - {name: w, image: img, resources: {limits: {nvidia.com/gpu: 1}}}
"""
    _, problems = convert(text)
    assert problems and "Volcano" in problems[0]
