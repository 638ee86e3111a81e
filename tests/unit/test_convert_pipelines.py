"""Pipeline engines whose pods `convert` cannot write a claim into: what it says must be what would work.

Argo Workflows builds a step's pod from the template's bare container and applies `podSpecPatch` through the
k8s.io/api PodSpec it builds with (argo-workflows v3.6.4 workflow/util/util.go ApplyPodSpecPatch, go.mod
k8s.io/api v0.30.3, which has no resourceClaims[].resourceClaimTemplateName; v3.7.0 builds with v0.33.1). Tekton
builds a TaskRun's pod from its steps and `podTemplate` (tektoncd/pipeline v1.3.0 pkg/apis/pipeline/pod/template.go
Template), which has no resourceClaims at all. Before, Argo's refusal pointed to a podSpecPatch without the version
that keeps it, and Tekton's to `--templates FILE`, which cannot make a step's claim reachable.
"""

from __future__ import annotations

import pytest

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions

ARGO = """apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: train, namespace: argo}
spec:
  entrypoint: train
  templates:
  - name: train
    container:
      image: registry.example.com/train:5.0
      resources: {limits: {nvidia.com/gpu: 1}}
"""

TEKTON_TASK = """apiVersion: tekton.dev/v1
kind: Task
metadata: {name: finetune, namespace: ci}
spec:
  steps:
  - name: train
    image: registry.example.com/train:5.0
    computeResources: {limits: {nvidia.com/gpu: 2}}
"""

TEKTON_RUN = """apiVersion: tekton.dev/v1
kind: TaskRun
metadata: {name: finetune-run, namespace: ci}
spec:
  taskRef: {name: finetune}
  computeResources: {limits: {nvidia.com/gpu: 2}}
"""


def problems(text: str) -> list[str]:
    out, result = convert_text(text, "t.yaml", TemplateTable.builtin(), ConvertOptions())
    assert out == text
    return result.problems


def test_an_argo_workflow_is_refused_naming_the_release_whose_pod_spec_patch_keeps_a_claim() -> None:
    (said,) = problems(ARGO)
    assert "podSpecPatch" in said and "v3.7.0" in said and "k8s.io/api v0.30.3" in said


@pytest.mark.parametrize("text", [TEKTON_TASK, TEKTON_RUN], ids=["Task", "TaskRun"])
def test_a_tekton_gpu_request_is_refused_saying_its_pods_hold_no_claim(text: str) -> None:
    said = " ".join(problems(text))
    assert "podTemplate" in said and "resourceClaims" in said
    assert "--templates" not in said, "a template-table entry cannot give a Tekton pod a claim"
    assert "extendedResourceName" in said, "what does work: keep the request, served through a DeviceClass"
