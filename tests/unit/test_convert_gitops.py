"""`convert` over a GitOps repository: kustomize overlays and Helm charts beside plain manifests.

An overlay's patch that asks for GPUs was converted as if it were a workload: the overlay gained a template
its base does not define, or, left alone beside a converted base, it merged `nvidia.com/gpu` back into the
rendered pods. A chart's template ended the whole run as "not valid YAML"; a values file asking for GPUs
was reported as "kind  is not in the pod-template table"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli import run

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
      - name: c
        image: vllm
        resources:
          limits:
            nvidia.com/gpu: 1
"""

STRATEGIC = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  template:
    spec:
      containers:
      - name: c
        resources:
          limits:
            nvidia.com/gpu: 4
"""

JSON6902_REPLACE = """- op: replace
  path: /spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu
  value: 4
"""

JSON6902_ADD = """- op: add
  path: /spec/template/spec/containers/0/resources
  value: {limits: {nvidia.com/gpu: 2}}
"""

TOLERATIONS = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  template:
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
"""


def _repo(tmp_path: Path, patch: str, entry: str) -> Path:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "deployment.yaml").write_text(DEPLOYMENT)
    (tmp_path / "base" / "kustomization.yaml").write_text("resources:\n- deployment.yaml\n")
    overlay = tmp_path / "overlays" / "prod"
    overlay.mkdir(parents=True)
    (overlay / "patch.yaml").write_text(patch)
    (overlay / "kustomization.yaml").write_text(
        f"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../base\n{entry}"
    )
    return tmp_path


ENTRIES = {
    "patches": "patches:\n- path: patch.yaml\n",
    "patchesStrategicMerge": "patchesStrategicMerge:\n- patch.yaml\n",
    "patchesJson6902": "patchesJson6902:\n- target: {group: apps, version: v1, kind: Deployment, name: llm}\n"
    "  path: patch.yaml\n",
}


@pytest.mark.parametrize(
    ("patch", "entry", "asks"),
    [
        (STRATEGIC, "patches", "spec.template.spec.containers[0].resources.limits.nvidia.com/gpu"),
        (STRATEGIC, "patchesStrategicMerge", "spec.template.spec.containers[0].resources.limits.nvidia.com/gpu"),
        (
            JSON6902_REPLACE,
            "patchesJson6902",
            "[0] replace /spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu",
        ),
        (JSON6902_ADD, "patches", "[0].value.limits.nvidia.com/gpu"),
    ],
)
def test_an_overlay_patch_that_asks_for_gpus_is_refused_and_nothing_is_written(
    tmp_path: Path, patch: str, entry: str, asks: str
) -> None:
    repo = _repo(tmp_path, patch, ENTRIES[entry])
    before = {p: p.read_text() for p in repo.rglob("*.yaml")}
    r = run("convert", str(repo), "--in-place")
    patch_file, kustomization = repo / "overlays/prod/patch.yaml", repo / "overlays/prod/kustomization.yaml"
    assert r.code == 1
    assert r.stderr.startswith(
        f"error: {patch_file}:1: a kustomize patch ({kustomization}) that asks for GPUs at {asks}: "
    )
    assert f"kustomize build {kustomization.parent} | dra-migrate convert -" in r.stderr.splitlines()[0]
    assert {p: p.read_text() for p in repo.rglob("*.yaml")} == before

    r = run("convert", str(repo), "--in-place", "--skip-unconvertible")
    assert r.code == 0, r.stderr
    assert patch_file.read_text() == patch  # left as it was, and said so
    assert f"skipped: {patch_file}:1: a kustomize patch" in r.stderr
    assert "ResourceClaimTemplate" in (repo / "base" / "deployment.yaml").read_text()  # the base is converted


def test_a_patch_that_only_selects_or_tolerates_gpu_nodes_is_no_problem(tmp_path: Path) -> None:
    repo = _repo(tmp_path, TOLERATIONS, ENTRIES["patches"])
    r = run("convert", str(repo), "--in-place")
    assert r.code == 0, r.stderr
    assert (repo / "overlays/prod/patch.yaml").read_text() == TOLERATIONS


def test_inline_patches_of_a_kustomization_that_ask_for_gpus_are_refused(tmp_path: Path) -> None:
    inline = (
        "patches:\n- target: {kind: Deployment, name: llm}\n  patch: |-\n"
        + "".join(f"    {line}\n" for line in JSON6902_REPLACE.splitlines())
        + "- patch: |-\n"
        + "".join(f"    {line}\n" for line in STRATEGIC.splitlines())
    )
    repo = _repo(tmp_path, TOLERATIONS, inline)
    r = run("convert", str(repo))
    kustomization = repo / "overlays/prod/kustomization.yaml"
    assert r.code == 1
    first = r.stderr.splitlines()[0]
    assert first.startswith(
        f"error: {kustomization}:1: an inline kustomize patch that asks for GPUs at patches[0].patch "
        "([0] replace /spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu); patches[1].patch "
        "(spec.template.spec.containers[0].resources.limits.nvidia.com/gpu): "
    ), first


def test_a_kustomization_is_never_converted(tmp_path: Path) -> None:
    repo = _repo(tmp_path, TOLERATIONS, ENTRIES["patches"])
    text = (repo / "overlays/prod/kustomization.yaml").read_text()
    r = run("convert", str(repo / "overlays/prod/kustomization.yaml"))
    assert (r.code, r.stdout) == (0, "")
    assert (repo / "overlays/prod/kustomization.yaml").read_text() == text


CHART_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
      - name: c
        resources:
          {{- toYaml .Values.resources | nindent 10 }}
"""


def test_a_chart_template_does_not_end_the_run_and_one_that_names_a_gpu_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "chart" / "templates").mkdir(parents=True)
    template = tmp_path / "chart" / "templates" / "deployment.yaml"
    template.write_text(CHART_TEMPLATE)
    (tmp_path / "app.yaml").write_text(DEPLOYMENT)
    r = run("convert", str(tmp_path), "--in-place")
    assert r.code == 0, r.stderr
    assert f"warning: {template}:1: a Go template (a Helm chart's templates/), left as it is" in r.stderr
    assert "ResourceClaimTemplate" in (tmp_path / "app.yaml").read_text()
    assert template.read_text() == CHART_TEMPLATE

    template.write_text(
        CHART_TEMPLATE.replace(
            "{{- toYaml .Values.resources | nindent 10 }}", "limits: {nvidia.com/gpu: {{ .Values.gpus }}}"
        )
    )
    r = run("convert", str(template))
    assert r.code == 1
    assert r.stderr.splitlines()[0] == (
        f"error: {template}:1: a Go template (a Helm chart's templates/) that names a GPU: "
        "convert what it renders: helm template RELEASE CHART | dra-migrate convert -"
    )


def test_a_values_file_that_asks_for_gpus_is_named_as_what_it_is(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("replicas: 2\nresources:\n  limits:\n    nvidia.com/gpu: 1\n")
    r = run("convert", str(values))
    assert r.code == 1
    assert r.stderr.splitlines()[0].startswith(
        f"error: {values}:1: a document with no apiVersion or kind asks for GPUs at resources.limits.nvidia.com/gpu: "
        "it is not a Kubernetes object"
    )


def test_a_kustomizations_helm_values_that_ask_for_gpus_are_a_problem(tmp_path: Path) -> None:
    helm = (
        "helmCharts:\n- name: vllm\n  repo: https://charts.example.com\n"
        "  valuesInline: {resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    repo = _repo(tmp_path, TOLERATIONS, helm)
    r = run("convert", str(repo))
    kustomization = repo / "overlays/prod/kustomization.yaml"
    assert r.code == 1
    assert r.stderr.splitlines()[0].startswith(
        f"error: {kustomization}:1: a kustomization that asks for GPUs at "
        "helmCharts[0].valuesInline.resources.limits.nvidia.com/gpu: "
    ), r.stderr
