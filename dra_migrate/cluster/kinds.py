"""The API kinds the tool reads, and how each is listed.

One table serves the live source (which list call to make), the snapshot writer (which kinds to keep),
the snapshot reader (which kinds are known) and the simulator (which CRDs to install).
Kinds are identified by (group, kind); the version is only how we ask for them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    group: str  # "" for the core group
    version: str  # the version we list with; others of the same group are accepted on read
    kind: str
    plural: str
    namespaced: bool
    # Built-in kinds are always served; the rest (CRDs, newer APIs) are found through discovery,
    # and a kind that is not served is simply absent, not an error.
    optional: bool = False

    @property
    def key(self) -> str:
        """Stable identifier, e.g. "apps/Deployment" or "Pod" for the core group."""
        return group_kind(self.group, self.kind)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def list_path(self) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{base}/{self.plural}"


_KUBE_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes' order of API versions, highest last: GA before beta before alpha, then the higher major,
    then the higher minor (v2 > v1 > v1beta2 > v1beta1 > v1alpha1); a version not of that form is below all
    of them (k8s.io/apimachinery v0.37.2 `pkg/version/helpers.go` `CompareKubeAwareVersionStrings`)."""
    m = _KUBE_VERSION.fullmatch(version)
    if m is None:
        return (-1, 0, 0, version)
    level = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (level, int(m.group(1)), int(m.group(3) or 0), "")


def group_kind(group: str, kind: str) -> str:
    """The key of a kind in `KINDS_BY_KEY` from its group ("" for the core group) and kind."""
    return f"{group}/{kind}" if group else kind


def kind_key(api_version: str, kind: str) -> str:
    """The (group, kind) key of an object from its apiVersion and kind."""
    return group_kind(api_version.rpartition("/")[0] if "/" in api_version else "", kind)


CORE_KINDS: tuple[Kind, ...] = (
    Kind("", "v1", "Node", "nodes", namespaced=False),
    Kind("", "v1", "Pod", "pods", namespaced=True),
    # ConfigMaps are read for the device plugin's own config only (cluster/configrefs.py); others are dropped.
    Kind("", "v1", "ConfigMap", "configmaps", namespaced=True),
    Kind("", "v1", "ReplicationController", "replicationcontrollers", namespaced=True),
    Kind("apps", "v1", "Deployment", "deployments", namespaced=True),
    Kind("apps", "v1", "ReplicaSet", "replicasets", namespaced=True),
    Kind("apps", "v1", "StatefulSet", "statefulsets", namespaced=True),
    Kind("apps", "v1", "DaemonSet", "daemonsets", namespaced=True),
    Kind("batch", "v1", "Job", "jobs", namespaced=True),
    Kind("batch", "v1", "CronJob", "cronjobs", namespaced=True),
    Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", namespaced=True),
)

DRA_KINDS: tuple[Kind, ...] = (
    Kind("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", namespaced=False, optional=True),
    Kind("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", namespaced=False, optional=True),
    Kind("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", namespaced=True, optional=True),
    Kind("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", namespaced=True, optional=True),
)

NVIDIA_KINDS: tuple[Kind, ...] = (
    Kind("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies", namespaced=False, optional=True),
    Kind("nvidia.com", "v1alpha1", "NVIDIADriver", "nvidiadrivers", namespaced=False, optional=True),
    Kind("nvidia.com", "v1alpha1", "GPUCluster", "gpuclusters", namespaced=False, optional=True),
)

# The 1.37 gang-scheduling API (KEP-4671): beta, served only with --runtime-config=scheduling.k8s.io/v1beta1=true
# and the GenericWorkload gate (k8s.io/kubernetes@v1.37.2 pkg/controlplane/instance.go, pkg/features/kube_features.go).
SCHEDULING_KINDS: tuple[Kind, ...] = (
    Kind("scheduling.k8s.io", "v1beta1", "Workload", "workloads", namespaced=True, optional=True),
    Kind("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups", namespaced=True, optional=True),
)

# Workload CRDs whose pod templates can request GPUs (nvidia-facts.md §6 lists the sources per kind).
WORKLOAD_CRD_KINDS: tuple[Kind, ...] = (
    Kind("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", namespaced=True, optional=True),
    Kind("kubeflow.org", "v1", "TFJob", "tfjobs", namespaced=True, optional=True),
    Kind("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs", namespaced=True, optional=True),
    Kind("kubeflow.org", "v1", "PaddleJob", "paddlejobs", namespaced=True, optional=True),
    Kind("kubeflow.org", "v1", "JAXJob", "jaxjobs", namespaced=True, optional=True),
    Kind("kubeflow.org", "v2beta1", "MPIJob", "mpijobs", namespaced=True, optional=True),
    Kind("kubeflow.org", "v1", "Notebook", "notebooks", namespaced=True, optional=True),
    Kind("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs", namespaced=True, optional=True),
    Kind("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes", namespaced=True, optional=True),
    Kind(
        "trainer.kubeflow.org",
        "v1alpha1",
        "ClusterTrainingRuntime",
        "clustertrainingruntimes",
        namespaced=False,
        optional=True,
    ),
    Kind("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", namespaced=True, optional=True),
    Kind("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", namespaced=True, optional=True),
    Kind("ray.io", "v1", "RayCluster", "rayclusters", namespaced=True, optional=True),
    Kind("ray.io", "v1", "RayJob", "rayjobs", namespaced=True, optional=True),
    Kind("ray.io", "v1", "RayService", "rayservices", namespaced=True, optional=True),
    Kind("serving.kserve.io", "v1beta1", "InferenceService", "inferenceservices", namespaced=True, optional=True),
    Kind("batch.volcano.sh", "v1alpha1", "Job", "jobs", namespaced=True, optional=True),
    Kind("argoproj.io", "v1alpha1", "Workflow", "workflows", namespaced=True, optional=True),
    Kind("argoproj.io", "v1alpha1", "CronWorkflow", "cronworkflows", namespaced=True, optional=True),
    Kind("argoproj.io", "v1alpha1", "WorkflowTemplate", "workflowtemplates", namespaced=True, optional=True),
    Kind(
        "argoproj.io",
        "v1alpha1",
        "ClusterWorkflowTemplate",
        "clusterworkflowtemplates",
        namespaced=False,
        optional=True,
    ),
    Kind("argoproj.io", "v1alpha1", "Rollout", "rollouts", namespaced=True, optional=True),
    Kind("keda.sh", "v1alpha1", "ScaledJob", "scaledjobs", namespaced=True, optional=True),
    Kind("serving.knative.dev", "v1", "Service", "services", namespaced=True, optional=True),
    # The Kubeflow Spark operator (kubeflow/spark-operator v2.3.0 api/v1beta2): GPUs in a field of its own.
    Kind("sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications", namespaced=True, optional=True),
    Kind(
        "sparkoperator.k8s.io",
        "v1beta2",
        "ScheduledSparkApplication",
        "scheduledsparkapplications",
        namespaced=True,
        optional=True,
    ),
)

# Tekton runs (tektoncd/pipeline v1.15.0 pkg/apis/pipeline/v1): a TaskRun controls its pod (pkg/pod/pod.go
# `NewControllerRef(taskRun, ...)`) and a PipelineRun its TaskRuns (pkg/reconciler/pipelinerun/pipelinerun.go
# `createTaskRun`). Read for what a drain does to a running TaskRun (checks/rules_jobs.py) and to walk a pod up to
# its run; not in WORKLOAD_CRD_KINDS: no pod template is counted from them (their GPUs are counted from the pods),
# and the simulator, which runs no Tekton controller, does not recreate them.
PIPELINE_RUN_KINDS: tuple[Kind, ...] = (
    Kind("tekton.dev", "v1", "TaskRun", "taskruns", namespaced=True, optional=True),
    Kind("tekton.dev", "v1", "PipelineRun", "pipelineruns", namespaced=True, optional=True),
)

# What else depends on the GPU resource names (docs/dependents.md): quotas, Kueue queues, alerting rules,
# dashboards (the Grafana Operator's; the chart sidecar's are ConfigMaps, cluster/dashboards.py).
# ResourceQuota and LimitRange are core (always served); the rest are CRDs, absent where not installed.
DEPENDENT_KINDS: tuple[Kind, ...] = (
    Kind("", "v1", "ResourceQuota", "resourcequotas", namespaced=True),
    Kind("", "v1", "LimitRange", "limitranges", namespaced=True),
    Kind("kueue.x-k8s.io", "v1beta1", "ClusterQueue", "clusterqueues", namespaced=False, optional=True),
    Kind("kueue.x-k8s.io", "v1beta1", "ResourceFlavor", "resourceflavors", namespaced=False, optional=True),
    Kind("kueue.x-k8s.io", "v1beta1", "LocalQueue", "localqueues", namespaced=True, optional=True),
    Kind("monitoring.coreos.com", "v1", "PrometheusRule", "prometheusrules", namespaced=True, optional=True),
    Kind("monitoring.googleapis.com", "v1", "Rules", "rules", namespaced=True, optional=True),
    Kind("monitoring.googleapis.com", "v1", "ClusterRules", "clusterrules", namespaced=False, optional=True),
    Kind("monitoring.googleapis.com", "v1", "GlobalRules", "globalrules", namespaced=False, optional=True),
    Kind("operator.victoriametrics.com", "v1beta1", "VMRule", "vmrules", namespaced=True, optional=True),
    Kind("scheduling.volcano.sh", "v1beta1", "Queue", "queues", namespaced=False, optional=True),
    Kind("grafana.integreatly.org", "v1beta1", "GrafanaDashboard", "grafanadashboards", namespaced=True, optional=True),
    Kind(
        "grafana.integreatly.org",
        "v1beta1",
        "GrafanaLibraryPanel",
        "grafanalibrarypanels",
        namespaced=True,
        optional=True,
    ),
    # Autoscalers that may scale on GPU metrics (inventory/autoscalers.py). autoscaling/v2 is GA since 1.23.
    Kind("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", namespaced=True),
    Kind("keda.sh", "v1alpha1", "ScaledObject", "scaledobjects", namespaced=True, optional=True),
    # Admission policies that may judge or change pods by their GPU request (inventory/policies.py).
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        namespaced=False,
        optional=True,
    ),
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingAdmissionPolicy",
        "mutatingadmissionpolicies",
        namespaced=False,
        optional=True,
    ),
    Kind("kyverno.io", "v1", "ClusterPolicy", "clusterpolicies", namespaced=False, optional=True),
    Kind("kyverno.io", "v1", "Policy", "policies", namespaced=True, optional=True),
    Kind("policies.kyverno.io", "v1alpha1", "ValidatingPolicy", "validatingpolicies", namespaced=False, optional=True),
    Kind("policies.kyverno.io", "v1alpha1", "MutatingPolicy", "mutatingpolicies", namespaced=False, optional=True),
    Kind("templates.gatekeeper.sh", "v1", "ConstraintTemplate", "constrainttemplates", namespaced=False, optional=True),
    Kind("mutations.gatekeeper.sh", "v1", "Assign", "assign", namespaced=False, optional=True),
    Kind("mutations.gatekeeper.sh", "v1", "ModifySet", "modifyset", namespaced=False, optional=True),
)

# What the platforms create around GPU nodes (dra_migrate/inventory/platform.py, docs/platforms/): Karpenter's
# NodePools (karpenter.sh/v1, https://karpenter.sh/docs/concepts/nodepools/) and the OLM objects through which
# OpenShift installs the GPU Operator (Subscription gpu-operator-certified and its ClusterServiceVersion,
# https://docs.nvidia.com/datacenter/cloud-native/openshift/latest/install-gpu-ocp.html).
PLATFORM_KINDS: tuple[Kind, ...] = (
    Kind("karpenter.sh", "v1", "NodePool", "nodepools", namespaced=False, optional=True),
    Kind("operators.coreos.com", "v1alpha1", "Subscription", "subscriptions", namespaced=True, optional=True),
    Kind(
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        "clusterserviceversions",
        namespaced=True,
        optional=True,
    ),
)

ALL_KINDS: tuple[Kind, ...] = (
    CORE_KINDS
    + DRA_KINDS
    + NVIDIA_KINDS
    + SCHEDULING_KINDS
    + WORKLOAD_CRD_KINDS
    + PIPELINE_RUN_KINDS
    + DEPENDENT_KINDS
    + PLATFORM_KINDS
)
KINDS_BY_KEY: dict[str, Kind] = {k.key: k for k in ALL_KINDS}
