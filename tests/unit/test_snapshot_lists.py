"""Snapshots as they reach the tool other than as one kubectl file: typed lists straight from the API
server, Lists on JSON Lines, JSON documents one after another, a pipe (`--snapshot -`).

`kubectl get --raw /api/v1/nodes`, curl and client libraries hand a typed list (`NodeList`, `PodList`)
whose items carry no apiVersion or kind; a line of `kubectl get ... -o json | jq -c .` is a whole List;
`(kubectl get nodes -o json; kubectl get pods -A -o json) > fleet.json` writes two documents in a row.
Each must read as the same fleet kubectl's one `-o json` List does."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cli.dryrun import objects_of
from dra_migrate.cluster.snapshot import list_items, load_snapshot
from dra_migrate.errors import InputError
from tests.unit.cli import run
from tests.unit.test_snapshot_io import objects, totals


def _raw_list(api_version: str, kind: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """A list as the API server returns it: typed, its items without apiVersion and kind."""
    bare = [{k: v for k, v in i.items() if k not in ("apiVersion", "kind")} for i in items]
    return {"apiVersion": api_version, "kind": f"{kind}List", "metadata": {"resourceVersion": "42"}, "items": bare}


def _by_kind() -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for o in objects():
        groups.setdefault((o["apiVersion"], o["kind"]), []).append(o)
    return groups


def _kubectl(tmp_path: Path) -> dict[str, Any]:
    f = tmp_path / "kubectl.json"
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects()}))
    return totals(f)


def _same_fleet(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in ("consumers", "pools", "nodes"):
        assert a[key] == b[key], key
    assert a["nodes"], "the fleet has its GPU node"


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_typed_lists_from_the_api_server_read_as_kubectl_lists_do(tmp_path: Path, suffix: str) -> None:
    d = tmp_path / "raw"
    d.mkdir()
    for (api_version, kind), items in _by_kind().items():
        # JSON is YAML: the same text serves both suffixes.
        (d / f"{kind}{suffix}").write_text(json.dumps(_raw_list(api_version, kind, items)))
    _same_fleet(totals(d), _kubectl(tmp_path))


def test_list_lines_in_json_lines_are_unwrapped(tmp_path: Path) -> None:
    f = tmp_path / "lists.jsonl"
    lines = [
        json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        if kind != "Node"
        else json.dumps(_raw_list(api_version, kind, items))
        for (api_version, kind), items in _by_kind().items()
    ]
    f.write_text("\n".join(lines) + "\n")
    _same_fleet(totals(f), _kubectl(tmp_path))


def test_an_item_that_states_its_kind_keeps_it() -> None:
    doc = {"apiVersion": "v1", "kind": "PodList", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {}}]}
    assert list_items(doc, "f")[0]["kind"] == "Node"  # type: ignore[index]
    half = {"apiVersion": "v1", "kind": "PodList", "items": [{"kind": "Pod", "metadata": {}}]}
    assert list_items(half, "f") == [{"kind": "Pod", "metadata": {}}]  # apimachinery fills neither then


def test_a_plain_list_gives_its_items_no_kind() -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [{"metadata": {"name": "x"}}]}
    assert list_items(doc, "f") == [{"metadata": {"name": "x"}}]


def test_an_item_that_is_not_an_object_is_refused_not_passed_over(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"f: item 1 of a List is a str, not an object"):
        list_items({"apiVersion": "v1", "kind": "List", "items": [{}, "node-1"]}, "f")


def test_manifests_sent_to_a_server_dry_run_take_the_typed_lists_kind() -> None:
    text = json.dumps(_raw_list("v1", "ConfigMap", [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]))
    sent = objects_of(text, "m.json")
    assert [(o["apiVersion"], o["kind"], o["metadata"]["name"]) for _, o in sent] == [
        ("v1", "ConfigMap", "a"),
        ("v1", "ConfigMap", "b"),
    ]


def _kubectl_outputs() -> bytes:
    """`(kubectl get nodes -o json; kubectl get pods,deployments -A -o json)`: indented documents in a row."""
    groups = list(_by_kind().values())
    return b"".join(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4).encode() + b"\n" for items in groups
    )


def test_json_documents_one_after_another_read_as_kubectl_reads_them(tmp_path: Path) -> None:
    f = tmp_path / "fleet.json"
    f.write_bytes(_kubectl_outputs())
    _same_fleet(totals(f), _kubectl(tmp_path))
    g = tmp_path / "fleet.yaml"  # named as YAML: the text is JSON, and read as JSON
    g.write_bytes(b"".join(json.dumps(o).encode() for o in objects()))  # no newline between them at all
    _same_fleet(totals(g), _kubectl(tmp_path))


def test_a_repeated_key_or_bad_text_in_a_later_document_is_refused_with_its_line(tmp_path: Path) -> None:
    f = tmp_path / "fleet.json"
    good = _kubectl_outputs()
    f.write_bytes(good + b'{"apiVersion": "v1", "kind": "Node", "kind": "Pod", "metadata": {"name": "n"}}\n')
    r = run("inventory", "--snapshot", str(f))
    line = good.count(b"\n") + 1
    assert (r.code, r.stderr.splitlines()[0]) == (
        1,
        f"error: {f}:{line}: the key 'kind' appears twice in one object (YAML refuses that too): "
        "fix the file or export it again",
    )
    f.write_bytes(good + b"{oops}\n")
    r = run("inventory", "--snapshot", str(f))
    assert r.code == 1 and r.stderr.startswith(f"error: {f}:{line}: invalid JSON ("), r.stderr


@pytest.mark.parametrize("shape", ["json lines", "kubectl json", "yaml", "raw typed lists"])
def test_a_snapshot_piped_to_dash_reads_as_the_same_file(tmp_path: Path, shape: str) -> None:
    if shape == "json lines":
        text = b"".join(json.dumps(o).encode() + b"\n" for o in objects())
    elif shape == "kubectl json":
        text = _kubectl_outputs()
    elif shape == "yaml":
        from ruamel.yaml import YAML

        out = io.StringIO()
        YAML(typ="safe").dump_all(objects(), out)
        text = out.getvalue().encode()
    else:
        text = b"".join(json.dumps(_raw_list(a, k, i)).encode() for (a, k), i in _by_kind().items())
    r = run("inventory", "--snapshot", "-", "-o", "json", stdin=text)
    assert r.code == 0, r.stderr
    piped = json.loads(r.stdout)
    _same_fleet(piped, _kubectl(tmp_path))
    assert piped["cluster"]["location"] == "<stdin>"


def test_json_lines_stream_through_a_real_pipe(tmp_path: Path) -> None:
    """The process reads its own stdin (a pipe, not click's test stand-in), a line at a time."""
    text = b"".join(json.dumps(o).encode() + b"\n" for o in objects())
    r = subprocess.run(
        [sys.executable, "-m", "dra_migrate", "inventory", "--snapshot", "-", "-o", "json"],
        input=text,
        capture_output=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    _same_fleet(json.loads(r.stdout), _kubectl(tmp_path))


def test_dash_on_a_terminal_says_to_pipe_a_snapshot_in(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.BytesIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(Terminal()))
    with pytest.raises(InputError, match="standard input, which is a terminal"):
        load_snapshot("-")
