#!/usr/bin/env python3
"""Extract CEL selector cases from upstream test files at pinned versions and record Kubernetes' verdicts.

Writes tests/conformance/cases.json (suite, id, expression, device) and tests/conformance/answers.json (the
verdict of the real Go libraries, tools/cel-conformance/main.go, for each case). Only expressions and device
values are taken from the test files (data, not code); nothing upstream is copied into the checkout.

Sources, all from the Go module cache (`go mod download` fetches the module zips, which include _test.go):
  k8s.io/dynamic-resource-allocation@v0.37.2 cel/compile_test.go: the `testcases` table, expression and
      device, dumped by `go test` of a scratch copy of the module (under ~/.cache) plus dump/*_test.go;
  k8s.io/apiserver@v0.37.2 pkg/cel/library/{quantity,semver,format,ip,cidr}_test.go: `expr:` literals;
  github.com/google/cel-go@v0.29.2 ext/{strings,lists,bindings,sets,comprehensions}_test.go: `expr:` literals;
  cel.dev/expr@v0.25.1 tests/simple/testdata/*.textproto: tests without bindings, containers, type
      environments or disabled checks; a scalar expected `value` becomes `(expr) == value`.
An expression whose result is not bool is also kept as `dyn(E) == dyn(E)` (a selector that exercises its
evaluation). Run: python3 tools/cel-conformance/extract.py (needs Go; ~2 min cold for the DRA dump).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "tests" / "conformance"
CACHE = Path(os.environ.get("DRA_MIGRATE_CEL_CACHE", Path.home() / ".cache" / "dra-migrate" / "cel-conformance"))
DRA = "k8s.io/dynamic-resource-allocation@v0.37.2"
APISERVER = "k8s.io/apiserver@v0.37.2"
CELGO = "github.com/google/cel-go@v0.29.2"
CELSPEC = "cel.dev/expr@v0.25.1"
DEFAULT_DEVICE: dict[str, Any] = {"driver": "dra.example.com"}
GO_ENV = {**os.environ, "GOWORK": "off", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}


def module_dir(module: str) -> Path:
    out = subprocess.run(
        ["go", "mod", "download", "-json", module], check=True, capture_output=True, text=True, cwd=HERE, env=GO_ENV
    )
    return Path(json.loads(out.stdout)["Dir"])


# ---------------------------------------------------------------------------------------------------
# String literals (Go and protobuf text format use C-style escapes)

_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
    "`": "`",
}


def unescape(body: str) -> str:
    out: list[str] = []
    raw = bytearray()

    def flush() -> None:
        if raw:
            out.append(raw.decode("utf-8", "surrogateescape"))
            raw.clear()

    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            flush()
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _ESCAPES:
            flush()
            out.append(_ESCAPES[e])
            i += 2
        elif e == "x":
            raw.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif e in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            raw.append(int(body[i + 1 : j], 8))
            i = j
        elif e in "uU":
            n = 4 if e == "u" else 8
            flush()
            out.append(chr(int(body[i + 2 : i + 2 + n], 16)))
            i += 2 + n
        else:
            raise ValueError(f"unknown escape \\{e}")
    flush()
    return "".join(out)


_GO_LITERAL = r'(`[^`]*`|"(?:[^"\\\n]|\\.)*")'
_GO_EXPR = re.compile(r"\bexpr:\s*" + _GO_LITERAL + r"\s*[,}\n]")


def go_literal(lit: str) -> str:
    return lit[1:-1] if lit.startswith("`") else unescape(lit[1:-1])


def go_exprs(path: Path) -> list[str]:
    return [go_literal(m.group(1)) for m in _GO_EXPR.finditer(path.read_text())]


# ---------------------------------------------------------------------------------------------------
# cel-spec textproto


def _blocks(text: str, keyword: str) -> list[str]:
    """Bodies of every `keyword {` / `keyword: {` block, braces balanced outside strings."""
    out = []
    for m in re.finditer(rf"(?m)^\s*{keyword}\s*:?\s*\{{", text):
        depth, i, quote = 1, m.end(), ""
        while depth:
            c = text[i]
            if quote:
                if c == "\\":
                    i += 1
                elif c == quote:
                    quote = ""
            elif c in "\"'":
                quote = c
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            i += 1
        out.append(text[m.end() : i - 1])
    return out


_PB_STRING = r'"((?:[^"\\\n]|\\.)*)"'
_SKIP = re.compile(r"(?m)^\s*(bindings|type_env|container|disable_check|check_only|disable_macros)\b")
_SCALAR = re.compile(
    r"^\s*value\s*:?\s*\{\s*(int64_value|uint64_value|string_value|bool_value|double_value|null_value)\s*:\s*"
    r"(" + _PB_STRING + r"|[^\s}]+)\s*\}",
    re.M,
)


def _cel_string(s: str) -> str:
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x10000
                         else f"\\U{ord(c):08x}" for c in s) + '"'  # fmt: skip


def _expected_literal(kind: str, text: str) -> str | None:
    if kind == "string_value":
        return _cel_string(unescape(text[1:-1]))
    if kind == "int64_value":
        return text
    if kind == "uint64_value":
        return text + "u"
    if kind == "bool_value":
        return text
    if kind == "null_value":
        return "null"
    if kind == "double_value":
        if text in ("inf", "-inf", "nan", "infinity", "-infinity"):
            return None
        return text if re.search(r"[.eE]", text) else text + ".0"
    return None


def textproto_cases(path: Path) -> list[str]:
    out = []
    for body in _blocks(path.read_text(), "test"):
        m = re.search(r"(?m)^\s*expr\s*:\s*" + _PB_STRING, body)
        if not m or _SKIP.search(body):
            continue
        expr = unescape(m.group(1))
        scalar = _SCALAR.search(body)
        if scalar:
            lit = _expected_literal(scalar.group(1), scalar.group(2))
            if lit is None:
                continue
            out.append(expr if lit == "true" and scalar.group(1) == "bool_value" else f"({expr}) == {lit}")
        elif re.search(r"(?m)^\s*value\s*:?\s*\{", body):
            out.append(f"dyn({expr}) == dyn({expr})")
        else:
            out.append(expr)
    return out


# ---------------------------------------------------------------------------------------------------
# DRA compile_test.go


def dra_cases() -> list[tuple[str, dict[str, Any]]]:
    src = module_dir(DRA)
    scratch = CACHE / "src" / "dra"
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(src, scratch)
    for p in scratch.rglob("*"):
        p.chmod(p.stat().st_mode | 0o200)
    shutil.copy(HERE / "dump" / "zz_dump_cases_test.go", scratch / "cel")
    dump = CACHE / "dra-cases.json"
    env = {**GO_ENV, "DRA_MIGRATE_DUMP": str(dump)}
    subprocess.run(
        ["go", "test", "-count=1", "-run", "TestDumpConformanceCases", "./cel"], check=True, cwd=scratch, env=env
    )
    out = []
    for tc in sorted(json.loads(dump.read_text()), key=lambda t: t["name"]):
        device = {k: v for k, v in tc["device"].items() if v not in (None, "")}
        device.setdefault("driver", "")
        out.append((tc["expression"], device))
    return out


# ---------------------------------------------------------------------------------------------------


def case_id(suite: str, expression: str, device: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps([expression, device], sort_keys=True).encode()).hexdigest()[:10]
    return f"{suite}:{digest}"


def run_go(cases: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    binary = subprocess.run([str(HERE / "build")], check=True, capture_output=True, text=True).stdout.strip()
    out = subprocess.run([binary], input=json.dumps(cases), check=True, capture_output=True, text=True)
    return {a["id"]: a for a in json.loads(out.stdout)}


def collect() -> list[dict[str, Any]]:
    raw: list[tuple[str, str, dict[str, Any]]] = []
    for expr, device in dra_cases():
        raw.append(("dra-compile", expr, device))
    lib = module_dir(APISERVER) / "pkg" / "cel" / "library"
    for name in ("quantity", "semver", "format", "ip", "cidr"):
        raw += [(f"apiserver-{name}", e, DEFAULT_DEVICE) for e in go_exprs(lib / f"{name}_test.go")]
    ext = module_dir(CELGO) / "ext"
    for name in ("strings", "lists", "bindings", "sets", "comprehensions"):
        raw += [(f"celgo-{name}", e, DEFAULT_DEVICE) for e in go_exprs(ext / f"{name}_test.go")]
    spec = module_dir(CELSPEC) / "tests" / "simple" / "testdata"
    for path in sorted(spec.glob("*.textproto")):
        raw += [(f"celspec-{path.stem}", e, DEFAULT_DEVICE) for e in textproto_cases(path)]
    seen: set[str] = set()
    cases = []
    for suite, expr, device in raw:
        cid = case_id(suite, expr, device)
        if cid not in seen:
            seen.add(cid)
            cases.append({"id": cid, "suite": suite, "expression": expr, "device": device})
    return cases


def main() -> int:
    cases = collect()
    answers = run_go(cases)
    # Expressions rejected only for a non-bool result also run as a selector that evaluates them.
    extra = []
    for c in cases:
        if "must evaluate to bool" in answers[c["id"]].get("detail", ""):
            e = f"dyn({c['expression']}) == dyn({c['expression']})"
            cid = case_id(c["suite"], e, c["device"])
            if cid not in answers and all(x["id"] != cid for x in extra):
                extra.append({**c, "id": cid, "expression": e})
    answers.update(run_go(extra))
    cases += extra
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "cases.json").write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
    ordered = [{k: v for k, v in answers[c["id"]].items()} for c in cases]
    (OUT / "answers.json").write_text(json.dumps(ordered, indent=1, ensure_ascii=False) + "\n")
    by_suite: dict[str, int] = {}
    for c in cases:
        by_suite[c["suite"]] = by_suite.get(c["suite"], 0) + 1
    print(json.dumps(by_suite, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
