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

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

from migrate.cluster.kinds import kind_key
from migrate.cluster.templates import ResolvedTemplate, TemplateTable
from migrate.convert import gang
from migrate.dra.deviceclasses import DRIVER, MANAGED_BY, SOURCE_ANNOTATION, mig_profile_of
from migrate.inventory.resources import DEFAULT_GPU, SHARED_GPU, GpuNames, container_requests

# The NVIDIA DRA driver chart's classes (nvidia-facts.md §4.2, dra-driver-nvidia-gpu
# deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-{gpu,mig}.yaml).
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
REQUEST_NAME = "gpu"
# firstAvailable takes at most 8 subrequests (k8s.io/api resource/v1 `FirstAvailableDeviceRequestMaxSize`).
MAX_SUBREQUESTS = 8
# Pod claim names and request names are DNS labels; template names are DNS subdomains, but we keep them
# to a label's 63 characters so they read well next to the generated claim names.
DNS_LABEL_MAX = 63
_GPU_STRING_RE = re.compile(r"nvidia\.com/(gpu|mig-)")


@dataclass(frozen=True)
class ConvertOptions:
    device_class: str | None = None  # overrides the default class for every request
    fallback: tuple[str, ...] = ()  # further classes, tried in order after the first (firstAvailable)
    selector: str | None = None  # a CEL selector added to every alternative (compiled by the caller)
    share_across_pod: bool = False  # GPU containers of one pod reference one claim (they share devices)
    shared_claim: bool = False  # one ResourceClaim shared by every pod of the workload
    gang: bool = False  # a PodGroup with gang.minCount for the workload, its pods wired to it (convert/gang.py)


@dataclass(frozen=True)
class Alternative:
    device_class: str
    count: int
    selectors: tuple[str, ...]


@dataclass(frozen=True)
class Shape:
    """What one claim asks for; equal shapes within a workload share one template."""

    resource: str  # the device-plugin name it replaces
    alternatives: tuple[Alternative, ...]


@dataclass
class DocResult:
    changed: bool = False
    new_documents: list[CommentedMap] = field(default_factory=list)  # go right before the workload
    problems: list[str] = field(default_factory=list)  # why the document was left unchanged
    warnings: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)  # one line per container converted


def mig_selector(profile: str) -> str:
    # The attribute the NVIDIA DRA driver publishes for MIG devices (nvidia-facts.md §4.3, `profile`).
    return f"device.attributes['{DRIVER}'].profile == '{profile}'"


def dns_label(text: str, limit: int = DNS_LABEL_MAX) -> str:
    """A DNS-1123 label made of `text`; a too-long one is cut and keeps a short hash to stay distinct."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    name = re.sub(r"-{2,}", "-", name).strip("-") or "x"
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: limit - 7].rstrip('-')}-{digest}"


def shape_for(resource: str, count: int, opts: ConvertOptions) -> Shape:
    profile = mig_profile_of(resource)
    primary = opts.device_class or (MIG_CLASS if profile else GPU_CLASS)
    alternatives = []
    for cls in (primary, *opts.fallback):
        selectors: list[str] = []
        # mig.nvidia.com matches every MIG device; the profile is what the old name promised.
        if profile and cls == MIG_CLASS:
            selectors.append(mig_selector(profile))
        if opts.selector:
            selectors.append(opts.selector)
        alternatives.append(Alternative(cls, count, tuple(selectors)))
    return Shape(resource, tuple(dict.fromkeys(alternatives)))


def _gpu_request_problem(resource: str, opts: ConvertOptions) -> str | None:
    if resource == SHARED_GPU or resource.endswith(".shared"):
        return f"{resource} is a time-slicing/MPS shared name: DRA has no replicas, a claim takes whole devices"
    if resource == DEFAULT_GPU or mig_profile_of(resource) or opts.device_class:
        return None
    return f"{resource} is a custom device-plugin name: say which DeviceClass serves it with --device-class"


@dataclass
class _Plan:
    """The changes to one pod template, decided before anything is touched."""

    resolved: ResolvedTemplate
    role: str
    # (container, resource, pod claim name, template name)
    containers: list[tuple[dict[str, Any], str, str, str]] = field(default_factory=list)
    claims: dict[str, tuple[str, bool]] = field(default_factory=dict)  # pod claim -> (template/claim, is_claim)


def convert_document(doc: Any, table: TemplateTable, opts: ConvertOptions) -> DocResult:
    """Convert one YAML document (a workload); mutates `doc` only when the result has no problems."""
    result = DocResult()
    if not isinstance(doc, dict):
        return result
    kind = str(doc.get("kind", ""))
    key = kind_key(str(doc.get("apiVersion", "")), kind)
    names = GpuNames()
    meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    workload = str(meta.get("name") or str(meta.get("generateName") or "").rstrip("-"))
    label = f"{kind}/{workload or '?'}"

    resolved = _unique(table.resolve(key, doc))
    covered: set[int] = set()
    for r in resolved:
        covered.update(id(c) for c in r.containers() + r.init_containers())
    stray = [p for p, c in _gpu_containers(doc, names) if id(c) not in covered]
    patches = list(_gpu_patch_strings(doc))
    if table.spec(key) is None:
        if stray or patches:
            where = ", ".join(stray + patches)
            result.problems.append(
                f"{label}: kind {key} is not in the pod-template table, GPU requests at {where}: "
                "add the kind with --templates FILE"
            )
        return result
    for path in patches:
        result.problems.append(
            f"{label}: a GPU request inside the string {path} (a pod spec patch) cannot be rewritten safely: "
            "move the request into the container, or convert it by hand"
        )
    for path in stray:
        result.problems.append(f"{label}: GPU request at {path} is outside every pod template known for {key}")

    plans: list[_Plan] = []
    by_shape: dict[Shape, str] = {}
    taken: set[str] = set()
    fallback_used = False
    for r in resolved:
        role = _role_name(r)
        gpu = [(c, container_requests(c, names)) for c in r.containers() + r.init_containers()]
        gpu = [(c, req) for c, req in gpu if req]
        if not gpu:
            continue
        if r.role.form == "containers":
            result.problems.append(
                f"{label}: role {role} keeps bare containers without a pod spec, so there is nowhere to put "
                "spec.resourceClaims (Argo templates need a podSpecPatch): convert it by hand"
            )
            continue
        if not workload:
            result.problems.append(f"{label}: has no metadata.name to name its ResourceClaimTemplates after")
            continue
        plan = _Plan(r, role)
        shapes: list[tuple[dict[str, Any], Shape]] = []
        for c, req in gpu:
            cname = str(c.get("name", "container"))
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
            shapes.append((c, shape_for(resource, count, opts)))
        if opts.share_across_pod and len({s for _, s in shapes}) > 1:
            result.problems.append(
                f"{label}: --share-across-pod, but the containers of role {role} request different GPUs: "
                "one shared claim needs one request"
            )
            continue
        existing_claims = {
            str(x.get("name")) for x in (r.pod_spec().get("resourceClaims") or []) if isinstance(x, dict)
        }
        for c, shape in shapes:
            cname = str(c.get("name", "container"))
            if opts.share_across_pod:
                primary, alt, pod_claim = [workload, "gpu"], [workload, role, "gpu"], "gpu"
            else:
                primary, alt, pod_claim = [workload, cname, "gpu"], [workload, role, cname, "gpu"], f"{cname}-gpu"
            pod_claim = dns_label(pod_claim)
            template = by_shape.get(shape)
            if template is None:
                template = _free_name(primary, alt, taken)
                by_shape[shape] = template
                taken.add(template)
                result.new_documents.append(_claim_document(template, shape, doc, opts))
                fallback_used = fallback_used or len(shape.alternatives) > 1
            if pod_claim not in plan.claims:
                pod_claim = _free_claim_name(pod_claim, existing_claims | set(plan.claims))
                plan.claims[pod_claim] = (template, opts.shared_claim)
            else:
                pod_claim = next(k for k, v in plan.claims.items() if v[0] == template)
            plan.containers.append((c, shape.resource, pod_claim, template))
            kind_word = "ResourceClaim" if opts.shared_claim else "ResourceClaimTemplate"
            result.summary.append(
                f"{label}: {role} container {cname}: {shape.resource}: {shape.alternatives[0].count} -> "
                f"claim {pod_claim} from {kind_word} {template}"
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


def _free_name(primary: list[str], alt: list[str], taken: set[str]) -> str:
    for parts in (primary, alt):
        name = dns_label("-".join(parts))
        if name not in taken:
            return name
    base = dns_label("-".join(alt), DNS_LABEL_MAX - 4)
    i = 2
    while f"{base}-{i}" in taken:
        i += 1
    return f"{base}-{i}"


def _free_claim_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    base = dns_label(name, DNS_LABEL_MAX - 4)
    i = 2
    while f"{base}-{i}" in taken:
        i += 1
    return f"{base}-{i}"


def _gpu_containers(doc: Any, names: GpuNames, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every mapping with a `resources` block that requests a GPU, wherever it sits in the document."""
    if isinstance(doc, dict):
        res = doc.get("resources")
        if isinstance(res, dict) and container_requests(doc, names):
            yield path or ".", doc
        for k, v in doc.items():
            yield from _gpu_containers(v, names, f"{path}.{k}" if path else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _gpu_containers(v, names, f"{path}[{i}]")


def _gpu_patch_strings(doc: Any, path: str = "") -> Iterator[str]:
    """Paths of pod-spec patch strings (Argo `podSpecPatch`) that mention a GPU resource."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{path}.{k}" if path else str(k)
            if isinstance(v, str) and str(k).endswith("podSpecPatch") and _GPU_STRING_RE.search(v):
                yield p
            else:
                yield from _gpu_patch_strings(v, p)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _gpu_patch_strings(v, f"{path}[{i}]")


def _claim_document(name: str, shape: Shape, workload: dict[str, Any], opts: ConvertOptions) -> CommentedMap:
    meta = CommentedMap()
    meta["name"] = name
    ns = (workload.get("metadata") or {}).get("namespace")
    if ns:
        meta["namespace"] = ns
    meta["labels"] = CommentedMap(MANAGED_BY)
    meta["annotations"] = CommentedMap({SOURCE_ANNOTATION: shape.resource})
    request = CommentedMap()
    request["name"] = REQUEST_NAME
    if len(shape.alternatives) == 1:
        request["exactly"] = _device_request(shape.alternatives[0], None)
    else:
        subs = CommentedSeq()
        used: set[str] = set()
        for alt in shape.alternatives:
            sub_name = _free_claim_name(dns_label(alt.device_class.split(".")[0]), used)
            used.add(sub_name)
            subs.append(_device_request(alt, sub_name))
        request["firstAvailable"] = subs
    devices = CommentedMap()
    devices["requests"] = CommentedSeq([request])
    claim_spec = CommentedMap()
    claim_spec["devices"] = devices
    doc = CommentedMap()
    doc["apiVersion"] = "resource.k8s.io/v1"
    if opts.shared_claim:
        doc["kind"] = "ResourceClaim"
        doc["metadata"] = meta
        doc["spec"] = claim_spec
    else:
        doc["kind"] = "ResourceClaimTemplate"
        doc["metadata"] = meta
        spec = CommentedMap()
        spec["spec"] = claim_spec
        doc["spec"] = spec
    wname = (workload.get("metadata") or {}).get("name", "")
    note = f"dra-migrate: replaces {shape.resource}: {shape.alternatives[0].count} of {workload.get('kind')} {wname}"
    if len(shape.alternatives) > 1:
        note += "\nfirstAvailable: the first class with free devices wins, so replicas may get different devices"
    doc.yaml_set_start_comment(note)
    return doc


def _device_request(alt: Alternative, name: str | None) -> CommentedMap:
    out = CommentedMap()
    if name:
        out["name"] = name
    out["deviceClassName"] = alt.device_class
    if alt.selectors:
        sels = CommentedSeq()
        for s in alt.selectors:
            cel = CommentedMap()
            cel["expression"] = s
            sel = CommentedMap()
            sel["cel"] = cel
            sels.append(sel)
        out["selectors"] = sels
    out["allocationMode"] = "ExactCount"
    out["count"] = alt.count
    return out


def _apply(plan: _Plan) -> None:
    pod = plan.resolved.pod_spec()
    if plan.resolved.role.form == "podTemplate" and not isinstance(plan.resolved.template.get("spec"), dict):
        return  # unreachable: a template with containers has a spec
    for c, resource, pod_claim, _template in plan.containers:
        res = c["resources"]
        for section in ("limits", "requests"):
            m = res.get(section)
            if isinstance(m, dict) and resource in m:
                carried = _delete_key(m, resource)
                if not m:
                    carried = _delete_key(res, section, carried)
                if carried:
                    _attach_after_last(res, carried)
        claims = res.get("claims")
        if not isinstance(claims, list):
            claims = CommentedSeq()
            _insert_after(res, list(res)[-1] if res else None, "claims", claims)
        if not any(isinstance(x, dict) and x.get("name") == pod_claim for x in claims):
            entry = CommentedMap()
            entry["name"] = pod_claim
            claims.append(entry)
    pod_claims = pod.get("resourceClaims")
    if not isinstance(pod_claims, list):
        pod_claims = CommentedSeq()
        after = "containers" if "containers" in pod else (list(pod)[-1] if pod else None)
        _insert_after(pod, after, "resourceClaims", pod_claims)
    for claim_name, (target, is_claim) in plan.claims.items():
        entry = CommentedMap()
        entry["name"] = claim_name
        entry["resourceClaimName" if is_claim else "resourceClaimTemplateName"] = target
        pod_claims.append(entry)
    for c, *_ in plan.containers:
        _move_trailing_comments(c["resources"].get("claims"))
    _move_trailing_comments(pod_claims)


def _delete_key(m: dict[str, Any], key: str, carried: str = "") -> str:
    """Delete `key`, keeping the full-line comments ruamel attached to it (they belong to what follows).

    ruamel stores the comment lines after a value with the key before them; the first line of that token
    is the key's own end-of-line comment, which goes with it. Returns lines that found no new home.
    """
    ca = getattr(m, "ca", None)
    if ca is not None:
        keys = list(m)
        token = (ca.items.pop(key, None) or [None, None, None, None])[2]
        if isinstance(token, CommentToken) and "\n" in token.value:
            carried += token.value.split("\n", 1)[1]
        del m[key]
        i = keys.index(key)
        if carried and i > 0:
            _append_comment(m, keys[i - 1], carried)
            carried = ""
        elif carried and i + 1 < len(keys):
            _comment_before(m, keys[i + 1], carried)
            carried = ""
        return carried
    del m[key]
    return carried


def _append_comment(m: Any, key: str, text: str) -> None:
    value = m[key]
    if isinstance(value, CommentedMap) and value:
        _append_comment(value, list(value)[-1], text)
        return
    if isinstance(value, CommentedSeq) and value:
        last = value[-1]
        if isinstance(last, CommentedMap) and last:
            _append_comment(last, list(last)[-1], text)
            return
    item = m.ca.items.setdefault(key, [None, None, None, None])
    token = item[2]
    if isinstance(token, CommentToken):
        token.value += text
    else:
        item[2] = CommentToken("\n" + text, CommentMark(0), None)


def _comment_before(m: Any, key: str, text: str) -> None:
    item = m.ca.items.setdefault(key, [None, None, None, None])
    lines = [ln for ln in text.split("\n") if ln.strip()]
    tokens = [CommentToken(ln.strip() + "\n", CommentMark(len(ln) - len(ln.lstrip())), None) for ln in lines]
    item[1] = (item[1] or []) + tokens


def _attach_after_last(m: CommentedMap, text: str) -> None:
    keys = list(m)
    if keys:
        _append_comment(m, keys[-1], text)


def _insert_after(m: Any, after: str | None, key: str, value: Any) -> None:
    """Insert `key` right after `after`, and carry the full-line comments that followed `after`'s value.

    Those comments were written above the next key (ruamel keeps them with the previous value's last
    scalar), so they must move below the inserted value to stay where the author put them.
    """
    keys = list(m)
    pos = keys.index(after) + 1 if after in keys else len(keys)
    if isinstance(m, CommentedMap):
        m.insert(pos, key, value)
    else:
        m[key] = value
    if after is None or not isinstance(m, CommentedMap):
        return
    holder, slot = _last_leaf(m, after)
    if holder is None:
        return
    token = holder.ca.items.get(slot, [None, None, None, None])
    idx = 0 if isinstance(holder, CommentedSeq) else 2
    tok = token[idx] if len(token) > idx else None
    if isinstance(tok, CommentToken) and "\n" in tok.value:
        own, rest = tok.value.split("\n", 1)
        if rest.strip():
            tok.value = own + "\n"
            _PENDING[id(value)] = _PENDING.get(id(value), "") + rest


# Comment text waiting for an inserted collection to get its content (keyed by the collection's id).
_PENDING: dict[int, str] = {}


def _move_trailing_comments(value: Any) -> None:
    text = _PENDING.pop(id(value), "")
    if not text or not value:
        return
    if isinstance(value, CommentedSeq):
        last = value[-1]
        if isinstance(last, CommentedMap) and last:
            _append_comment(last, list(last)[-1], text)


def _last_leaf(m: Any, key: Any) -> tuple[Any, Any]:
    """The collection and key/index whose comment slot holds what follows `m[key]`'s whole value."""
    holder, slot = m, key
    value = m[key]
    while True:
        if isinstance(value, CommentedMap) and value:
            holder, slot = value, list(value)[-1]
        elif isinstance(value, CommentedSeq) and value:
            holder, slot = value, len(value) - 1
        else:
            return holder, slot
        value = holder[slot]
