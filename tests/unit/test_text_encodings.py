"""A file a person saved reads as the same file whatever its byte order mark (`fileio.text_of`): a snapshot
in UTF-8 with a mark (PowerShell's `Out-File -Encoding utf8`), UTF-16 (Windows PowerShell 5.1's `kubectl ...
> file`) or UTF-32, as whole JSON and YAML files, and UTF-8 with a mark as JSON Lines; a plan a reviewer
saved, an ignore file and a template table the same. A JSON Lines file in UTF-16 or 32, and text that is
not what its mark says, are refused with one line that says how to write it."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from tests.unit.cli import run

OBJECTS = [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"}},
     "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-é", "namespace": "ml", "uid": "u1"},
     "spec": {"nodeName": "gpu-1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
     "status": {"phase": "Running"}},
]  # fmt: skip
LIST = json.dumps({"apiVersion": "v1", "kind": "List", "items": OBJECTS}, indent=2, ensure_ascii=False)
YAML = "apiVersion: v1\nkind: List\nitems:\n" + "".join(
    "- " + json.dumps(o, ensure_ascii=False) + "\n" for o in OBJECTS
)  # flow-style items: YAML
LINES = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in OBJECTS)


def inventory(path: Path) -> dict[str, object]:
    """The inventory, but for where it was read from (the cluster is named after the file)."""
    r = run("inventory", "--snapshot", str(path), "--kubernetes-version", "v1.34.2", "-o", "json")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in ("name", "location"):
        doc["cluster"].pop(key)
    return doc  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "text", "encoded"),
    [
        ("utf8-bom.json", LIST, lambda t: codecs.BOM_UTF8 + t.encode()),
        ("utf16.json", LIST, lambda t: t.encode("utf-16")),
        ("utf16-be.json", LIST, lambda t: codecs.BOM_UTF16_BE + t.encode("utf-16-be")),
        ("utf32.json", LIST, lambda t: t.encode("utf-32")),
        ("utf8-bom.yaml", YAML, lambda t: codecs.BOM_UTF8 + t.encode()),
        ("utf16.yaml", YAML, lambda t: t.encode("utf-16")),
        ("utf8-bom.jsonl", LINES, lambda t: codecs.BOM_UTF8 + t.encode()),
    ],
)
def test_a_snapshot_with_a_byte_order_mark_reads_as_the_same_snapshot(
    tmp_path: Path, name: str, text: str, encoded: object
) -> None:
    plain = tmp_path / f"plain{Path(name).suffix}"
    plain.write_text(text, encoding="utf-8")
    marked = tmp_path / name
    marked.write_bytes(encoded(text))  # type: ignore[operator]
    read = inventory(marked)
    assert read == inventory(plain)
    assert read["consumers"], "the pod was read"  # type: ignore[index]


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("utf16.jsonl", LINES.encode("utf-16"), "UTF-16 or UTF-32 text"),
        ("broken.json", codecs.BOM_UTF16_LE + b"\x00\xd8a\x00", "not UTF-16-LE text after its byte order mark"),
    ],
)
def test_what_cannot_be_read_as_its_mark_says_is_refused_with_how_to_write_it(
    tmp_path: Path, name: str, data: bytes, says: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    r = run("inventory", "--snapshot", str(path))
    assert r.code == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Out-File -Encoding utf8" in lines[0], r.stderr


# Every file a person may save (`fileio.text_of`): a plan a reviewer edits, an ignore file, a template table.
TEMPLATES = """- kind: example.com/TrainingRun
  apiVersion: example.com/v1
  plural: trainingruns
  roles:
  - {each: "spec.workers[]", template: template, form: podTemplate, replicas: [{path: replicas, default: 1}]}
"""
IGNORE = "- rule: operator-no-in-place-migration\n  reason: migrated pool by pool beside the ClusterPolicy\n"
SAVED = {
    "utf-8 with a mark": lambda t: codecs.BOM_UTF8 + t.encode(),
    "utf-16": lambda t: t.encode("utf-16"),
    "utf-32": lambda t: t.encode("utf-32"),
}


@pytest.mark.parametrize("saved", SAVED)
def test_a_plan_an_ignore_file_and_a_template_table_read_the_same_however_saved(tmp_path: Path, saved: str) -> None:
    root = Path(__file__).resolve().parents[2]
    plan_text = (root / "plans" / "demo-example.yaml").read_text()
    demo = str(root / "fixtures" / "clusters" / "demo.yaml")
    outputs = []
    for name, encode in (("plain", lambda t: t.encode()), (saved, SAVED[saved])):
        d = tmp_path / name.replace(" ", "-")
        d.mkdir()
        (d / "plan.yaml").write_bytes(encode(plan_text))
        (d / "ignore.yaml").write_bytes(encode(IGNORE))
        (d / "templates.yaml").write_bytes(encode(TEMPLATES))
        shown = run("show", str(d / "plan.yaml"), "-o", "json")
        checked = run("check", "--snapshot", demo, "--ignore-file", str(d / "ignore.yaml"), "-o", "json")
        templated = run("inventory", "--snapshot", demo, "--templates", str(d / "templates.yaml"), "-o", "json")
        assert shown.code == 0 and templated.code == 0, (shown.stderr, templated.stderr)
        assert "operator-no-in-place-migration" in json.loads(checked.stdout)["accepted"][0]["id"], checked.stderr
        outputs.append((shown.stdout, checked.stdout, templated.stdout))
    assert outputs[0] == outputs[1]
