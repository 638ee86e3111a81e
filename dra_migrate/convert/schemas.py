"""Operators whose CRD schema cannot hold what convert writes into a pod template.

An operator's CRD embeds the PodTemplateSpec (or PodSpec) of the k8s.io/api it builds with. Before k8s.io/api
v0.31 a pod's claim had only the alpha `resourceClaims[].source.resourceClaimTemplateName`, and a container's
claim only a `name`: the API server prunes the `resourceClaims[].resourceClaimTemplateName` and
`resources.claims[].request` that convert writes (kubectl's strict field validation refuses the object instead),
and the operator's pods then name a claim with no source, which the API server refuses
(kubernetes v1.37.2 pkg/apis/core/validation/validation.go `validatePodResourceClaimSource`).

Each first release below is read from the operator's released CRD at that release and at the one before it
(`go mod download MODULE@VERSION`): the release before has `source`, this one the flat fields and `request`.
"""

from __future__ import annotations

from typing import Any

_TRAINING_OPERATOR = ("the Kubeflow training operator", "v1.9.0")  # manifests/base/crds/kubeflow.org_*.yaml, v1.8.1
_KUBERAY = ("KubeRay", "v1.3.1")  # ray-operator/config/crd/bases/ray.io_*.yaml; v1.3.0 builds with k8s.io/api v0.30.2

# kind key -> (operator, first release whose schema holds the fields)
FIRST_GOOD_RELEASE: dict[str, tuple[str, str]] = {
    # argo-rollouts manifests/crds/rollout-crd.yaml at v1.8.3 (k8s.io/api v0.29.3) and v1.9.0 (v0.34.1)
    "argoproj.io/Rollout": ("Argo Rollouts", "v1.9.0"),
    "kubeflow.org/PyTorchJob": _TRAINING_OPERATOR,
    "kubeflow.org/TFJob": _TRAINING_OPERATOR,
    "kubeflow.org/XGBoostJob": _TRAINING_OPERATOR,
    "kubeflow.org/PaddleJob": _TRAINING_OPERATOR,
    "kubeflow.org/JAXJob": _TRAINING_OPERATOR,
    "kubeflow.org/MPIJob": _TRAINING_OPERATOR,  # kubeflow.org/v1; v2beta1 is the MPI operator's (below)
    # sigs.k8s.io/jobset config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml at v0.6.0 and v0.7.0
    "jobset.x-k8s.io/JobSet": ("JobSet", "v0.7.0"),
    # sigs.k8s.io/lws config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml at v0.3.0 and v0.4.0
    "leaderworkerset.x-k8s.io/LeaderWorkerSet": ("LeaderWorkerSet", "v0.4.0"),
    "ray.io/RayCluster": _KUBERAY,
    "ray.io/RayJob": _KUBERAY,
    "ray.io/RayService": _KUBERAY,
    # kserve config/crd/full/serving.kserve.io_inferenceservices.yaml at v0.14.1 and v0.15.0
    "serving.kserve.io/InferenceService": ("KServe", "v0.15.0"),
    # volcano config/crd/volcano/bases/batch.volcano.sh_jobs.yaml at v1.10.2 (k8s.io/api v0.30) and v1.11.0 (v0.31)
    "batch.volcano.sh/Job": ("Volcano", "v1.11.0"),
    # keda config/crd/bases/keda.sh_scaledjobs.yaml at v2.15.0 and v2.16.0
    "keda.sh/ScaledJob": ("KEDA", "v2.16.0"),
}
# kubeflow/mpi-operator manifests/base/kubeflow.org_mpijobs.yaml at v0.5.0 and v0.6.0
_MPI_OPERATOR = ("the MPI operator (kubeflow.org/v2beta1)", "v0.6.0")


def schema_warning(key: str, doc: dict[str, Any]) -> str | None:
    """The warning for a converted object of an operator whose older CRD schema drops the claim; None else."""
    found = FIRST_GOOD_RELEASE.get(key)
    if key == "kubeflow.org/MPIJob" and str(doc.get("apiVersion", "")).endswith("/v2beta1"):
        found = _MPI_OPERATOR
    if found is None:
        return None
    who, release = found
    return (
        f"{who} before {release} drops resourceClaims[].resourceClaimTemplateName (its CRD schema predates the "
        f"field), leaving the pods a claim with no source: run {release} or later (--dry-run=server refuses the "
        "field where it would be dropped)"
    )
