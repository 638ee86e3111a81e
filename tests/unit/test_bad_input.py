"""Bad input: one line on stderr that says what to do, exit code 1, a traceback only with --debug."""

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
