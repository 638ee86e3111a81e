"""`convert` over mutated real manifests: whatever it is given, it exits 0, 1 or 2, never with a traceback or an
"internal error", names the file in each `error:` line, and whatever it writes is YAML (its diff applying with
`patch --fuzz=0` to give the file --in-place writes).

Seeds are the repository's manifests (fixtures/manifests/) and real upstream ones (tests/unit/data/corpus/). Each
example applies one mutation: a field at a random path replaced by a value of another type (a list, a map, a
string, an int, null, a bool, a huge or negative int, an unparsable quantity), or a YAML-level one as operators'
repositories hold them (anchors and aliases, merge keys, empty documents, `---` inside a block scalar, tags,
flow style, CRLF, tabs, a BOM, comments, very long lines, bytes that are not UTF-8). Then it runs `convert` in
its main modes through the click runner.

CI runs a few examples, derandomized; `HYPOTHESIS_EXAMPLES=2000` (and `HYPOTHESIS_RANDOM=1` for fresh ones) runs
more to hunt.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
SEEDS = sorted(
    [*(ROOT / "fixtures" / "manifests").rglob("*.yaml"), *(ROOT / "tests" / "unit" / "data" / "corpus").rglob("*.yaml")]
)
SETTINGS = settings(
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    derandomize=not os.environ.get("HYPOTHESIS_RANDOM"),
    database=None,
    # hunting: report the first failure as found (shrinking re-runs convert six times per step)
    phases=[Phase.explicit, Phase.generate] if os.environ.get("HYPOTHESIS_RANDOM") else list(Phase),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
MODES: list[list[str]] = [[], ["--in-place"], ["--shared-claim"], ["--sharing", "time-slicing", "--shared-claim"]]
if os.environ.get("HYPOTHESIS_RANDOM"):  # hunting: the other options too
    MODES += [["--gang"], ["--share-across-pod", "--sharing", "mps"], ["--topology", "--fallback", "mig.nvidia.com"]]

OTHER_VALUES: list[Any] = [
    [],
    {},
    ["a", 1],
    {"a": {"b": 1}},
    "x",
    "",
    7,
    0,
    None,
    True,
    False,
    2**70,
    -(2**70),
    -1,
    1.5,
    "8x",
    "500m",
    "1e400",
    "nvidia.com/gpu",
    {"nvidia.com/gpu": 1},
    {"limits": {"nvidia.com/gpu": "8x"}},
    [{"name": 1, "resources": []}],
]


def _docs(text: str) -> list[Any]:
    try:
        return list(yaml.safe_load_all(text))
    except Exception:
        return []


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _dump(docs: list[Any], **kw: Any) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, width=10**6, **kw).replace("'<<':", "<<:")


@st.composite
def _structural(draw: st.DrawFn, text: str) -> str:
    """One field replaced by a value of another type, or by an alias of another node, or merged (`<<`) into."""
    docs = [d for d in _docs(text) if d is not None]
    if not docs:
        return text
    i = draw(st.integers(0, len(docs) - 1))
    paths = _paths(docs[i])
    # Most fields of interest sit under resources or a pod spec: bias towards them.
    hot = [p for p in paths if any(k in ("resources", "containers", "spec", "kind", "metadata") for k in p)]
    path = draw(st.sampled_from(hot or paths) if draw(st.booleans()) else st.sampled_from(paths))
    # maps holding a GPU request (a `limits`, a `resources`, a container): the sources aliases and merges share
    gpu = sorted(
        (
            p
            for p in paths
            if isinstance(_get(docs[i], p), dict) and "nvidia.com/" in json.dumps(_get(docs[i], p), default=str)
        ),
        key=len,
    )
    how = draw(st.sampled_from(["value", "value", "value", "alias", "alias", "merge", "merge", "delete"]))
    if how == "value":
        docs[i] = _set(docs[i], path, draw(st.sampled_from(OTHER_VALUES)))
    elif how == "alias" and path:
        other = draw(st.sampled_from(gpu[-3:] if gpu and draw(st.booleans()) else paths))
        if other[: len(path)] != path and path[: len(other)] != other:
            docs[i] = _set(docs[i], path, _get(docs[i], other))
    elif how == "merge":
        dicts = [p for p in paths if isinstance(_get(docs[i], p), dict)]
        if not dicts:  # a document that is a scalar or a list of scalars
            return text
        path = draw(st.sampled_from(dicts))
        target = _get(docs[i], path)
        # neither inside the target nor around it (a map merging its own ancestor is a cycle)
        maps = [
            p
            for p in (gpu[-3:] if gpu and draw(st.booleans()) else paths)
            if isinstance(_get(docs[i], p), dict) and p[: len(path)] != path and path[: len(p)] != p
        ]
        if isinstance(target, dict) and maps:
            target["<<"] = _get(docs[i], draw(st.sampled_from(maps)))
    elif how == "delete" and path:
        parent = _get(docs[i], path[:-1])
        del parent[path[-1]]
    style = draw(st.sampled_from([None, None, None, True]))  # True: flow style
    return _dump(docs, default_flow_style=style)


_SCALAR_LINE = re.compile(r"^(\s*(?:- )?[\w./-]+:)[ ]+([^\s|>&*!#\[{'\"].*)$")


@st.composite
def _textual(draw: st.DrawFn, text: str) -> str | bytes:
    lines = text.splitlines(keepends=True) or ["\n"]
    at = draw(st.integers(0, len(lines)))
    how = draw(
        st.sampled_from(
            [
                "crlf",
                "bom",
                "tab-indent",
                "tab-after-colon",
                "comments",
                "empty-docs",
                "block-dashes",
                "tag",
                "long-line",
                "latin1",
                "nul",
                "dup-key",
                "json",
                "no-final-newline",
                "doc-end",
            ]
        )
    )
    if how == "crlf":
        return text.replace("\n", "\r\n")
    if how == "bom":
        return "\ufeff" + text
    if how == "tab-indent":
        i = min(at, len(lines) - 1)
        lines[i] = re.sub(r"^ +", "\t", lines[i])
    elif how == "tab-after-colon":
        return re.sub(r"^(\s*[\w./-]+:) ", "\\1\t", text, flags=re.M)
    elif how == "comments":
        out = []
        for ln in lines:
            body = ln.rstrip("\r\n")
            out.append(f"# c\n{body} # {body[:20]}\n" if body.strip() else ln)
        return "".join(out)
    elif how == "empty-docs":
        lines.insert(at, draw(st.sampled_from(["---\n", "---\n---\n", "--- # x\n", "---\n...\n", "---\n\n---\n"])))
    elif how == "block-dashes":
        m = re.search(r"^( *)(- )?(args|command):\s*$", text, re.M)
        block = "|\n{ind}  a\n{ind}  ---\n{ind}  b\n"
        if m:
            ind = " " * (len(m.group(1)) + (2 if m.group(2) else 0))
            return (
                text[: m.start()]
                + f"{m.group(1)}{m.group(2) or ''}x-script: "
                + block.format(ind=ind)
                + text[m.start() :]
            )
        lines.append("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  f: |\n    a\n---\n    b\n")
    elif how == "tag":
        cands = [j for j, ln in enumerate(lines) if _SCALAR_LINE.match(ln.rstrip("\r\n"))]
        if cands:
            j = draw(st.sampled_from(cands))
            tag = draw(
                st.sampled_from(["!!str", "!!int", "!!float", "!!null", "!!bool", "!custom", "!!binary", "!!set"])
            )
            m = _SCALAR_LINE.match(lines[j].rstrip("\r\n"))
            assert m
            lines[j] = f"{m.group(1)} {tag} {m.group(2)}\n"
    elif how == "long-line":
        lines.insert(at, "# " + "x" * 200_000 + "\n")
        m = re.search(r"^(\s*)name: (\S+)$", text, re.M)
        if m and draw(st.booleans()):
            return text[: m.end()] + "y" * 100_000 + text[m.end() :]
    elif how == "latin1":
        return "".join(lines[:at]).encode() + b"# caf\xe9 \xff\n" + "".join(lines[at:]).encode()
    elif how == "nul":
        lines.insert(at, "# a\x00b\n")
    elif how == "dup-key":
        m = re.search(r"^(\s*)(kind|name|resources|containers|spec):.*$", text, re.M)
        if m:
            return text[: m.end()] + "\n" + m.group(0) + text[m.end() :]
    elif how == "json":
        docs = [d for d in _docs(text) if d is not None]
        if docs:
            return "\n".join(json.dumps(d, indent=draw(st.sampled_from([None, 2]))) for d in docs) + "\n"
    elif how == "no-final-newline":
        return text.rstrip("\n")
    elif how == "doc-end":
        lines.insert(at, "...\n")
    return "".join(lines)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Path, bytes]:
    seed = draw(st.sampled_from(SEEDS))
    text = seed.read_text(encoding="utf-8")
    out: str | bytes = draw(_structural(text) if draw(st.booleans()) else _textual(text))
    if os.environ.get("HYPOTHESIS_RANDOM") and isinstance(out, str) and draw(st.booleans()):
        out = draw(_textual(draw(_structural(out))))  # hunting: more mutations stacked
    return seed, out if isinstance(out, bytes) else out.encode("utf-8")


def _json_stream(text: str) -> bool:
    """JSON values one after another (convert writes a JSON manifest's new templates so; kubectl reads it)."""
    decoder, i = json.JSONDecoder(), 0
    try:
        while (i := len(text) - len(text[i:].lstrip())) < len(text):
            i = decoder.raw_decode(text, i)[1]
    except ValueError:
        return False
    return True


def _parses_as_yaml(data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    try:
        list(yaml.safe_load_all(text))
    except Exception:  # PyYAML's constructors raise KeyError, TypeError, ... on odd tags: not YAML to it
        return _json_stream(text)
    return True


def _check(args: list[str], path: Path, r: Any) -> None:
    out = r.stdout + r.stderr
    assert r.code in (0, 1, 2), (args, r.code, out[-3000:])
    assert "Traceback" not in out and "internal error" not in out, (args, out[-3000:])
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    if r.code == 1:
        assert errors, (args, r.stderr[-2000:])
    for ln in errors:
        assert str(path) in ln or "unconvertible request(s)" in ln, (args, ln)


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch(1)")
@SETTINGS
@given(case=mutated())
def test_convert_survives_any_mutated_manifest(
    case: tuple[Path, bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    seed, data = case
    d = tmp_path_factory.mktemp("fuzz")
    path = d / "m.yaml"
    input_was_yaml = _parses_as_yaml(data)
    written: bytes | None = None
    diff = b""
    for mode in MODES:
        path.write_bytes(data)
        r = run("convert", str(path), *mode)
        _check(mode, path, r)
        event(f"exit {r.code} {mode}")
        after = path.read_bytes()
        if "--in-place" in mode:
            if r.code != 0:
                assert after == data, "a failed --in-place wrote the file"
            written = after
            if input_was_yaml:
                assert _parses_as_yaml(after), (seed, after.decode(errors="replace")[:3000])
        else:
            assert after == data, f"convert {mode} changed the file"
            if not mode:
                diff = r.stdout_bytes if r.code == 0 else b""
    if diff and written is not None and written != data:
        target = d / "p.yaml"
        target.write_bytes(data)
        done = subprocess.run(["patch", "--posix", "--batch", "--fuzz=0", str(target)], input=diff, capture_output=True)
        assert done.returncode == 0, (seed, done.stdout + done.stderr, diff[:3000].decode(errors="replace"))
        assert target.read_bytes() == written, seed
    # stdin to stdout
    r = run("convert", "-", stdin=data)
    assert r.code in (0, 1, 2) and "Traceback" not in r.stdout + r.stderr and "internal error" not in r.stderr, (
        r.stderr[-2000:]
    )
    if r.code == 0 and input_was_yaml:
        assert _parses_as_yaml(r.stdout_bytes), (seed, r.stdout[:3000])
