"""`dra-migrate convert`: golden conversions of every fixture manifest, idempotence, validation, writing.

Regenerate the golden files on purpose only: DRA_MIGRATE_UPDATE_GOLDEN=1, then review the diff.
"""

from __future__ import annotations

import codecs
import os
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions, dns_label
from dra_migrate.convert.stream import guess_indent
from dra_migrate.dra.cel import compile_selector
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "fixtures" / "manifests"
GOLDEN = ROOT / "tests" / "golden" / "convert"
UPDATE = os.environ.get("DRA_MIGRATE_UPDATE_GOLDEN") == "1"
UNCONVERTIBLE = {"argo-workflow"}
CONVERTIBLE = sorted(p for p in MANIFESTS.glob("*.yaml") if p.stem not in UNCONVERTIBLE)
TABLE = TemplateTable.builtin()


def convert(text: str, **opts: object) -> tuple[str, list[str]]:
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions(**opts))  # type: ignore[arg-type]
    return out, result.problems


def docs(text: str) -> list[dict[str, object]]:
    return [d for d in YAML(typ="safe").load_all(text) if d]


def comments(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith("#")]


@pytest.mark.parametrize("fixture", CONVERTIBLE, ids=[p.stem for p in CONVERTIBLE])
def test_golden_conversion(fixture: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = run("convert", str(fixture.relative_to(ROOT)), "--output-dir", str(out))
    assert r.code == 0, r.stderr
    converted = (out / fixture.name).read_text()
    golden = GOLDEN / fixture.name
    if UPDATE:
        golden.write_text(converted)
    assert golden.exists(), f"missing golden file {golden}: set DRA_MIGRATE_UPDATE_GOLDEN=1"
    assert converted == golden.read_text(), f"{fixture.name} differs from its golden file"


def _without_tolerations(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_tolerations(v) for k, v in value.items() if k != "tolerations"}
    if isinstance(value, list):
        return [_without_tolerations(v) for v in value]
    return value


@pytest.mark.parametrize("fixture", CONVERTIBLE, ids=[p.stem for p in CONVERTIBLE])
def test_conversion_keeps_comments_and_removes_gpu_requests(fixture: Path) -> None:
    original = fixture.read_text()
    out, problems = convert(original)
    assert not problems
    assert out != original
    # Every full-line comment survives (end-of-line comments on a removed request go with it).
    full_line = [ln.strip() for ln in original.splitlines() if ln.lstrip().startswith("#")]
    assert all(c in comments(out) for c in full_line)
    parsed = docs(out)
    # No device-plugin name is left but in tolerations (the taint of GPU nodes is named after it).
    requests = [_without_tolerations(d) for d in parsed if d.get("kind") != "ResourceClaimTemplate"]
    assert "nvidia.com/" not in str(requests).replace("gpu.nvidia.com", "").replace("mig.nvidia.com", "")
    templates = [d for d in parsed if d["kind"] == "ResourceClaimTemplate"]
    assert templates
    names = {t["metadata"]["name"] for t in templates}  # type: ignore[index]
    # Every pod claim points at a template of the same stream, in the workload's namespace.
    text = str(parsed)
    for n in names:
        assert f"'resourceClaimTemplateName': '{n}'" in text
    for t in templates:
        assert len(t["metadata"]["name"]) <= 63  # type: ignore[index]
        assert t["metadata"].get("namespace") == parsed[-1]["metadata"].get("namespace")  # type: ignore[index,union-attr]


@pytest.mark.parametrize("fixture", CONVERTIBLE, ids=[p.stem for p in CONVERTIBLE])
def test_converting_a_converted_file_changes_nothing(fixture: Path) -> None:
    once, _ = convert(fixture.read_text())
    twice, problems = convert(once)
    assert twice == once and not problems


def test_unchanged_documents_keep_their_exact_text() -> None:
    other = '# a config\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  k: "v"   # quoted\n'
    text = other + "---\n" + (MANIFESTS / "pod.yaml").read_text()
    out, _ = convert(text)
    assert out.startswith(other + "---\n")


def test_deployment_shape() -> None:
    out, _ = convert((MANIFESTS / "deployment.yaml").read_text())
    rct, dep = docs(out)
    assert rct["metadata"]["name"] == "llm-inference-gpu"  # type: ignore[index]
    assert rct["spec"]["spec"]["devices"]["requests"] == [  # type: ignore[index]
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}
    ]
    pod = dep["spec"]["template"]["spec"]  # type: ignore[index]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "llm-inference-gpu"}]
    server, metrics = pod["containers"]
    assert server["resources"] == {
        "requests": {"cpu": "8", "memory": "64Gi"},
        "limits": {"memory": "64Gi"},
        "claims": [{"name": "gpu"}],
    }
    assert "resources" not in metrics
    # The comment above nodeSelector stays above nodeSelector, not above the inserted resourceClaims.
    lines = out.splitlines()
    assert lines[lines.index("      # schedule on the H100 pool only") + 1] == "      nodeSelector:"


def test_mig_request_uses_mig_class_with_a_profile_selector_that_compiles() -> None:
    out, _ = convert((MANIFESTS / "mig-deployment.yaml").read_text())
    req = docs(out)[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]  # type: ignore[index]
    assert req["deviceClassName"] == "mig.nvidia.com"
    (sel,) = req["selectors"]
    assert sel["cel"]["expression"] == "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    compile_selector(sel["cel"]["expression"])


def test_training_roles_get_a_claim_per_pod_from_templates() -> None:
    out, _ = convert((MANIFESTS / "pytorchjob.yaml").read_text())
    rct, job = docs(out)
    # Master and Worker ask for the same shape: one template, each pod its own claim from it.
    assert rct["kind"] == "ResourceClaimTemplate"
    for role in ("Master", "Worker"):
        pod = job["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]  # type: ignore[index]
        assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": rct["metadata"]["name"]}]  # type: ignore[index]


def test_roles_with_different_shapes_get_distinct_templates() -> None:
    out, _ = convert((MANIFESTS / "raycluster.yaml").read_text())
    names = [d["metadata"]["name"] for d in docs(out) if d["kind"] == "ResourceClaimTemplate"]  # type: ignore[index]
    assert names == ["ray-serve-gpu", "ray-serve-gpu-b-gpu"]


def test_shared_claim_makes_one_resource_claim() -> None:
    out, _ = convert((MANIFESTS / "pytorchjob.yaml").read_text(), shared_claim=True)
    claim, job = docs(out)
    assert claim["kind"] == "ResourceClaim" and "devices" in claim["spec"]  # type: ignore[operator]
    pod = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]  # type: ignore[index]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]  # type: ignore[index]


def test_init_and_app_containers_share_one_claim_of_the_effective_size() -> None:
    # Kubernetes' rule: max(largest init container, sum of app containers); the init container's devices
    # are the app container's, so a Job of 1 + 1 holds one GPU, not two.
    out, _ = convert((MANIFESTS / "job.yaml").read_text())
    rct, job = docs(out)
    assert rct["metadata"]["name"] == "embed-batch-gpu"  # type: ignore[index]
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1  # type: ignore[index]
    pod = job["spec"]["template"]["spec"]  # type: ignore[index]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "embed-batch-gpu"}]
    assert pod["initContainers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]


POD_OF = """apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ml}
spec:
  template:
    spec:
      initContainers: INIT
      containers: APP
"""


def _c(name: str, n: int, restart: str | None = None) -> str:
    extra = f", restartPolicy: {restart}" if restart else ""
    return f"{{name: {name}, image: i{extra}, resources: {{limits: {{nvidia.com/gpu: {n}}}}}}}"


def _requests(out: str) -> list[tuple[str, int]]:
    (rct,) = [d for d in docs(out) if d["kind"] == "ResourceClaimTemplate"]
    return [(r["name"], r["exactly"]["count"]) for r in rct["spec"]["spec"]["devices"]["requests"]]  # type: ignore[index]


@pytest.mark.parametrize(
    "init,app,total",
    [
        ([("warm", 8)], [("main", 8)], 8),  # a Job needing 8 holds 8, not 16
        ([("warm", 8)], [("main", 2)], 8),  # the init container is the larger
        ([("warm", 1)], [("a", 2), ("b", 2)], 4),  # the app containers' sum is the larger
        ([("warm", 6)], [("a", 2), ("b", 2)], 6),
        ([("side", 1, "Always"), ("warm", 4)], [("main", 2)], 5),  # KEP-753: the sidecar runs beside the init
        ([("side", 2, "Always")], [("main", 2)], 4),  # a sidecar adds to the app containers
    ],
)
def test_claim_is_sized_by_the_effective_request_rule(init: list[tuple], app: list[tuple], total: int) -> None:
    text = POD_OF.replace("INIT", "[" + ", ".join(_c(*c) for c in init) + "]").replace(
        "APP", "[" + ", ".join(_c(*c) for c in app) + "]"
    )
    out, problems = convert(text)
    assert not problems
    assert sum(n for _, n in _requests(out)) == total
    job = docs(out)[-1]
    pod = job["spec"]["template"]["spec"]  # type: ignore[index]
    assert len(pod["resourceClaims"]) == 1  # one claim per pod
    # Several app containers keep devices of their own: each sees its own request.
    apps = pod["containers"]
    if len(apps) > 1:
        assert [c["resources"]["claims"][0]["request"] for c in apps] == [a[0] for a in app]


@pytest.mark.parametrize(
    "init,app,requests",
    [
        ([("warm", 8)], [("main", 8)], [("gpu", 8)]),  # the init container's devices are all the app's
        ([("warm", 8)], [("main", 2)], [("main", 2), ("init", 6)]),
        ([("warm", 3), ("load", 4)], [("main", 1)], [("main", 1), ("init", 3)]),
    ],
)
def test_an_app_container_sees_only_what_it_asked_for_when_an_init_container_asks_for_more(
    init: list[tuple], app: list[tuple], requests: list[tuple[str, int]]
) -> None:
    """The kubelet's device manager gives each container exactly its request, an app container's taken from the
    devices its pod's init containers used (kubernetes v1.37.2 pkg/kubelet/cm/devicemanager/manager.go
    `devicesToAllocate`: `needed := required`, `allocateRemainingFrom(reusableDevices)`): an app container asking
    for 2 beside an init container of 8 sees 2 GPUs, not 8. The pod still holds 8, in one claim."""
    text = POD_OF.replace("INIT", "[" + ", ".join(_c(*c) for c in init) + "]").replace(
        "APP", "[" + ", ".join(_c(*c) for c in app) + "]"
    )
    out, problems = convert(text)
    assert not problems
    assert _requests(out) == requests
    pod = docs(out)[-1]["spec"]["template"]["spec"]  # type: ignore[index]
    (main,) = pod["containers"]
    split = len(requests) > 1
    assert main["resources"]["claims"] == [{"name": "gpu", "request": app[0][0]} if split else {"name": "gpu"}]
    assert all(c["resources"]["claims"] == [{"name": "gpu"}] for c in pod["initContainers"])


def test_share_across_pod_gives_every_container_the_whole_claim() -> None:
    text = POD_OF.replace("INIT", "[]").replace("APP", f"[{_c('a', 1)}, {_c('b', 1)}]")
    out, _ = convert(text, share_across_pod=True)
    assert _requests(out) == [("gpu", 2)]
    pod = docs(out)[-1]["spec"]["template"]["spec"]  # type: ignore[index]
    assert [c["resources"]["claims"] for c in pod["containers"]] == [[{"name": "gpu"}], [{"name": "gpu"}]]


def test_fallback_makes_first_available_alternatives_in_order_with_a_warning() -> None:
    r = run("convert", "--fallback", "mig.nvidia.com,vfio.gpu.nvidia.com", str(MANIFESTS / "pod.yaml"))
    assert r.code == 0, r.stderr
    assert "replicas may get different devices" in r.stderr
    assert "+# firstAvailable: the first class with free devices wins" in r.stdout
    out, _ = convert((MANIFESTS / "pod.yaml").read_text(), fallback=("mig.nvidia.com", "vfio.gpu.nvidia.com"))
    (request,) = docs(out)[0]["spec"]["spec"]["devices"]["requests"]  # type: ignore[index]
    assert [(s["name"], s["deviceClassName"]) for s in request["firstAvailable"]] == [
        ("gpu", "gpu.nvidia.com"),
        ("mig", "mig.nvidia.com"),
        ("vfio", "vfio.gpu.nvidia.com"),
    ]


def test_device_class_and_selector_options() -> None:
    sel = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
    r = run("convert", "--device-class", "h100.example.com", "--selector", sel, str(MANIFESTS / "pod.yaml"))
    assert r.code == 0, r.stderr
    assert "+          deviceClassName: h100.example.com" in r.stdout
    assert sel in r.stdout


def test_a_selector_that_does_not_compile_is_refused() -> None:
    r = run("convert", "--selector", "device.attributes[", str(MANIFESTS / "pod.yaml"))
    assert r.code == 1
    assert "--selector does not compile" in r.stderr


def test_argo_pod_spec_patch_is_unconvertible(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(MANIFESTS / "argo-workflow.yaml", src)
    shutil.copy(MANIFESTS / "pod.yaml", src)
    before = {p.name: p.read_text() for p in src.iterdir()}
    r = run("convert", "--in-place", str(src))
    assert r.code == 1
    assert "podSpecPatch" in r.stderr and "nothing written" in r.stderr
    assert {p.name: p.read_text() for p in src.iterdir()} == before  # never write on error
    r = run("convert", "--in-place", "--skip-unconvertible", str(src))
    assert r.code == 0, r.stderr
    assert "skipped:" in r.stderr
    assert (src / "argo-workflow.yaml").read_text() == before["argo-workflow.yaml"]
    assert (src / "pod.yaml").read_text() != before["pod.yaml"]
    assert sorted(p.name for p in src.iterdir()) == ["argo-workflow.yaml", "pod.yaml"]  # no temp files left


def test_unknown_kind_with_gpu_requests_is_unconvertible() -> None:
    text = """apiVersion: example.com/v1
kind: Trainer
metadata: {name: t}
spec:
  pod:
    containers:
    - name: c
      resources: {limits: {nvidia.com/gpu: 1}}
"""
    out, problems = convert(text)
    assert out == text
    assert problems and "not in the pod-template table" in problems[0] and "--templates" in problems[0]


def test_mixed_names_in_one_container_are_unconvertible() -> None:
    text = (
        (MANIFESTS / "pod.yaml")
        .read_text()
        .replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 1\n        nvidia.com/mig-1g.10gb: 1")
    )
    out, problems = convert(text)
    assert out == text
    assert len(problems) == 1 and "cannot mix device-plugin names" in problems[0]


def test_time_sliced_shared_name_is_unconvertible() -> None:
    text = (MANIFESTS / "pod.yaml").read_text().replace("nvidia.com/gpu: 1", "nvidia.com/gpu.shared: 1")
    out, problems = convert(text)
    assert out == text and "DRA has no replicas" in problems[0]


def test_nothing_to_do_exits_zero_with_empty_diff(tmp_path: Path) -> None:
    f = tmp_path / "cm.yaml"
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    r = run("convert", str(f))
    assert r.code == 0 and r.stdout == ""


def test_output_dir_keeps_relative_paths(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = run("convert", str(MANIFESTS), "--output-dir", str(out), "--skip-unconvertible")
    assert r.code == 0, r.stderr
    written = sorted(p.relative_to(out) for p in out.rglob("*.yaml"))
    assert written == sorted(p.relative_to(MANIFESTS) for p in MANIFESTS.rglob("*.yaml"))


def test_in_place_and_output_dir_exclude_each_other(tmp_path: Path) -> None:
    r = run("convert", "--in-place", "--output-dir", str(tmp_path), str(MANIFESTS / "pod.yaml"))
    assert r.code == 1 and "exclude each other" in r.stderr


def test_dns_label_is_valid_and_bounded() -> None:
    assert dns_label("My_Workload.v2--x-") == "my-workload-v2-x"
    long = dns_label("a" * 80 + "-gpu")
    assert len(long) == 63 and long != dns_label("a" * 81 + "-gpu")


def test_indentation_is_read_from_the_document() -> None:
    assert guess_indent((MANIFESTS / "deployment.yaml").read_text()) == (2, 2)
    assert guess_indent((MANIFESTS / "statefulset.yaml").read_text()) == (2, 0)


REFUSED = ROOT / "fixtures" / "manifests" / "refused"


@pytest.mark.parametrize(
    "fixture,reason",
    [
        ("trainjob.yaml", "resourcesPerNode"),
        ("hami-pod.yaml", "fraction of a GPU"),
        ("knative-service.yaml", "knative/serving#15332"),
        ("sparkapplication.yaml", "spec.executor.template"),
        ("notebook.yaml", "k8s.io/api v0.23.0"),
    ],
)
def test_real_manifests_convert_cannot_carry_are_refused_with_exit_1(fixture: str, reason: str, tmp_path: Path) -> None:
    src = tmp_path / fixture
    shutil.copy(REFUSED / fixture, src)
    before = src.read_text()
    r = run("convert", "--in-place", str(src))
    assert r.code == 1, r.stderr
    assert reason in r.stderr and "nothing written" in r.stderr
    assert "converted 0 of" not in r.stderr
    assert src.read_text() == before


def test_kserve_serverless_is_converted_with_a_warning() -> None:
    text = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: llm, namespace: serving}
spec:
  predictor:
    model:
      modelFormat: {name: huggingface}
      resources: {limits: {nvidia.com/gpu: 1}}
"""
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    assert not result.problems and out != text
    assert any("knative/serving#15332" in w and "RawDeployment" in w for w in result.warnings)
    raw = text.replace(
        "metadata: {name: llm,", "metadata: {annotations: {serving.kserve.io/deploymentMode: RawDeployment}, name: llm,"
    )
    _, result = convert_text(raw, "t.yaml", TABLE, ConvertOptions())
    assert not [w for w in result.warnings if "knative" in w]  # KServe's schema: tests/unit/test_convert_schemas.py


def test_an_argo_rollout_is_converted_with_a_warning_about_older_rollouts_controllers() -> None:
    """Argo Rollouts v1.8.x's CRD schema drops resourceClaimTemplateName (tests/integration/test_convert_live.py
    applies a converted Rollout under v1.9.0's own CRD with strict field validation)."""
    text = (MANIFESTS / "rollout.yaml").read_text()
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    assert not result.problems and "resourceClaimTemplateName: embeddings-gpu" in out
    assert result.warnings == [
        "t.yaml:1: Rollout/embeddings: Argo Rollouts before v1.9.0 drops resourceClaims[].resourceClaimTemplateName "
        "(its CRD schema predates the field), leaving the pods a claim with no source: run v1.9.0 or later "
        "(--dry-run=server refuses the field where it would be dropped)"
    ]


@pytest.mark.parametrize(
    "snippet",
    [
        "spec: {gpus: 2, image: x}",  # a CRD's own GPU shorthand
        "spec: {worker: {resourcesPerNode: {limits: {nvidia.com/gpu: 2}}}}",
        "spec: {template: {spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}}}",
    ],
)
def test_gpu_requests_the_tool_cannot_rewrite_exit_1(snippet: str, tmp_path: Path) -> None:
    f = tmp_path / "crd.yaml"
    f.write_text(f"apiVersion: example.com/v1\nkind: Trainer\nmetadata: {{name: t}}\n{snippet}\n")
    r = run("convert", str(f))
    assert r.code == 1 and "unconvertible" in r.stderr, r.stderr
    # A known kind with a GPU count under a key outside its pod templates is refused too.
    g = tmp_path / "dep.yaml"
    g.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  gpus: 2\n  template:\n"
        "    spec:\n      containers: [{name: c, image: i}]\n"
    )
    r = run("convert", str(g))
    assert r.code == 1 and "spec.gpus" in r.stderr


@pytest.mark.parametrize("value", ["-1", "1.5", '"abc"', '"500m"', "true", "[1]"])
def test_counts_must_be_whole_quantities(value: str) -> None:
    """0 is no request and left as it is; every form the API server accepts: tests/unit/test_convert_counts.py."""
    text = (MANIFESTS / "pod.yaml").read_text().replace("nvidia.com/gpu: 1", f"nvidia.com/gpu: {value}")
    assert text != (MANIFESTS / "pod.yaml").read_text()
    out, problems = convert(text)
    assert out == text
    assert problems and ("must" in problems[0] or "not a quantity" in problems[0])


def test_requests_and_limits_must_agree() -> None:
    text = (MANIFESTS / "deployment.yaml").read_text().replace("nvidia.com/gpu: 1  # one", "nvidia.com/gpu: 2  # one")
    out, problems = convert(text)
    assert out == text and "differ" in problems[0]


def test_two_workloads_named_alike_get_distinct_templates(tmp_path: Path) -> None:
    dep = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: llm, namespace: ml}\nspec:\n  template:\n"
        "    spec:\n      containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]\n"
    )
    sts = dep.replace("kind: Deployment", "kind: StatefulSet").replace("gpu: 1}", "gpu: 2}")
    other_ns = dep.replace("namespace: ml", "namespace: other")
    existing = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: llm-gpu, namespace: other}\n"
        "spec: {spec: {devices: {requests: []}}}\n"
    )
    # Within one file names are kept distinct; across files a clash is refused (test_convert_unknown.py).
    (tmp_path / "a.yaml").write_text("---\n".join((dep, sts, other_ns, existing)))
    out = tmp_path / "out"
    r = run("convert", str(tmp_path / "a.yaml"), "--output-dir", str(out))
    assert r.code == 0, r.stderr
    names: dict[str, list[str]] = {}
    for f in sorted(out.iterdir()):
        for d in docs(f.read_text()):
            if d["kind"] == "ResourceClaimTemplate":
                names.setdefault(str(d["metadata"].get("namespace")), []).append(d["metadata"]["name"])  # type: ignore[union-attr,index]
    for ns, taken in names.items():
        assert len(taken) == len(set(taken)), (ns, taken)
        assert all(len(n) <= 63 for n in taken)
    assert len(names["ml"]) == 2 and len(names["other"]) == 2


def test_long_names_stay_within_a_dns_label_and_distinct() -> None:
    a = "a" * 70
    text = (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {a}x, namespace: ml}}\nspec:\n  template:\n"
        "    spec:\n      containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]\n"
    )
    out, problems = convert(text + "---\n" + text.replace(f"{a}x", f"{a}y").replace("Deployment", "StatefulSet"))
    assert not problems
    names = [d["metadata"]["name"] for d in docs(out) if d["kind"] == "ResourceClaimTemplate"]  # type: ignore[index]
    assert len(set(names)) == 2 and all(len(n) <= 63 for n in names)


def test_two_inputs_onto_one_output_path_are_refused(tmp_path: Path) -> None:
    for d in ("x", "y"):
        (tmp_path / d).mkdir()
        shutil.copy(MANIFESTS / "pod.yaml", tmp_path / d / "pod.yaml")
    out = tmp_path / "out"
    r = run("convert", str(tmp_path / "x" / "pod.yaml"), str(tmp_path / "y" / "pod.yaml"), "--output-dir", str(out))
    assert r.code == 1 and "would both be written" in r.stderr
    assert not out.exists()


def test_a_file_given_twice_is_converted_once(tmp_path: Path) -> None:
    shutil.copy(MANIFESTS / "pod.yaml", tmp_path / "pod.yaml")
    r = run("convert", "--in-place", str(tmp_path / "pod.yaml"), str(tmp_path))
    assert r.code == 0, r.stderr
    assert "converted 1 of 1" in r.stderr
    assert len([d for d in docs((tmp_path / "pod.yaml").read_text()) if d["kind"] == "ResourceClaimTemplate"]) == 1


@pytest.mark.parametrize(
    "first",
    ["--- # the pod\n", "--- !!map\n", "---\n"],
)
def test_documents_that_start_on_their_marker_line(first: str) -> None:
    body = (MANIFESTS / "pod.yaml").read_text()
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n" + first + body
    out, problems = convert(text)
    assert not problems
    assert len([d for d in docs(out) if d["kind"] == "ResourceClaimTemplate"]) == 1
    assert out.startswith("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---")


def test_a_flow_document_on_its_marker_line_is_converted() -> None:
    text = (
        "--- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: "
        "[{name: c, image: i, resources: {limits: {nvidia.com/gpu: 2}}}]}}\n"
    )
    out, problems = convert(text)
    assert not problems
    assert [d["kind"] for d in docs(out)] == ["ResourceClaimTemplate", "Pod"]


def test_symlinks_are_kept_in_place(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    shutil.copy(MANIFESTS / "pod.yaml", real)
    d = tmp_path / "deploy"
    d.mkdir()
    (d / "link.yaml").symlink_to(real)
    r = run("convert", "--in-place", str(d))
    assert r.code == 0, r.stderr
    assert (d / "link.yaml").is_symlink()
    assert "ResourceClaimTemplate" in real.read_text()


def test_in_place_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dra_migrate.convert.files as files

    for name in ("a", "b", "c"):
        shutil.copy(MANIFESTS / "pod.yaml", tmp_path / f"{name}.yaml")
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    real_replace = files.os.replace
    calls = {"n": 0}

    def failing_replace(src: str, dst: str) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # the last rename fails, after two files were replaced
            raise OSError(28, "No space left on device", dst)
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", failing_replace)
    r = run("convert", "--in-place", str(tmp_path))
    assert r.code == 1 and "nothing changed" in r.stderr
    monkeypatch.setattr(files.os, "replace", real_replace)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before  # no temp files left either

    real_temp = files._write_temp

    def failing_temp(target: Path, text: str, limit: int = 0o7777) -> Path:
        if target.name == "c.yaml":
            raise OSError(13, "Permission denied", str(target))
        return real_temp(target, text, limit)

    monkeypatch.setattr(files, "_write_temp", failing_temp)
    r = run("convert", "--in-place", str(tmp_path))
    assert r.code == 1 and "nothing written" in r.stderr
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_comments_inside_a_map_conversion_empties_are_kept() -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n"
        "      containers:\n        - name: c\n          image: i\n          resources:\n            limits:\n"
        "              # one GPU for the model\n              nvidia.com/gpu: 1   # H100\n"
        "            # requests follow limits\n"
    )
    out, problems = convert(text)
    assert not problems
    assert "# one GPU for the model" in comments(out)
    assert "# requests follow limits" in comments(out)


def test_a_documents_own_list_indentation_is_kept_so_the_diff_is_only_the_change() -> None:
    # Two list styles in one document: `volumes` flush, `containers` indented by two.
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  volumes:\n  - name: v\n    emptyDir: {}\n"
        "  containers:\n    - name: c\n      image: i\n      args:\n        - --x\n      resources:\n"
        "        limits:\n          nvidia.com/gpu: 1\n"
    )
    out, problems = convert(text)
    assert not problems
    pod_text = out.split("---\n")[-1]
    removed = [ln for ln in text.splitlines() if ln not in pod_text.splitlines()]
    assert removed == ["        limits:", "          nvidia.com/gpu: 1"]
    assert docs(pod_text)[0]["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}  # type: ignore[index]


def test_a_manifest_that_begins_with_a_byte_order_mark_keeps_it(tmp_path: Path) -> None:
    """Windows editors write UTF-8 with a mark: conversion changes only what it converts, so the mark stays."""
    text = (MANIFESTS / "deployment.yaml").read_text()
    plain, marked = tmp_path / "plain.yaml", tmp_path / "marked.yaml"
    plain.write_text(text)
    marked.write_bytes(codecs.BOM_UTF8 + text.encode())
    for f in (plain, marked):
        assert run("convert", str(f), "--in-place").code == 0
    assert marked.read_bytes() == codecs.BOM_UTF8 + plain.read_bytes()
    assert plain.read_bytes() != text.encode()  # it was converted


def test_a_manifest_that_is_not_utf8_is_refused_naming_the_line_of_the_bad_byte(tmp_path: Path) -> None:
    """A Latin-1 comment in one line of a repository's manifests: the refusal said only "not UTF-8 text"."""
    f = tmp_path / "latin1.yaml"
    f.write_bytes(b"apiVersion: v1\nkind: ConfigMap\n# caf\xe9\nmetadata: {name: x}\n")
    r = run("convert", str(f))
    assert (r.code, r.stdout) == (1, "")
    assert r.stderr.strip() == f"error: {f}:3: not UTF-8 text (byte 0xe9): save it as UTF-8 (iconv -t UTF-8)"
    r = run("convert", "-", stdin=f.read_bytes())  # it said "unacceptable character #xdce9" at line 1
    assert (r.code, r.stdout) == (1, "")
    assert r.stderr.strip() == "error: <stdin>:3: not UTF-8 text (byte 0xe9): save it as UTF-8 (iconv -t UTF-8)"


def test_a_utf16_manifest_is_refused_saying_to_save_it_as_utf8(tmp_path: Path) -> None:
    f = tmp_path / "utf16.yaml"
    f.write_bytes((MANIFESTS / "deployment.yaml").read_text().encode("utf-16"))
    r = run("convert", str(f))
    assert r.code == 1 and r.stdout == ""
    assert r.stderr.strip() == f"error: {f}: UTF-16 text: save it as UTF-8, as kubectl and git expect"
