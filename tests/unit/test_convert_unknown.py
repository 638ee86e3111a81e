"""`convert` says what it did not understand (issue 28, item 1), and a file converts the same alone and in a
directory.

Hostile inputs: GPU requests in a CRD's own field (NVIDIA Dynamo's `gpu: "1"`, a string), a device-plugin
name under a key no pod template covers, requests inside strings (an Argo resource template's manifest, a
k3s HelmChart's `valuesContent`); names that were chosen across files, so a file's output depended on its
neighbours; several GPU containers per pod, MIG profiles included.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_files, convert_text, find_files
from dra_migrate.convert.rewrite import ConvertOptions
from tests.unit.cli import run, runner

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "fixtures" / "manifests"
UNKNOWN = MANIFESTS / "unknown"
TABLE = TemplateTable.builtin()
EVERY_FIXTURE = sorted(MANIFESTS.rglob("*.yaml"))


@pytest.mark.parametrize(
    ("fixture", "path"),
    [
        ("dynamo-graph.yaml", "spec.services.VllmDecodeWorker.resources.limits.gpu"),
        ("argo-resource-template.yaml", "spec.templates[0].resource.manifest"),
        ("gpu-under-unknown-key.yaml", "spec.injection.profiler.resources.limits.nvidia.com/gpu"),
    ],
)
def test_gpu_requests_in_unknown_places_are_reported_by_file_and_path_and_exit_1(
    fixture: str, path: str, tmp_path: Path
) -> None:
    src = UNKNOWN / fixture
    r = run("convert", str(src))
    assert r.code == 1, r.stderr
    assert f"{src}:" in r.stderr and path in r.stderr, r.stderr
    assert "converted" not in r.stderr  # never "converted 0 of 1 file(s)" and exit 0
    shutil.copy(src, tmp_path / fixture)
    r = run("convert", "--skip-unconvertible", "--in-place", str(tmp_path / fixture))
    assert r.code == 0 and "skipped:" in r.stderr and path in r.stderr
    assert (tmp_path / fixture).read_text() == src.read_text()  # the document with the problem is kept


@pytest.mark.parametrize(
    "snippet",
    [
        'spec: {workers: {gpus: "2"}}',  # a string count
        "spec: {workers: {numGPUs: 1.0}}",
        "spec: {valuesContent: 'resources:\n  limits:\n    nvidia.com/gpu: 2\n'}",  # k3s HelmChart values
        """spec: {patch: '{"resources":{"limits":{"nvidia.com/mig-1g.10gb":"1"}}}'}""",  # JSON in a string
        # the Spark operator's GPUSpec on a driver and executors (kubeflow/spark-operator api/v1beta2)
        "spec: {driver: {cores: 1}, executor: {instances: 4, gpu: {name: nvidia.com/gpu, quantity: 1}}}",
    ],
)
def test_unknown_kinds_asking_for_gpus_in_their_own_ways_are_problems(snippet: str) -> None:
    text = f"apiVersion: example.com/v1\nkind: Thing\nmetadata: {{name: t}}\n{snippet}\n"
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    assert out == text and result.problems, snippet


@pytest.mark.parametrize(
    "text",
    [
        # node labels, tolerations and selectors name GPUs without asking for any
        "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\n"
        "spec: {selector: 'nvidia.com/gpu.count: 8', gpu: false, gpus: all, note: 'nvidia.com/gpu.product: A100'}\n",
        # an application's own config data
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {gpus: '4'}\n",
        # kubectl's last-applied annotation repeats the object; it is not a second request
        "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\n  annotations:\n"
        """    kubectl.kubernetes.io/last-applied-configuration: '{"nvidia.com/gpu": 1}'\n""",
        # the device plugin's own time-slicing config
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tsc}\ndata:\n  any: |\n    sharing:\n"
        "      timeSlicing:\n        resources:\n        - name: nvidia.com/gpu\n          replicas: 4\n",
        # a cap on what Karpenter provisions, and a Kueue quota: no pod's request
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: gpu}\n"
        "spec: {limits: {cpu: '1000', nvidia.com/gpu: 64}, template: {spec: {taints: [{key: nvidia.com/gpu}]}}}\n",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\nspec:\n  resourceGroups:\n"
        "  - coveredResources: [nvidia.com/gpu]\n"
        "    flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}]\n",
    ],
)
def test_things_that_only_name_gpus_are_not_requests(text: str) -> None:
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    assert out == text and not result.problems, result.problems


def test_a_limitrange_naming_gpus_warns_what_it_does_to_the_converted_pods() -> None:
    """A Container max is stored as the default limit too: the LimitRanger adds the GPU back to each container
    a conversion took it from (it was said to stop counting them: it does not)."""
    text = (
        "apiVersion: v1\nkind: LimitRange\nmetadata: {name: caps}\n"
        "spec: {limits: [{type: Container, max: {nvidia.com/gpu: 4}}]}\n"
    )
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    assert out == text and not result.problems
    assert result.warnings == [
        "t.yaml:1: LimitRange/caps: adds `nvidia.com/gpu: 4` to every container that does not name it: a pod "
        "converted to a ResourceClaim gets a device-plugin GPU request back beside its claim (a second device, "
        "or no node fits it)"
    ]


@pytest.mark.parametrize("fixture", EVERY_FIXTURE, ids=[str(p.relative_to(MANIFESTS)) for p in EVERY_FIXTURE])
def test_every_fixture_converts_identically_alone_and_in_its_directory(fixture: Path) -> None:
    together = {r.path: r for r in convert_files(find_files([MANIFESTS]), TABLE, ConvertOptions())}
    (alone,) = convert_files([(fixture, Path(fixture.name))], TABLE, ConvertOptions())
    inside = together[fixture]
    assert inside.converted == alone.converted
    assert inside.problems == alone.problems and inside.warnings == alone.warnings


RAY = """apiVersion: ray.io/v1
kind: RayCluster
metadata: {{name: raycluster-kuberay}}
spec:
  headGroupSpec:
    template:
      spec:
        containers: [{{name: ray-head, image: rayproject/ray:2.9.0}}]
  workerGroupSpecs:
  - groupName: gpu-group
    replicas: 1
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.9.0
          resources: {{limits: {{nvidia.com/gpu: {n}}}}}
"""


def test_a_sample_directory_of_alike_names_converts_each_file_as_alone(tmp_path: Path) -> None:
    """KubeRay's samples directory holds many RayClusters named `raycluster-kuberay`: each is an alternative,
    and each must convert exactly as it does alone (no `-gpu-group-gpu` renaming because of a neighbour)."""
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(RAY.format(n=1))
    (alone,) = convert_files([(tmp_path / "b.yaml", Path("b.yaml"))], TABLE, ConvertOptions())
    both = convert_files(find_files([tmp_path]), TABLE, ConvertOptions())
    assert both[1].converted == alone.converted and not both[1].problems
    assert "name: raycluster-kuberay-gpu\n" in alone.converted


def test_two_files_defining_one_template_name_differently_are_refused_naming_both(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(RAY.format(n=1))
    (tmp_path / "b.yaml").write_text(RAY.format(n=2))
    before = (tmp_path / "b.yaml").read_text()
    r = run("convert", "--in-place", str(tmp_path))
    assert r.code == 1 and "nothing written" in r.stderr
    clash = [ln for ln in r.stderr.splitlines() if "also defined" in ln]
    assert len(clash) == 1 and str(tmp_path / "a.yaml") in clash[0] and str(tmp_path / "b.yaml") in clash[0]
    r = run("convert", "--in-place", "--skip-unconvertible", str(tmp_path))
    assert r.code == 0
    assert (tmp_path / "b.yaml").read_text() == before  # the later file is left whole: no clash is written
    # An existing template of that name in another file clashes the same way.
    (tmp_path / "b.yaml").write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: raycluster-kuberay-gpu}\n"
        "spec: {spec: {devices: {requests: []}}}\n"
    )
    (tmp_path / "a.yaml").write_text(RAY.format(n=1))
    r = run("convert", str(tmp_path))
    assert r.code == 1 and "also defined" in r.stderr


def test_several_gpu_containers_per_pod_keep_their_own_requests_mig_included() -> None:
    text = """apiVersion: apps/v1
kind: Deployment
metadata: {name: multi, namespace: ml}
spec:
  template:
    spec:
      containers:
      - {name: big, image: i, resources: {limits: {nvidia.com/gpu: 2}}}
      - {name: small, image: i, resources: {limits: {nvidia.com/gpu: 1}}}
      - {name: cpu, image: i}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: slices, namespace: ml}
spec:
  template:
    spec:
      containers:
      - {name: a, image: i, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
      - {name: b, image: i, resources: {limits: {nvidia.com/mig-1g.10gb: 2}}}
      - {name: c, image: i, resources: {limits: {nvidia.com/mig-3g.40gb: 1}}}
"""
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    assert not result.problems, result.problems
    docs = [d for d in YAML(typ="safe").load_all(out) if d]
    templates = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ResourceClaimTemplate"}
    workloads = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}

    def requests(template: str) -> dict[str, tuple[int, list[str]]]:
        reqs = templates[template]["spec"]["spec"]["devices"]["requests"]
        return {
            q["name"]: (q["exactly"]["count"], [s["cel"]["expression"] for s in q["exactly"].get("selectors", [])])
            for q in reqs
        }

    def seen(workload: str) -> dict[str, list[dict[str, str]]]:
        pod = workloads[workload]["spec"]["template"]["spec"]
        return {c["name"]: c.get("resources", {}).get("claims", []) for c in pod["containers"]}

    multi = seen("multi")
    assert multi["big"] == [{"name": "gpu", "request": "big"}] and multi["small"] == [
        {"name": "gpu", "request": "small"}
    ]
    assert multi["cpu"] == []
    (claim,) = workloads["multi"]["spec"]["template"]["spec"]["resourceClaims"]
    assert {k: v[0] for k, v in requests(claim["resourceClaimTemplateName"]).items()} == {"big": 2, "small": 1}
    sl = seen("slices")
    pod_claims = {
        c["name"]: c["resourceClaimTemplateName"]
        for c in workloads["slices"]["spec"]["template"]["spec"]["resourceClaims"]
    }
    assert len(pod_claims) == 2  # one claim per MIG profile, each container keeps its own request
    small = requests(pod_claims[sl["a"][0]["name"]])
    assert small["a"][0] == 1 and small["b"][0] == 2 and all("'1g.10gb'" in s[1][0] for s in small.values())
    (big,) = requests(pod_claims[sl["c"][0]["name"]]).values()
    assert big[0] == 1 and "'3g.40gb'" in big[1][0]


def _stdin(text: str, *args: str) -> tuple[int, str, str]:
    from dra_migrate.cli.main import cli

    r = runner().invoke(cli, ["convert", *args], input=text, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def test_convert_dash_reads_stdin_and_writes_the_converted_stream_to_stdout() -> None:
    text = (MANIFESTS / "pod.yaml").read_text()
    code, out, _ = _stdin(text, "-")
    (alone,) = convert_files([(MANIFESTS / "pod.yaml", Path("pod.yaml"))], TABLE, ConvertOptions())
    assert code == 0 and out == alone.converted  # the same conversion as the file, not a diff
    code, out, err = _stdin((UNKNOWN / "dynamo-graph.yaml").read_text(), "-")
    assert code == 1 and out == "" and "<stdin>:" in err and "resources.limits.gpu" in err
    code, _, err = _stdin(text, "-", "--in-place")
    assert code == 1 and "stdin" in err


_POD_BODY = """metadata: {name: p}
spec:
  containers:
  - name: x
    image: y
    resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.mark.parametrize(
    "head",
    [
        "apiVersion: v1\nkind:\n  Pod: x\n",  # `kind:` then an indented block: a map (found by fuzzing, atheris)
        "apiVersion: v1\nkind: [Pod]\n",
        "apiVersion: {v: 1}\nkind: Pod\n",
        "apiVersion: v1\nkind: 7\n",
    ],
    ids=["kind-map", "kind-list", "apiversion-map", "kind-int"],
)
def test_a_manifest_whose_kind_or_apiversion_is_not_a_string_is_a_problem_not_an_internal_error(
    head: str, tmp_path: Path
) -> None:
    """A set lookup of an unhashable `kind` crashed convert ("internal error: TypeError: unhashable type:
    'CommentedMap'"). The API server refuses such an object; convert names it and writes nothing."""
    src = tmp_path / "m.yaml"
    src.write_text(head + _POD_BODY)
    r = run("convert", str(src), "--output-dir", str(tmp_path / "out"))
    assert r.code == 1 and "internal error" not in r.stderr, r.stderr
    assert f"{src}:1: " in r.stderr and "not a string" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: v1\nkind: Pod\n- a\n" + "[" * 250 + "\n",  # a parser error, then brackets past the depth limit
        "kind: Pod\nspec: x\n  bad: y\n" + "[" * 250 + "\n",  # a scanner error, the same
    ],
    ids=["parser-error", "scanner-error"],
)
def test_invalid_yaml_with_deep_brackets_is_refused_with_its_line_not_an_internal_error(
    text: str, tmp_path: Path
) -> None:
    """The depth check reads the parser's events before the document is loaded; text that is not YAML
    before it gets deep raised there, outside convert's error handling (found by fuzzing, atheris). The
    snapshot reader, which checked inside its own, must say the same kind of thing."""
    src = tmp_path / "m.yaml"
    src.write_text(text)
    r = run("convert", str(src))
    assert r.code == 1 and "internal error" not in r.stderr and "not valid YAML" in r.stderr, r.stderr
    assert "line 3 of the document" in r.stderr, r.stderr
    s = run("inventory", "--snapshot", str(src))
    assert s.code == 1 and "internal error" not in s.stderr and f"{src}:3:" in s.stderr, s.stderr


def test_a_tagged_map_used_as_a_key_is_refused_not_an_internal_error(tmp_path: Path) -> None:
    """ruamel's round-trip loader raised TypeError ("unhashable type: 'CommentedMap'") on this, which
    convert turned into an internal error (found by fuzzing, atheris; reduced by hand)."""
    src = tmp_path / "m.yaml"
    src.write_text("? !h45x1e: m:\n     e: main {t  \n---   \nrs:\n   # t   rm\n")
    r = run("convert", str(src))
    assert r.code == 1 and "internal error" not in r.stderr, r.stderr
    assert f"{src}: document at line 1: a key that is itself a map or a list" in r.stderr, r.stderr


# ruamel's round-trip scanner asserts while gathering the comments of this text (found by fuzzing, atheris)
_RUAMEL_ASSERTS = "#     \n\n |-  #podSpecPatch:ec\n\n=:\n\n n: dS0ecPatch:ec\n\n=:\n\n"


def test_text_the_yaml_parser_stops_on_is_refused_by_convert_and_by_every_plan_reader(tmp_path: Path) -> None:
    """ruamel stops on some text with an exception of its own internals (AssertionError, TypeError)
    instead of a YAMLError; convert and the plan readers (`show`, and the review of an edited plan) each
    turned it into an internal error. Each now refuses it with one line naming the file."""
    src = tmp_path / "m.yaml"
    src.write_text(_RUAMEL_ASSERTS)
    plan = tmp_path / "plan.yaml"
    plan.write_text(_RUAMEL_ASSERTS + (ROOT / "tests" / "golden" / "plans" / "demo.yaml").read_text())
    for args in (["convert", str(src)], ["show", str(plan)], ["show", str(plan), "--allow-edited"]):
        r = run(*args)
        assert r.code == 1 and "internal error" not in r.stderr, (args, r.stderr)
        assert "the YAML parser stopped on it (AssertionError)" in r.stderr, (args, r.stderr)


def test_a_flow_document_whose_string_would_end_it_when_rewritten_is_refused_not_broken() -> None:
    """A document written as one flow map holding a quoted string over several lines, one of them `---`:
    ruamel.yaml writes its continuation lines at column 0, so the converted file's `---` line ended the
    document mid-string and the output was not YAML (found by tests/unit/test_convert_fuzz.py)."""
    text = (
        "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, args: ['a\n\n    ---\n\n"
        "    b'], resources: {limits: {nvidia.com/gpu: 1}}}]}}\n"
    )
    out, r = convert_text(text, "m.yaml", TemplateTable.builtin(), ConvertOptions())
    assert out == text and not r.changed
    assert len(r.problems) == 1 and r.problems[0].startswith("m.yaml:1: Pod/p: cannot be written back as YAML")
    assert r.summary == [] and r.claims == {}  # nothing of it converted: `--skip-unconvertible` lists nothing
