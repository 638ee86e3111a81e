"""`convert` reads a device-plugin count as the API server reads it (k8s.io/apimachinery resource.Quantity).

Every form the API server accepts for an extended resource is a count: an integer written as a float (`2.0`), a
string (`"2"`), an exponent (`1e0`), a suffix (`"2000m"`), with blanks around it; `0` and `null` are no request
at all (the scheduler skips a zero request: kubernetes v1.37.2
pkg/scheduler/framework/plugins/noderesources/fit.go `if rQuant == 0 { continue }`), so a Helm chart's CPU
variant that renders `nvidia.com/gpu: 0` is left as it is and does not stop the run. What the API server
refuses stays refused: a negative or fractional count, a non-quantity, requests unequal to limits
(kubernetes v1.37.2 pkg/apis/core/validation/validation.go `validateResourceRequirements`,
`ValidateResourceQuantityValue`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from tests.unit.cli import run

TABLE = TemplateTable.builtin()


def convert(text: str) -> tuple[str, list[str]]:
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    return out, result.problems


def docs(text: str) -> list[dict[str, object]]:
    return [d for d in YAML(typ="safe").load_all(text) if d]


def deployment(name: str, resources: str, extra_container: str = "") -> str:
    return (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  template:\n    spec:\n"
        f"      containers:\n      - name: main\n        image: i\n        resources:\n{resources}{extra_container}"
    )


def counts(out: str) -> list[int]:
    found = []
    for d in docs(out):
        if d["kind"] == "ResourceClaimTemplate":
            for r in d["spec"]["spec"]["devices"]["requests"]:  # type: ignore[index]
                found.append(r["exactly"]["count"])
    return found


@pytest.mark.parametrize("value", ["0", '"0"', "0.0", '"0m"', "", "~", "null"])
def test_a_zero_count_is_no_request_and_left_as_it_is(value: str) -> None:
    text = deployment("cpu-variant", f"          limits:\n            nvidia.com/gpu: {value}\n")
    out, problems = convert(text)
    assert problems == []
    assert out == text


def test_a_helm_stream_with_a_cpu_variant_converts_the_gpu_variant(tmp_path: Path) -> None:
    cpu = deployment("cpu", "          limits:\n            cpu: 1\n            nvidia.com/gpu: 0\n")
    gpu = deployment("gpu", "          limits:\n            cpu: 1\n            nvidia.com/gpu: 1\n")
    f = tmp_path / "rendered.yaml"
    f.write_text(f"---\n# Source: chart/templates/cpu.yaml\n{cpu}---\n# Source: chart/templates/gpu.yaml\n{gpu}")
    r = run("convert", str(f), "--output-dir", str(tmp_path / "out"))
    assert r.code == 0, r.stderr
    out = (tmp_path / "out" / "rendered.yaml").read_text()
    assert cpu in out  # untouched, zero and all
    assert counts(out) == [1]


def test_a_zero_container_beside_a_gpu_container_keeps_its_zero_and_gets_no_claim() -> None:
    sidecar = "      - name: metrics\n        image: m\n        resources:\n"
    sidecar += "          limits:\n            nvidia.com/gpu: 0\n"
    text = deployment("llm", "          limits:\n            nvidia.com/gpu: 2\n", sidecar)
    out, problems = convert(text)
    assert problems == []
    assert counts(out) == [2]  # one app container with GPUs: one request, not split per container
    (dep,) = [d for d in docs(out) if d["kind"] == "Deployment"]
    main, metrics = dep["spec"]["template"]["spec"]["containers"]  # type: ignore[index]
    assert main["resources"] == {"claims": [{"name": "gpu"}]}
    assert metrics["resources"] == {"limits": {"nvidia.com/gpu": 0}}
    again, problems = convert(out)
    assert problems == [] and again == out


@pytest.mark.parametrize(
    ("limit", "req", "count"),
    [
        ("2.0", None, 2),
        ('"2"', None, 2),
        ("1e0", None, 1),
        ('"1e0"', None, 1),
        ('"2000m"', None, 2),
        ('" 2 "', None, 2),
        ('"+2"', None, 2),
        ("2", '"2"', 2),
        ("2.0", "2", 2),
        ('"2000m"', '"2"', 2),
    ],
)
def test_every_integer_quantity_the_api_server_accepts_is_a_count(limit: str, req: str | None, count: int) -> None:
    resources = f"          limits:\n            nvidia.com/gpu: {limit}\n"
    if req is not None:
        resources += f"          requests:\n            nvidia.com/gpu: {req}\n"
    out, problems = convert(deployment("llm", resources))
    assert problems == []
    assert counts(out) == [count]
    (dep,) = [d for d in docs(out) if d["kind"] == "Deployment"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}  # type: ignore[index]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("-1", "must not be negative"),
        ("1.5", "must be an integer"),
        ('"500m"', "must be an integer"),
        ('"abc"', "not a quantity"),
        ('""', "not a quantity"),
        ("true", "not a quantity"),
        ("[1]", "not a quantity"),
    ],
)
def test_what_the_api_server_refuses_stays_refused(value: str, why: str) -> None:
    text = deployment("llm", f"          limits:\n            nvidia.com/gpu: {value}\n")
    out, problems = convert(text)
    assert out == text
    assert len(problems) == 1 and why in problems[0], problems


def test_requests_unequal_to_limits_by_value_are_refused() -> None:
    resources = "          limits:\n            nvidia.com/gpu: 1\n          requests:\n            nvidia.com/gpu: 0\n"
    text = deployment("llm", resources)
    out, problems = convert(text)
    assert out == text and len(problems) == 1 and "must equal its limit" in problems[0], problems


@pytest.mark.parametrize(
    "text",
    [
        # A kind convert refuses when it asks for GPUs (Knative rejects resources.claims) asks for none.
        "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: s}\nspec:\n  template:\n    spec:\n"
        "      containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 0}}}]\n",
        # A device-plugin name outside every pod template, with a zero count, asks for none either.
        "apiVersion: example.com/v1\nkind: Trainer\nmetadata: {name: t}\n"
        "spec: {worker: {resourcesPerNode: {limits: {nvidia.com/gpu: 0}}}}\n",
        # A chart's values file of a CPU variant.
        "resources:\n  limits:\n    nvidia.com/gpu: 0\n",
    ],
    ids=["knative", "crd-field", "values"],
)
def test_a_zero_count_anywhere_is_no_request(text: str) -> None:
    out, problems = convert(text)
    assert problems == [] and out == text


@pytest.mark.parametrize(
    ("first", "second", "refused"),
    [(56, None, True), (33, None, True), (32, None, False), (20, 20, True), (16, 16, False)],
)
def test_a_claim_of_more_devices_than_the_allocator_gives_one_claim_is_refused(
    first: int, second: int | None, refused: bool
) -> None:
    """The scheduler's allocator gives one claim at most 32 devices (k8s.io/api resource/v1
    `AllocationResultsMaxSize`; k8s.io/dynamic-resource-allocation v0.37.2 structured/internal/stable/
    allocator_stable.go: "exceeds the claim limit"): a claim for 56 MIG slices (8 GPUs of 7) would leave the pod
    Pending for good, where the device plugin gave it the 56 devices."""
    other = ""
    if second is not None:
        other = "      - name: second\n        image: i\n        resources:\n          limits:\n"
        other += f"            nvidia.com/mig-1g.10gb: {second}\n"
    text = deployment("llm", f"          limits:\n            nvidia.com/mig-1g.10gb: {first}\n", other)
    out, problems = convert(text)
    if refused:
        assert out == text and len(problems) == 1 and "at most 32 devices" in problems[0], problems
    else:
        assert problems == [] and sum(counts(out)) == first + (second or 0)
