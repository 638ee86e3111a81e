"""Bad input: one line on stderr that says what to do, exit code 1, a traceback only with --debug."""

import json
from pathlib import Path

import pytest

from tests.unit.cli import run

NODE = """apiVersion: v1
kind: Node
metadata: {name: gpu-1, labels: {nvidia.com/gpu.present: "true"}}
status: {capacity: {nvidia.com/gpu: "8"}, allocatable: {nvidia.com/gpu: "8"}}
"""


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in stderr
    return lines[0]


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(NODE + "---\nkind: Pod\nmetadata: {name: x\nspec: []\n")
    r = run("inventory", "--snapshot", str(f))
    assert r.code == 1
    line = one_error_line(r.stderr)
    assert (f"{f}:" in line and ":8:" in line) or ":9:" in line
    assert r.stdout == ""


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text('{"apiVersion": "v1", "kind": "List",\n "items": [\n  {"kind": "Node",}\n]}')
    r = run("inventory", "--snapshot", str(f))
    assert r.code == 1
    assert f"{f}:3:" in one_error_line(r.stderr)


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]")
    f = tmp_path / "bomb.yaml"
    f.write_text(
        NODE
        + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata:\n"
        + "\n".join("  " + ln for ln in lines)
        + "\n"
    )
    r = run("inventory", "--snapshot", str(f))
    assert r.code == 1
    assert "alias" in one_error_line(r.stderr)


def test_an_alias_written_once_and_repeated_with_many_values_is_refused(tmp_path: Path) -> None:
    """Not only nested aliases: one list of 1,000 values aliased 200 times is 200,000 values to walk."""
    values = "[" + ",".join(["x"] * 1000) + "]"
    f = tmp_path / "wide.yaml"
    f.write_text(
        NODE
        + f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b}}\ndata:\n  a: &a {values}\n"
        + "".join(f"  b{i}: *a\n" for i in range(200))
    )
    r = run("inventory", "--snapshot", str(f))
    assert r.code == 1
    assert "alias" in one_error_line(r.stderr)


def test_an_export_of_more_values_than_the_alias_limit_without_an_alias_is_read(tmp_path: Path) -> None:
    """A cluster's export (`kubectl get nodes,pods -A -o yaml`) holds a value per label, annotation and field:
    a few hundred nodes hold more than the alias limit's 100,000. Counted as expansion, they refused every
    such export as an alias bomb; a document without aliases expands to exactly what it holds."""
    pods = "".join(
        f"- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p{i}\n    namespace: ml\n    labels:\n"
        + "".join(f"      k{j}: v{j}\n" for j in range(120))
        + "  spec:\n    nodeName: gpu-1\n    containers:\n    - name: c\n      resources:\n"
        '        limits: {nvidia.com/gpu: "1"}\n  status: {phase: Running}\n'
        for i in range(900)
    )
    node = "".join("  " + ln + "\n" if n else "- " + ln + "\n" for n, ln in enumerate(NODE.splitlines()))
    f = tmp_path / "export.yaml"
    f.write_text("apiVersion: v1\nkind: List\nitems:\n" + node + pods)
    r = run("inventory", "--snapshot", str(f), "-o", "json")
    assert r.code == 0, r.stderr
    inventory = json.loads(r.stdout)
    assert len(inventory["consumers"]) == 900
    assert inventory["nodes"][0]["requested"] == {"nvidia.com/gpu": 900}


def test_snapshot_without_nodes(tmp_path: Path) -> None:
    f = tmp_path / "empty.yaml"
    f.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    r = run("inventory", "--snapshot", str(f))
    assert r.code == 1
    assert "no Node objects" in one_error_line(r.stderr)


def test_missing_snapshot(tmp_path: Path) -> None:
    r = run("inventory", "--snapshot", str(tmp_path / "nope.yaml"))
    assert r.code == 1
    assert "does not exist" in one_error_line(r.stderr)


def test_unknown_kinds_are_counted_and_skipped(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        NODE + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n"
        "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g}\n"
    )
    r = run("inventory", "--snapshot", str(f), "-o", "json")
    assert r.code == 0, r.stderr
    import json

    assert json.loads(r.stdout)["cluster"]["skipped"] == {"Service": 1, "example.com/Gizmo": 1}


def test_objects_with_missing_fields_do_not_crash(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        NODE + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\n"
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: null}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec: {containers: [null, {resources: {limits: 3}}]}\n"
        "---\nkind: Pod\n"
    )
    r = run("inventory", "--snapshot", str(f), "-o", "json")
    assert r.code == 0, r.stderr


def test_debug_shows_traceback(tmp_path: Path) -> None:
    r = run("--debug", "inventory", "--snapshot", str(tmp_path / "nope.yaml"))
    assert r.code == 1
    assert "Traceback" in r.stderr


def test_unreachable_cluster_fails_fast(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    # Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
    kc.write_text("""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
""")
    r = run("inventory", "--kubeconfig", str(kc))
    assert r.code == 1
    line = one_error_line(r.stderr)
    assert "cannot reach the API server" in line and "127.0.0.1:9" in line


@pytest.mark.parametrize("args", [["--snapshot", "x", "--context", "c"]])
def test_conflicting_sources(args: list[str]) -> None:
    r = run("inventory", *args)
    assert r.code == 1
    assert "choose one source" in one_error_line(r.stderr)


def _kubeconfig(path: Path, contexts: dict[str, int], current: str) -> Path:
    clusters = ", ".join(
        f'{{name: {n}, cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}}}'
        for n, port in contexts.items()
    )
    ctxs = ", ".join(f"{{name: {n}, context: {{cluster: {n}, user: u}}}}" for n in contexts)
    path.write_text(
        f"apiVersion: v1\nkind: Config\nclusters: [{clusters}]\nusers: [{{name: u, user: {{token: t}}}}]\n"
        f"contexts: [{ctxs}]\ncurrent-context: {current}\n"
    )
    return path


def test_kubeconfig_from_the_environment_and_context_choice(tmp_path: Path) -> None:
    # Resolved as kubectl does: $KUBECONFIG (a list, merged), and --context picks among the contexts.
    # Ports 9 and 13 on loopback: nothing listens, so the error names the server that was chosen.
    a = _kubeconfig(tmp_path / "a", {"east": 9}, "east")
    b = _kubeconfig(tmp_path / "b", {"west": 13}, "west")
    env = {"KUBECONFIG": f"{a}:{b}"}
    r = run("inventory", env=env)
    assert r.code == 1 and "127.0.0.1:9" in one_error_line(r.stderr)
    r = run("inventory", "--context", "west", env=env)
    assert r.code == 1 and "127.0.0.1:13" in one_error_line(r.stderr)


def test_no_kubeconfig_anywhere(tmp_path: Path) -> None:
    r = run("inventory", env={"KUBECONFIG": str(tmp_path / "missing"), "KUBERNETES_SERVICE_HOST": ""})
    assert r.code == 1
    assert "--snapshot" in one_error_line(r.stderr)


# Each snapshot below holds one malformed value the tool reads; each must be refused with one line that
# names the file and the object, never read as a default that changes the numbers.
DEP = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ml, uid: d1}
spec:
  replicas: REPLICAS
  template:
    spec:
      containers: CONTAINERS
"""
GPU_CONTAINERS = '[{name: main, resources: {limits: {nvidia.com/gpu: "1"}}}]'


def _dep(replicas: str = "2", containers: str = GPU_CONTAINERS) -> str:
    return DEP.replace("REPLICAS", replicas).replace("CONTAINERS", containers)


MALFORMED = {
    "negative node count": (
        NODE.replace('nvidia.com/gpu: "8"}, allocatable', 'nvidia.com/gpu: "-2"}, allocatable'),
        "Node gpu-1",
        "negative",
    ),
    "non-numeric node count": (NODE.replace('"8"}}', '"eight"}}'), "Node gpu-1", "not a quantity"),
    "fractional node count": (NODE.replace('"8"}}', '"1.5"}}'), "Node gpu-1", "whole"),
    "node without a name": (NODE.replace("name: gpu-1, ", ""), "Node (no name)", "metadata.name"),
    "node with a numeric name": (NODE.replace("name: gpu-1", "name: 7"), "Node", "metadata.name"),
    "replicas as a string": (NODE + "---\n" + _dep('"2"'), "Deployment ml/llm", "spec.replicas"),
    "replicas negative": (NODE + "---\n" + _dep("-1"), "Deployment ml/llm", "spec.replicas"),
    "replicas as a boolean": (NODE + "---\n" + _dep("true"), "Deployment ml/llm", "spec.replicas"),
    "containers as a map": (
        NODE + "---\n" + _dep(containers='{main: {resources: {limits: {nvidia.com/gpu: "1"}}}}'),
        "Deployment ml/llm",
        "containers must be a list",
    ),
    "negative container count": (
        NODE + "---\n" + _dep(containers='[{name: main, resources: {limits: {nvidia.com/gpu: "-2"}}}]'),
        "Deployment ml/llm",
        "negative",
    ),
    "non-numeric container count": (
        NODE + "---\n" + _dep(containers="[{name: main, resources: {limits: {nvidia.com/gpu: many}}}]"),
        "Deployment ml/llm",
        "not a quantity",
    ),
    "limits as a list": (
        NODE + "---\n" + _dep(containers="[{name: main, resources: {limits: [nvidia.com/gpu]}}]"),
        "Deployment ml/llm",
        "limits must be a map",
    ),
    "pod with GPUs, containers as a map": (
        NODE + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n"
        'spec: {containers: {main: {resources: {limits: {nvidia.com/gpu: "1"}}}}}\n',
        "Pod ml/p",
        "containers must be a list",
    ),
    "pytorchjob replicas as a string": (
        NODE + "---\napiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: t, namespace: ml}\n"
        'spec: {pytorchReplicaSpecs: {Worker: {replicas: "4", template: {spec: {containers: '
        + GPU_CONTAINERS
        + "}}}}}\n",
        "PyTorchJob ml/t",
        "spec.pytorchReplicaSpecs.Worker.replicas",
    ),
    "labels not strings": (NODE.replace('"true"}}', "{a: b}}}"), "Node gpu-1", "metadata.labels"),
    # Digits Python's str.isdigit takes and int() or a Kubernetes quantity does not: a superscript two
    # crashed the count's quick path (int("\u00b2")), an Arabic-Indic one was read as 1.
    "superscript node count": (NODE.replace('"8"}}', '"\u00b2"}}'), "Node gpu-1", "not a quantity"),
    "arabic-indic container count": (
        NODE + "---\n" + _dep(containers='[{name: main, resources: {limits: {nvidia.com/gpu: "\u0661"}}}]'),
        "Deployment ml/llm",
        "not a quantity",
    ),
    "superscript pod count": (
        NODE + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n"
        'spec: {containers: [{name: main, resources: {limits: {nvidia.com/gpu: "\u00b2"}}}]}\n',
        "Pod ml/p",
        "not a quantity",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_values_are_refused_naming_file_and_object(tmp_path: Path, case: str) -> None:
    text, obj, problem = MALFORMED[case]
    f = tmp_path / "s.yaml"
    f.write_text(text)
    r = run("inventory", "--snapshot", str(f))
    assert r.code == 1, (case, r.stdout)
    line = one_error_line(r.stderr)
    assert str(f) in line and obj in line and problem in line, line
    assert r.stdout == ""


def test_the_same_node_in_two_files_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "dir"
    d.mkdir()
    (d / "a.yaml").write_text(NODE)
    (d / "b.yaml").write_text(NODE.replace("name: gpu-1,", "name: gpu-1, uid: other,"))
    r = run("inventory", "--snapshot", str(d))
    assert r.code == 1
    line = one_error_line(r.stderr)
    assert "Node gpu-1" in line and "a.yaml" in line and "b.yaml" in line


def test_one_object_exported_twice_is_read_once_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "dir"
    d.mkdir()
    same = NODE.replace("name: gpu-1,", "name: gpu-1, uid: u1, resourceVersion: '7',")
    (d / "a.yaml").write_text(same)
    (d / "b.yaml").write_text(same)
    r = run("inventory", "--snapshot", str(d), "-o", "json")
    assert r.code == 0, r.stderr
    import json

    inv = json.loads(r.stdout)
    assert [n["name"] for n in inv["nodes"]] == ["gpu-1"]
    assert sum(p["allocatable"].get("nvidia.com/gpu", 0) for p in inv["pools"]) == 8
    assert "read once" in caplog.text and "a.yaml" in caplog.text


def _header(server: str) -> str:
    return (
        '{"apiVersion": "dra-migrate.io/v1alpha1", "kind": "ClusterSnapshot", '
        f'"metadata": {{"server": "{server}", "kubernetesVersion": "v1.37.2"}}}}\n'
    )


def test_two_clusters_in_one_directory_are_refused(tmp_path: Path) -> None:
    d = tmp_path / "dir"
    d.mkdir()
    node = '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "NAME", "uid": "NAME"}}\n'
    (d / "east.jsonl").write_text(_header("https://east:6443") + node.replace("NAME", "e1"))
    (d / "west.jsonl").write_text(_header("https://west:6443") + node.replace("NAME", "w1"))
    r = run("inventory", "--snapshot", str(d))
    assert r.code == 1
    line = one_error_line(r.stderr)
    assert "west" in line and "east" in line


@pytest.mark.parametrize("compact", [False, True], ids=["spaced", "orjson-compact"])
@pytest.mark.parametrize("escaped", ["nvidia.com\\/gpu", "\\u006evidia.com/gpu", "nvidia\\u002ecom/gpu"])
def test_jsonl_escaped_keys_are_read_as_a_json_parser_reads_them(tmp_path: Path, escaped: str, compact: bool) -> None:
    """`compact`: the line is byte for byte what orjson writes but for the escape, the case the reader's
    shortcut for orjson's own text (`jsondup.as_written`) must not take for its own."""
    import json

    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-1"},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"}},
    }
    pod_line = (
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, '
        '"spec": {"nodeName": "gpu-1", "containers": [{"name": "c", "resources": {"limits": {"'
        + escaped
        + '": "2"}}}]}, "status": {"phase": "Running"}}\n'
    )
    if compact:
        pod_line = pod_line.replace('": ', '":').replace(", ", ",")
    assert json.loads(pod_line)["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    f = tmp_path / "s.jsonl"
    f.write_text(json.dumps(node) + "\n" + pod_line)
    r = run("inventory", "--snapshot", str(f), "-o", "json")
    assert r.code == 0, r.stderr
    assert [c["totals"] for c in json.loads(r.stdout)["consumers"]] == [{"nvidia.com/gpu": 2}]


@pytest.mark.parametrize(
    "suffix,text",
    [
        (".yaml", "a:\n" + "".join(" " * (i + 1) + "- \n" for i in range(0)) + "[" * 60_000 + "]" * 60_000),
        (".yaml", "".join("  " * i + "k:\n" for i in range(3000)) + "  " * 3000 + "v\n"),
        (".yaml", "- " * 60_000 + "x\n"),
        (".json", "[" * 60_000 + "]" * 60_000),
        (".json", '{"a":' * 500 + "1" + "}" * 500),
        (".jsonl", '{"a":' * 60_000 + "1" + "}" * 60_000 + "\n"),
        (
            ".jsonl",
            '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "x": ' + "[" * 900 + "]" * 900 + "}\n",
        ),
        (".yml", "{" * 60_000),
    ],
)
def test_very_deep_nesting_is_one_line(tmp_path: Path, suffix: str, text: str) -> None:
    f = tmp_path / f"deep{suffix}"
    f.write_text(text)
    r = run("inventory", "--snapshot", str(f))
    assert r.code == 1
    line = one_error_line(r.stderr)
    assert str(f) in line and ("deeper" in line or "invalid" in line or "expected" in line), line


@pytest.mark.parametrize(
    "text",
    [
        "GET /api failed: Authorization: Bearer abc.def-ghi_jkl",
        '{"headers": {"Authorization": "Basic dXNlcjpzM2NyZXQ="}}',
        "authorization=Negotiate YIIabc123secret",
        "bearer s3cret, then more",
        "Basic dXNlcjpzM2NyZXQ-_x",
        "https://admin:s3cret@10.0.0.1:6443/api",
        "kubectl --token=s3cret get pods",
        "--password s3cret",
        "api_key: s3cret",
        "token: eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl",
    ],
)
def test_credentials_are_scrubbed_from_messages(text: str) -> None:
    from dra_migrate.secrets import scrub

    out = scrub(text)
    assert out is not None and "<redacted>" in out
    for secret in ("abc.def", "dXNlcjpzM2NyZXQ", "YIIabc123secret", "s3cret", "c2lnbmF0dXJl"):
        assert secret not in out, out


def test_log_lines_are_scrubbed() -> None:
    import io
    import logging

    from dra_migrate.secrets import scrub_logs

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    scrub_logs(handler)
    log = logging.getLogger("dra_migrate.test-scrub")
    log.addHandler(handler)
    try:
        log.warning("request failed: %s", "Authorization: Bearer s3cret-token")
    finally:
        log.removeHandler(handler)
    assert "s3cret" not in buf.getvalue() and "<redacted>" in buf.getvalue()


def test_error_lines_are_scrubbed(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(NODE.replace('"8"}}', '"Bearer s3cret"}}'))
    r = run("inventory", "--snapshot", str(f))
    assert r.code == 1 and "s3cret" not in r.stderr and "<redacted>" in r.stderr


def test_orjson_writes_every_character_but_json_s_required_escapes_as_itself() -> None:
    """What lets the snapshot reader skip its scan for `\\u` escapes on a line orjson wrote: a resource name
    stands in such a line as itself. Every BMP character but `"`, `\\` and the C0 controls is written as its
    UTF-8 (a lone surrogate cannot be encoded at all)."""
    import orjson

    from dra_migrate.cluster.jsondup import as_written

    required = {'"': b'"\\""', "\\": b'"\\\\"'}
    for code in [*range(0x20, 0xD800), *range(0xE000, 0x10000)]:
        c = chr(code)
        assert orjson.dumps(c) == required.get(c, b'"' + c.encode() + b'"'), repr(c)
    line = orjson.dumps({"kind": "Pod", "x\x01": "nvidia.com/gpu"})
    assert b"\\u0001" in line and b"nvidia.com/gpu" in line and as_written(line + b"\n", orjson.loads(line))
