"""Operators whose CRD schema predates the pod-claim fields convert writes get a warning naming the first release
whose schema holds them.

An operator's CRD embeds the PodTemplateSpec of the k8s.io/api it builds with. Before k8s.io/api v0.31 a pod's
claim had only the alpha `resourceClaims[].source.resourceClaimTemplateName` and a container's claim no
`request`: the API server prunes the fields convert writes (`resourceClaims[].resourceClaimTemplateName`,
`resources.claims[].request`), and the operator's pods name a claim with no source, which the API server refuses
(or, with kubectl's strict field validation, refuses the object). Read from each operator's released CRD at the
last release before and the first release after (see dra_migrate/convert/schemas.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "fixtures" / "manifests"
TABLE = TemplateTable.builtin()

CONTAINER = "{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}"
POD_TEMPLATE = f"{{spec: {{containers: [{CONTAINER}]}}}}"
INLINE = {
    "volcano": (
        f"apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: v}}\n"
        f"spec: {{tasks: [{{name: w, replicas: 2, template: {POD_TEMPLATE}}}]}}\n",
        "Volcano before v1.11.0",
    ),
    "kserve": (
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: k\n  annotations:\n"
        "    serving.kserve.io/deploymentMode: RawDeployment\n"
        "spec: {predictor: {model: {modelFormat: {name: x}, resources: {limits: {nvidia.com/gpu: 1}}}}}\n",
        "KServe before v0.15.0",
    ),
    "mpijob-v2beta1": (
        f"apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {{name: m}}\n"
        f"spec: {{mpiReplicaSpecs: {{Worker: {{replicas: 2, template: {POD_TEMPLATE}}}}}}}\n",
        "the MPI operator (kubeflow.org/v2beta1) before v0.6.0",
    ),
    "mpijob-v1": (
        f"apiVersion: kubeflow.org/v1\nkind: MPIJob\nmetadata: {{name: m}}\n"
        f"spec: {{mpiReplicaSpecs: {{Worker: {{replicas: 2, template: {POD_TEMPLATE}}}}}}}\n",
        "the Kubeflow training operator before v1.9.0",
    ),
    "rayjob": (
        f"apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {{name: r}}\n"
        f"spec: {{rayClusterSpec: {{headGroupSpec: {{template: {POD_TEMPLATE}}}}}}}\n",
        "KubeRay before v1.3.1",
    ),
}
FIXTURES = {
    "pytorchjob": "the Kubeflow training operator before v1.9.0",
    "jobset": "JobSet before v0.7.0",
    "leaderworkerset": "LeaderWorkerSet before v0.4.0",
    "raycluster": "KubeRay before v1.3.1",
    "scaledjob": "KEDA before v2.16.0",
    "rollout": "Argo Rollouts before v1.9.0",
}


def warnings_of(text: str) -> list[str]:
    _, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    assert not result.problems, result.problems
    return result.warnings


@pytest.mark.parametrize("name", sorted(INLINE) + sorted(FIXTURES))
def test_an_operator_whose_old_schema_drops_the_claim_is_named_with_its_first_good_release(name: str) -> None:
    text, who = INLINE[name] if name in INLINE else ((MANIFESTS / f"{name}.yaml").read_text(), FIXTURES[name])
    said = [w for w in warnings_of(text) if "resourceClaimTemplateName" in w]
    assert len(said) == 1, warnings_of(text)
    assert f"{who} drops resourceClaims[].resourceClaimTemplateName" in said[0]
    assert "--dry-run=server" in said[0]


@pytest.mark.parametrize("name", ["deployment", "statefulset", "job", "cronjob", "pod"])
def test_core_kinds_get_no_such_warning(name: str) -> None:
    assert not [w for w in warnings_of((MANIFESTS / f"{name}.yaml").read_text()) if "CRD schema" in w]
