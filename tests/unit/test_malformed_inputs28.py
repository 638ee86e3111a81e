"""Malformed inputs are one line naming the file and the line or key (issue 28, item 3): kubeconfigs with
bad base64 or broken YAML, a snapshot with an integer key in a container's limits, JSON with a key given
twice (read silently before, while YAML refused it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_migrate.cluster.jsondup import duplicate_key
from tests.unit.cli import run

NODE = (
    '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","uid":"n1"},"status":{"capacity":{"nvidia.com/gpu":"8"}}}'
)


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "internal error" not in lines[0], stderr
    assert "Traceback" not in stderr
    return lines[0]


KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "https://127.0.0.1:9", certificate-authority-data: "{ca}"}}
users:
- name: u
  user: {{token: x, client-key-data: "{key}"}}
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
"""


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (KUBECONFIG.format(ca="not base64!!", key="eA=="), "clusters[0].cluster.certificate-authority-data"),
        (KUBECONFIG.format(ca="eA==", key="eA="), "users[0].user.client-key-data"),
        ("apiVersion: v1\nkind: Config\nclusters: [\n  - name: c\n", ":4:"),
        ("- just\n- a list\n", "not a kubeconfig"),
    ],
)
def test_a_malformed_kubeconfig_is_one_line_naming_file_and_key(tmp_path: Path, text: str, names: str) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(text)
    line = one_error_line(run("inventory", "--kubeconfig", str(kc)).stderr)
    assert str(kc) in line and names in line


def test_base64_split_over_lines_is_accepted_as_kubectl_accepts_it() -> None:
    from dra_migrate.cluster.kubeconfig import _check_sections

    _check_sections({"clusters": [{"cluster": {"certificate-authority-data": "eA\n=="}}]}, Path("k"))


def test_an_integer_key_in_container_limits_is_refused_naming_the_key(tmp_path: Path) -> None:
    snap = tmp_path / "s.yaml"
    snap.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: n1, uid: n1}, status: {capacity: {nvidia.com/gpu: '8'}}}\n"
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: d, uid: u1}\n"
        "  spec: {nodeName: n1, containers: [{name: c, resources: {limits: {1: 2, nvidia.com/gpu: 1}}}]}\n"
    )
    for command in ("inventory", "check", "plan"):
        line = one_error_line(run(command, "--snapshot", str(snap)).stderr)
        assert str(snap) in line and "resources.limits" in line and "key 1" in line


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_json_with_a_key_given_twice_is_refused_as_yaml_is(tmp_path: Path, suffix: str) -> None:
    pod = (
        '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"d","uid":"u"},'
        '"spec":{"nodeName":"n1","nodeName":"n2","containers":[{"name":"c"}]}}'
    )
    snap = tmp_path / f"s{suffix}"
    if suffix == ".json":
        snap.write_text('{"apiVersion":"v1","kind":"List","items":[' + NODE + "," + pod + "]}")
    else:
        snap.write_text(NODE + "\n" + pod + "\n")
    line = one_error_line(run("inventory", "--snapshot", str(snap)).stderr)
    assert str(snap) in line and "'nodeName' appears twice" in line
    yaml = tmp_path / "s.yaml"
    yaml.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1, name: n2}\n")
    assert run("inventory", "--snapshot", str(yaml)).code == 1


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (b'{"a": 1, "b": {"c": 1, "c": 2}}', "c"),
        (b'{"a" : 1, "a" : 2}', "a"),  # spacing the fast path does not count
        (b'{"\\u0061": 1, "a": 2}', "a"),  # an escape that spells the same key
        (b'{"a": "x\\":", "b": 1}', None),  # a `":` inside a string is not a key
        (b'{"a": [{"k": 1}, {"k": 2}]}', None),  # the same key in two objects is fine
        (b'{"a":1,"b":{"c":[1,"x"]}}\n', None),  # as orjson writes it (a .jsonl line): the text is the document
        (b'{"a":1,"b":{"c":1,"c":2}}\n', "c"),  # compact too, but a key was dropped: not its own serialisation
        (b'{"a":1,"a":1}', "a"),  # the same value twice: still two keys
    ],
)
def test_duplicate_key_detection(text: bytes, key: str | None) -> None:
    import orjson

    assert duplicate_key(text, orjson.loads(text)) == key
