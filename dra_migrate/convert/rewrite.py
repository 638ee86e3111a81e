"""Rewrite one manifest's device-plugin GPU requests into DRA claims, in place on ruamel round-trip maps.

What a converted pod template looks like (dra-facts.md §1.3-1.4; k8s.io/api core/v1 `PodSpec.ResourceClaims`,
`ResourceRequirements.Claims`, resource/v1 `ResourceClaimTemplate`):

  * each container that asked for `nvidia.com/gpu: N` (or `nvidia.com/mig-<profile>: N`) loses that key from
    `requests` and `limits` and gets `resources.claims: [{name: <pod claim>}]`;
  * the pod gets `spec.resourceClaims: [{name: <pod claim>, resourceClaimTemplateName: <template>}]`;
  * a ResourceClaimTemplate per distinct request shape of the workload, whose one request is
    `exactly: {deviceClassName, allocationMode: ExactCount, count: N}` (or `firstAvailable` alternatives).

A template, not a ResourceClaim, because the resourceclaim controller makes one claim per pod from a
template: every replica and every training worker gets devices of its own, as with the device plugin. A
claim shared by all pods of a workload (`shared_claim`) is a different program and only done on request.

This module is pure: it decides everything before it mutates anything, so a document with a problem is
left exactly as it was, and it reports instead of printing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from dra_migrate.cluster.kinds import kind_key
from dra_migrate.cluster.templates import ResolvedTemplate, TemplateTable, get_path
from dra_migrate.cluster.validate import type_name
from dra_migrate.convert import gang
from dra_migrate.convert.claims import (
    DNS_LABEL_MAX,
    GPU_CLASS,
    MAX_DEVICES_PER_CLAIM,
    MAX_SUBREQUESTS,
    MIG_CLASS,
    REQUEST_NAME,
    Alternative,
    ClaimNames,
    ConvertOptions,
    Request,
    Shape,
    alternatives_for,
    claim_document,
    dns_label,
    free_claim_name,
    mig_selector,
    shape_for,
)
from dra_migrate.convert.comments import attach_after_last, delete_key, insert_after, move_trailing_comments
from dra_migrate.convert.detect import (
    asks_for_gpu,
    count_problem,
    fractional,
    gpu_keys,
    gpu_keys_elsewhere,
    gpu_patch_strings,
)
from dra_migrate.convert.schemas import schema_warning
from dra_migrate.convert.tolerations import add_tolerations, untolerated
from dra_migrate.dra.deviceclasses import mig_profile_of
from dra_migrate.inventory.limitranges import gpu_limit_effects
from dra_migrate.inventory.resources import DEFAULT_GPU, SHARED_GPU, GpuNames, container_requests

__all__ = [
    "DNS_LABEL_MAX",
    "GPU_CLASS",
    "MAX_SUBREQUESTS",
    "MIG_CLASS",
    "REQUEST_NAME",
    "Alternative",
    "ClaimNames",
    "ConvertOptions",
    "DocResult",
    "Request",
    "Shape",
    "alternatives_for",
    "convert_document",
    "dns_label",
    "mig_selector",
    "shape_for",
]


@dataclass
class DocResult:
    changed: bool = False
    new_documents: list[CommentedMap] = field(default_factory=list)  # go right before the workload
    problems: list[str] = field(default_factory=list)  # why the document was left unchanged
    warnings: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)  # one line per container converted


def _gpu_request_problem(resource: str, opts: ConvertOptions) -> str | None:
    if resource == SHARED_GPU or resource.endswith(".shared"):
        return f"{resource} is a time-slicing/MPS shared name: DRA has no replicas, a claim takes whole devices"
    if resource == DEFAULT_GPU or mig_profile_of(resource) or opts.device_class:
        return None
    return f"{resource} is a custom device-plugin name: say which DeviceClass serves it with --device-class"


@dataclass
class _Use:
    """A container's use of one device-plugin name, in the pod's claim for it."""

    container: dict[str, Any]
    resource: str
    pod_claim: str
    request: str | None  # the claim's request it sees; None: every device of the claim


@dataclass
class _Plan:
    """The changes to one pod template, decided before anything is touched."""

    resolved: ResolvedTemplate
    role: str
    uses: list[_Use] = field(default_factory=list)
    claims: dict[str, tuple[str, bool]] = field(default_factory=dict)  # pod claim -> (template/claim, is_claim)
    tolerate: list[str] = field(default_factory=list)  # convert/tolerations.py: what the admission plugin added


@dataclass
class _Demand:
    """The containers of one pod that ask for one device-plugin name, by kind of container, in order."""

    app: list[tuple[dict[str, Any], int]] = field(default_factory=list)  # app containers and sidecars
    init: list[tuple[dict[str, Any], int]] = field(default_factory=list)  # regular init containers
    sidecar_ids: set[int] = field(default_factory=set)
    effective: int = 0


def _demands(
    app: list[tuple[dict[str, Any], str, int]], init: list[tuple[dict[str, Any], str, int]]
) -> dict[str, _Demand]:
    """Per device-plugin name, the pod's effective request by Kubernetes' rule (k8s.io/component-helpers
    resource/helpers.go `PodRequests`; KEP-753 for sidecars): max(sum of app containers and sidecars,
    for each regular init container its own request plus the sidecars started before it). Init
    containers run before the app containers, so the same devices serve both: the kubelet's device
    manager hands an init container's devices on to the app containers (pkg/kubelet/cm/devicemanager
    `reusableDevices`), and one claim of the effective size is what the pod held with the device plugin."""
    out: dict[str, _Demand] = {}
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}
    for c, resource, n in init:
        d = out.setdefault(resource, _Demand())
        if c.get("restartPolicy") == "Always":
            sidecars[resource] = sidecars.get(resource, 0) + n
            peak[resource] = max(peak.get(resource, 0), sidecars[resource])
            d.app.append((c, n))
            d.sidecar_ids.add(id(c))
        else:
            peak[resource] = max(peak.get(resource, 0), sidecars.get(resource, 0) + n)
            d.init.append((c, n))
    for c, resource, n in app:
        out.setdefault(resource, _Demand()).app.append((c, n))
    for resource, d in out.items():
        d.effective = max(sum(n for _, n in d.app), peak.get(resource, 0))
    return out


def _claim_shape(resource: str, d: _Demand, opts: ConvertOptions) -> tuple[Shape, dict[int, str | None]]:
    """The claim for one name in one pod, and the request each container sees (None: the whole claim).

    One app container whose request is the pod's (init containers asking for no more), no app container, or
    --share-across-pod: one request of the effective count, seen whole by every container, as the init and
    app containers shared their devices before. Otherwise each app container keeps devices of its own, as
    many as it asked for: a request per app container; init containers see the whole claim, and a request
    `init` adds what an init container needs beyond the app containers. The kubelet's device manager gives
    each container exactly its request, an app container's from the devices the init containers used
    (kubernetes v1.37.2 pkg/kubelet/cm/devicemanager/manager.go `devicesToAllocate`), so one app container of
    2 beside an init container of 8 saw 2 GPUs, not 8.
    """
    alone = len(d.app) == 1 and d.app[0][1] == d.effective
    if opts.share_across_pod or alone or not d.app:
        shape = shape_for(resource, d.effective, opts)
        return shape, {id(c): None for c, _ in d.app + d.init}
    requests: list[Request] = []
    sees: dict[int, str | None] = {}
    used: set[str] = set()
    for c, n in d.app:
        name = free_claim_name(dns_label(str(c.get("name") or "container")), used)
        used.add(name)
        requests.append(Request(name, alternatives_for(resource, n, opts)))
        sees[id(c)] = name
    extra = d.effective - sum(n for _, n in d.app)
    if extra > 0:
        name = free_claim_name("init", used)
        requests.append(Request(name, alternatives_for(resource, extra, opts)))
    for c, _ in d.init:
        sees[id(c)] = None
    return Shape(resource, tuple(requests)), sees


def _pod_claim_name(resource: str, several: bool) -> str:
    """`gpu` when the pod asks for one device-plugin name; else named after each name."""
    if not several:
        return "gpu"
    return dns_label(resource.removeprefix("nvidia.com/"))


def convert_document(
    doc: Any, table: TemplateTable, opts: ConvertOptions, names: ClaimNames | None = None
) -> DocResult:
    """Convert one YAML document (a workload); mutates `doc` only when the result has no problems."""
    result = DocResult()
    if not isinstance(doc, dict):
        return result
    not_text = [f for f in ("apiVersion", "kind") if doc.get(f) is not None and not isinstance(doc.get(f), str)]
    if not_text:  # `kind:` followed by an indented block: a map, which no kind lookup may hash
        result.problems.append(
            f"{not_text[0]} is {type_name(doc[not_text[0]])}, not a string: this is not a Kubernetes object"
            " (the API server refuses it); fix the manifest"
        )
        return result
    names = names or ClaimNames()
    kind = str(doc.get("kind", ""))
    key = kind_key(str(doc.get("apiVersion", "")), kind)
    gpu_names = GpuNames()
    meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    workload = str(meta.get("name") or str(meta.get("generateName") or "").rstrip("-"))
    namespace = str(meta.get("namespace") or "")
    label = f"{kind}/{workload or '?'}"

    resolved = _unique(table.resolve(key, doc))
    covered: set[int] = set()
    has_gpu = False
    for r in resolved:
        if r.role.form == "named":  # its containers are made from the {name, quantity}: that is the request
            covered.add(id(get_path(r.template, r.role.resources or "gpu")))
        for c in r.containers() + r.init_containers():
            covered.update((id(c), id(c.get("resources"))))
            has_gpu = has_gpu or asks_for_gpu(c, gpu_names) or bool(fractional(c))
    stray = list(gpu_keys_elsewhere(doc, gpu_names, covered))
    patches = list(gpu_patch_strings(doc))
    if kind in _CAP_KINDS and apiversion_is_core(doc):
        # Not a request: nothing to rewrite. But it acts on the pods this run converts, whose containers no
        # longer name the GPU: it adds it back or refuses them (inventory/limitranges.py).
        result.warnings.extend(f"{label}: {e.says()}" for e in gpu_limit_effects(doc, gpu_names))
        return result
    if table.spec(key) is None:
        if (stray or patches) and not kind:
            result.problems.append(
                f"a document with no apiVersion or kind asks for GPUs at {', '.join(stray + patches)}: it is not a "
                "Kubernetes object but what makes them (a Helm chart's values.yaml, an application's config); "
                "change it by hand, and convert what it renders (helm template RELEASE CHART | dra-migrate convert -)"
            )
        elif (stray or patches) and key in _REFUSED_KINDS:  # no template-table entry would make it convertible
            result.problems.append(f"{label}: GPU request at {', '.join(stray + patches)}: {_REFUSED_KINDS[key]}")
        elif stray or patches:
            result.problems.append(
                f"{label}: kind {key} is not in the pod-template table, and asks for GPUs at "
                f"{', '.join(stray + patches)}: if its pods are written as pod templates, add the kind with "
                "--templates FILE; a field of the kind's own (gpu:, gpus:) is the operator's to translate, "
                "so convert it by hand or with the operator's DRA support"
            )
        return result
    for refusal in _kind_problems(key, doc, has_gpu or bool(stray)):
        result.problems.append(f"{label}: {refusal}")
    if result.problems:
        return result
    for path in patches:
        result.problems.append(
            f"{label}: a GPU request inside the string {path} (a patch or an embedded manifest) cannot be "
            "rewritten safely: move the request into the container, or convert it by hand"
        )
    for path in stray:
        result.problems.append(f"{label}: GPU request at {path} is outside every pod template known for {key}")

    plans: list[_Plan] = []
    by_shape: dict[Shape, str] = {}
    fallback_used = False
    for r in resolved:
        role = _role_name(r)
        app = r.containers()
        init = r.init_containers()
        for c in app + init:
            fractional_names = fractional(c)
            if fractional_names:
                result.problems.append(
                    f"{label}: container {c.get('name', '?')} ({role}) asks for a fraction of a GPU "
                    f"({', '.join(fractional_names)}): a DRA claim (and DRA's extended-resource path) allocates whole "
                    "devices, so a converted pod would take whole GPUs; keep it on its sharing scheme"
                )
        init_ids = {id(c) for c in init}
        gpu = [(c, container_requests(c, gpu_names), id(c) in init_ids) for c in app + init]
        # A container whose every GPU count is 0 asks for none: left as it is (detect.py `is_zero`).
        gpu = [(c, req, is_init) for c, req, is_init in gpu if req or asks_for_gpu(c, gpu_names)]
        if not gpu:
            continue
        if r.role.form == "resources":
            result.problems.append(
                f"{label}: role {role} states its GPUs as {r.path}.{r.role.resources} (a ResourceRequirements, "
                "not a pod), which has no place for a claim: put the claim in the pod template this kind's pods "
                "come from (for a TrainJob, its TrainingRuntime), then drop the GPU count here"
            )
            continue
        if r.role.form == "named":
            result.problems.append(
                f"{label}: role {role} states its GPUs as {r.path}.{r.role.resources} (a name and a count its "
                "operator writes into the pod's limits), which has no place for a claim: put the claim in the pod "
                "template this kind's pods come from, then drop the GPU count here"
            )
            continue
        if r.role.form == "containers":
            result.problems.append(
                f"{label}: role {role} keeps bare containers without a pod spec, so there is nowhere to put "
                f"spec.resourceClaims{_ARGO_PATCH if key.startswith('argoproj.io/') else ''}: convert it by hand"
            )
            continue
        if not workload:
            result.problems.append(f"{label}: has no metadata.name to name its ResourceClaimTemplates after")
            continue
        app_uses: list[tuple[dict[str, Any], str, int]] = []
        init_uses: list[tuple[dict[str, Any], str, int]] = []
        for c, req, is_init in gpu:
            cname = str(c.get("name", "container"))
            bad = [p for p in (count_problem(c, res) for res in gpu_keys(c, gpu_names)) if p]
            if bad:
                result.problems.extend(f"{label}: container {cname} ({role}): {p}" for p in bad)
                continue
            if len(req) > 1:
                result.problems.append(
                    f"{label}: container {cname} ({role}) requests {', '.join(sorted(req))}: one claim per container "
                    "cannot mix device-plugin names; split the container's requests first"
                )
                continue
            ((resource, count),) = req.items()
            problem = _gpu_request_problem(resource, opts)
            if problem:
                result.problems.append(f"{label}: container {cname} ({role}): {problem}")
                continue
            (init_uses if is_init else app_uses).append((c, resource, count))
        plan = _Plan(r, role)
        existing_claims = {
            str(x.get("name")) for x in (r.pod_spec().get("resourceClaims") or []) if isinstance(x, dict)
        }
        demands = _demands(app_uses, init_uses)
        for resource, d in demands.items():
            shape, sees = _claim_shape(resource, d, opts)
            if shape.count > MAX_DEVICES_PER_CLAIM:
                result.problems.append(
                    f"{label}: {role} asks for {shape.count} {resource} per pod, and the scheduler allocates at "
                    f"most {MAX_DEVICES_PER_CLAIM} devices to one claim: the converted pod would stay Pending; "
                    "split the request across containers or pods, or write several claims by hand"
                )
                continue
            template = by_shape.get(shape)
            if template is None:
                first = not by_shape
                candidates = [[workload, "gpu"]] if first else []
                candidates += [[workload, role, "gpu"], [workload, kind, role, "gpu"]]
                template = names.free(namespace, candidates, f"{key}/{workload}/{role}/{resource}")
                by_shape[shape] = template
                result.new_documents.append(claim_document(template, shape, doc, opts))
                fallback_used = fallback_used or any(len(q.alternatives) > 1 for q in shape.requests)
            pod_claim = free_claim_name(_pod_claim_name(resource, len(demands) > 1), existing_claims | set(plan.claims))
            plan.claims[pod_claim] = (template, opts.shared_claim)
            kind_word = "ResourceClaim" if opts.shared_claim else "ResourceClaimTemplate"
            for c, n in d.app + d.init:
                request = sees[id(c)]
                plan.uses.append(_Use(c, resource, pod_claim, request))
                what = "sidecar" if id(c) in d.sidecar_ids else "init container" if id(c) in init_ids else "container"
                result.summary.append(
                    f"{label}: {role} {what} {c.get('name', 'container')}: {resource}: {n} -> claim {pod_claim}"
                    + (f" (request {request})" if request else "")
                    + f" from {kind_word} {template} ({shape.count} per pod)"
                )
        if plan.uses:
            plan.tolerate = untolerated(r.pod_spec(), (u.resource for u in plan.uses))
            result.summary.extend(
                f"{label}: {role}: tolerates {key}:NoSchedule, as the API server's ExtendedResourceToleration "
                "plugin did while it requested the name"
                for key in plan.tolerate
            )
            plans.append(plan)

    podgroup = None
    if opts.gang and plans:
        why, podgroup = gang.plan(key, doc, resolved, workload, shared_claim=opts.shared_claim)
        if why:
            result.problems.append(f"{label}: --gang: {why}")
    if result.problems:
        result.new_documents.clear()
        result.summary.clear()
        return result
    if not plans:
        return result
    if fallback_used:
        result.warnings.append(
            f"{label}: firstAvailable alternatives: replicas may get different devices "
            f"({', '.join((opts.device_class or '(default)', *opts.fallback))}, in that order)"
        )
    if opts.shared_claim:
        result.warnings.append(f"{label}: --shared-claim: every pod of the workload shares the same devices")
    result.warnings.extend(f"{label}: {w}" for w in _kind_warnings(key, doc))
    for plan in plans:
        _apply(plan)
    if podgroup is not None:
        group = str(podgroup["metadata"]["name"])
        gang.wire(resolved, group)
        result.new_documents.append(podgroup)
        count = podgroup["spec"]["schedulingPolicy"]["gang"]["minCount"]
        result.summary.append(f"{label}: PodGroup {group} (gang.minCount {count}); its pods name it")
        result.warnings.append(
            f"{label}: --gang: needs kube-apiserver --runtime-config={gang.API_VERSION}=true and the "
            "GenericWorkload feature gate on kube-apiserver and kube-scheduler (beta, off by default in 1.37)"
        )
    result.changed = True
    return result


# Core kinds that name a device-plugin GPU as a bound (max, default), not a request: nothing to convert.
_CAP_KINDS = frozenset({"LimitRange"})


def apiversion_is_core(doc: dict[str, Any]) -> bool:
    return doc.get("apiVersion") == "v1"


# argo-workflows v3.6.4 workflow/util/util.go ApplyPodSpecPatch: the patch goes through the k8s.io/api PodSpec it
# builds with (go.mod v0.30.3: no resourceClaims[].resourceClaimTemplateName, no resources.claims[].request);
# v3.7.0 builds with v0.33.1.
_ARGO_PATCH = (
    " (a template's podSpecPatch can add it from argo-workflows v3.7.0; v3.6 applies the patch through "
    "k8s.io/api v0.30.3 types, which drop resourceClaims[].resourceClaimTemplateName)"
)
# tektoncd/pipeline v1.3.0 pkg/apis/pipeline/pod/template.go: the pod-level fields a TaskRun's pod takes.
_TEKTON = (
    "Tekton builds the pod from the steps and a podTemplate (tektoncd/pipeline v1.3.0 pod.Template), which has no "
    "resourceClaims, so a step's resources.claims could name no claim of the pod; keep its nvidia.com/gpu request, "
    "which a DeviceClass with extendedResourceName serves on DRA nodes (dra-migrate generate deviceclasses)"
)
_SPARK = (
    "the Spark operator writes spec.driver.gpu / spec.executor.gpu into the Spark container's limits when it makes "
    "the pod, and no field of the application holds a claim; Spark builds the pods from spec.driver.template and "
    "spec.executor.template (Spark >= 3.0), whose Kubernetes client decides what of a claim survives: remove the "
    "gpu fields and write spec.resourceClaims and the Spark container's resources.claims into those templates "
    "by hand (with the ResourceClaimTemplate), then check one application's driver and executor pods"
)
# Kinds whose GPU requests a claim cannot carry, with the reason and its source.
_REFUSED_KINDS = {
    "serving.knative.dev/Service": "Knative's admission webhook rejects resources.claims in a Revision's containers "
    "(knative/serving#15332), so the converted Service would be refused at apply time: run it as a Deployment, "
    "or keep it on the device plugin until Knative accepts claims",
    "serving.knative.dev/Configuration": "Knative's admission webhook rejects resources.claims (knative/serving#15332)",
    "serving.knative.dev/Revision": "Knative's admission webhook rejects resources.claims (knative/serving#15332)",
    # kubeflow/spark-operator v2.3.0: the webhook writes `gpu` into the Spark container's limits as the pod is made
    # (internal/webhook/sparkpod_defaulter.go addGPU), and spark-submit builds the pods from `spec.*.template`
    # (api/v1beta2/sparkapplication_types.go SparkPodSpec.Template, schemaless) with its own Kubernetes client.
    # kubeflow/notebooks v1.11.0 (3454bb75) components/notebook-controller: go.mod k8s.io/api v0.23.0, and its CRD
    # (config/crd/bases/kubeflow.org_notebooks.yaml) a full schema without resourceClaims or resources.claims.
    "kubeflow.org/Notebook": "the Kubeflow notebook controller (kubeflow/notebooks v1.11.0, the last release) builds "
    "with k8s.io/api v0.23.0, before pod claims existed: its CRD schema prunes spec.template.spec.resourceClaims "
    "and the containers' resources.claims (strict field validation refuses them), and the StatefulSet it writes "
    "from its PodSpec has none, so the notebook would start without a GPU; keep its nvidia.com/gpu request, which a "
    "DeviceClass with extendedResourceName serves on DRA nodes (dra-migrate generate deviceclasses)",
    "tekton.dev/Task": _TEKTON,
    "tekton.dev/TaskRun": _TEKTON,
    "tekton.dev/Pipeline": _TEKTON,
    "tekton.dev/PipelineRun": _TEKTON,
    "sparkoperator.k8s.io/SparkApplication": _SPARK,
    "sparkoperator.k8s.io/ScheduledSparkApplication": _SPARK,
    "trainer.kubeflow.org/ClusterTrainingRuntime": "a cluster-scoped runtime's pods run in the namespace of each "
    "TrainJob that uses it, and a ResourceClaimTemplate is namespaced: create the template in each of those "
    "namespaces and add the claim by hand (or use a namespaced TrainingRuntime)",
}
KSERVE_ISVC = "serving.kserve.io/InferenceService"
KSERVE_MODE = "serving.kserve.io/deploymentMode"


def _kind_problems(key: str, doc: dict[str, Any], has_gpu: bool) -> list[str]:
    why = _REFUSED_KINDS.get(key)
    return [f"{key}: {why}"] if why and has_gpu else []


def _kind_warnings(key: str, doc: dict[str, Any]) -> list[str]:
    """What the kind's own controller does with a converted object, where it is not what the API promises."""
    out = [w for w in (schema_warning(key, doc),) if w]  # convert/schemas.py: an older CRD drops the claim
    if key != KSERVE_ISVC:
        return out
    # KServe runs an InferenceService as a Knative Service in Serverless mode (its default unless the
    # annotation or the cluster's inferenceservice-config says RawDeployment/Standard), and Knative's
    # webhook rejects resources.claims (knative/serving#15332).
    meta = doc.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    mode = annotations.get(KSERVE_MODE) if isinstance(annotations, dict) else None
    if mode not in (None, "Serverless"):
        return out
    said = "is Serverless" if mode else "is not set (KServe's default is Serverless unless the cluster's is not)"
    return [
        *out,
        f"{KSERVE_MODE} {said}: KServe then runs the predictor as a Knative Service, whose webhook rejects "
        "resources.claims (knative/serving#15332); apply it with deploymentMode RawDeployment",
    ]


def _unique(resolved: list[ResolvedTemplate]) -> list[ResolvedTemplate]:
    seen: set[int] = set()
    out = []
    for r in resolved:
        if id(r.template) not in seen:
            seen.add(id(r.template))
            out.append(r)
    return out


def _role_name(r: ResolvedTemplate) -> str:
    """A short role name for messages and names: the replica key, the list item's name, or the path's end."""
    if r.item is not r.root:
        for field_name in ("name", "groupName"):  # JobSet replicatedJobs, KubeRay workerGroupSpecs
            name = r.item.get(field_name)
            if isinstance(name, str) and name:
                return name
        head = r.path[: -len(r.role.template)].rstrip(".") if r.role.template not in (".", "") else r.path
        return head.rsplit(".", 1)[-1]
    parts = [p for p in r.path.split(".") if p not in ("spec", "template")]
    last = parts[-1] if parts else "pod"
    for suffix in ("Template", "GroupSpec", "Spec"):
        if last.endswith(suffix) and last != suffix:
            return last[: -len(suffix)]
    return last


def _apply(plan: _Plan) -> None:
    pod = plan.resolved.pod_spec()
    if plan.resolved.role.form == "podTemplate" and not isinstance(plan.resolved.template.get("spec"), dict):
        return  # unreachable: a template with containers has a spec
    for use in plan.uses:
        c, resource, pod_claim = use.container, use.resource, use.pod_claim
        res = c["resources"]
        for section in ("limits", "requests"):
            m = res.get(section)
            if isinstance(m, dict) and resource in m:
                carried = delete_key(m, resource)
                if not m:
                    carried = delete_key(res, section, carried)
                if carried:
                    attach_after_last(res, carried)
        claims = res.get("claims")
        if not isinstance(claims, list):
            claims = CommentedSeq()
            insert_after(res, list(res)[-1] if res else None, "claims", claims)
        if not any(isinstance(x, dict) and x.get("name") == pod_claim for x in claims):
            entry = CommentedMap()
            entry["name"] = pod_claim
            if use.request:
                entry["request"] = use.request  # core/v1 ResourceClaim.Request: only that request's devices
            claims.append(entry)
    pod_claims = pod.get("resourceClaims")
    if not isinstance(pod_claims, list):
        pod_claims = CommentedSeq()
        after = "containers" if "containers" in pod else (list(pod)[-1] if pod else None)
        insert_after(pod, after, "resourceClaims", pod_claims)
    for claim_name, (target, is_claim) in plan.claims.items():
        entry = CommentedMap()
        entry["name"] = claim_name
        entry["resourceClaimName" if is_claim else "resourceClaimTemplateName"] = target
        pod_claims.append(entry)
    add_tolerations(pod, plan.tolerate)
    for use in plan.uses:
        move_trailing_comments(use.container["resources"].get("claims"))
    move_trailing_comments(pod_claims)
