"""`dra-migrate convert`: golden conversions of every fixture manifest, idempotence, validation, writing.

Regenerate the golden files on purpose only: DRA_MIGRATE_UPDATE_GOLDEN=1, then review the diff.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from migrate.cluster.templates import TemplateTable
from migrate.convert.files import convert_text, guess_indent
from migrate.convert.rewrite import ConvertOptions, dns_label
from migrate.dra.cel import compile_selector
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
    assert "nvidia.com/" not in str([d for d in parsed if d.get("kind") != "ResourceClaimTemplate"]).replace(
        "nvidia.com/gpu', 'operator'", ""
    ).replace("gpu.nvidia.com", "").replace("mig.nvidia.com", "")
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
    assert rct["metadata"]["name"] == "llm-inference-server-gpu"  # type: ignore[index]
    assert rct["spec"]["spec"]["devices"]["requests"] == [  # type: ignore[index]
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}
    ]
    pod = dep["spec"]["template"]["spec"]  # type: ignore[index]
    assert pod["resourceClaims"] == [{"name": "server-gpu", "resourceClaimTemplateName": "llm-inference-server-gpu"}]
    server, metrics = pod["containers"]
    assert server["resources"] == {
        "requests": {"cpu": "8", "memory": "64Gi"},
        "limits": {"memory": "64Gi"},
        "claims": [{"name": "server-gpu"}],
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
        assert pod["resourceClaims"] == [{"name": "pytorch-gpu", "resourceClaimTemplateName": rct["metadata"]["name"]}]  # type: ignore[index]


def test_roles_with_different_shapes_get_distinct_templates() -> None:
    out, _ = convert((MANIFESTS / "raycluster.yaml").read_text())
    names = [d["metadata"]["name"] for d in docs(out) if d["kind"] == "ResourceClaimTemplate"]  # type: ignore[index]
    assert names == ["ray-serve-ray-worker-gpu", "ray-serve-gpu-b-ray-worker-gpu"]


def test_shared_claim_makes_one_resource_claim() -> None:
    out, _ = convert((MANIFESTS / "pytorchjob.yaml").read_text(), shared_claim=True)
    claim, job = docs(out)
    assert claim["kind"] == "ResourceClaim" and "devices" in claim["spec"]  # type: ignore[operator]
    pod = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]  # type: ignore[index]
    assert pod["resourceClaims"] == [{"name": "pytorch-gpu", "resourceClaimName": claim["metadata"]["name"]}]  # type: ignore[index]


def test_share_across_pod_gives_containers_one_claim() -> None:
    text = (MANIFESTS / "job.yaml").read_text()
    out, _ = convert(text, share_across_pod=True)
    rct, job = docs(out)
    assert rct["metadata"]["name"] == "embed-batch-gpu"  # type: ignore[index]
    pod = job["spec"]["template"]["spec"]  # type: ignore[index]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "embed-batch-gpu"}]
    assert pod["initContainers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    # Without the flag each container has a claim of its own.
    out, _ = convert(text)
    pod = docs(out)[1]["spec"]["template"]["spec"]  # type: ignore[index]
    assert [c["name"] for c in pod["resourceClaims"]] == ["embed-gpu", "warmup-gpu"]


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
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in MANIFESTS.glob("*.yaml"))


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
