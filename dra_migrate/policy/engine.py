"""Policy on the plan: a real policy engine (OPA, github.com/open-policy-agent/opa) evaluates Rego policies
against the plan as `dra-migrate show PLAN -o json` prints it (docs/policy.md).

The contract a policy directory keeps: Rego in `package dramigrate`, whose `deny` rule is a set of messages
(each a string, or an object with a `msg`); optional `warn` likewise. Data files (JSON/YAML) in the same
directory are loaded too, so thresholds and the list of production pools live beside the rules.

The engine is the `opa` binary: $DRA_MIGRATE_OPA, else the pinned build in ~/.cache/dra-migrate/opa
(`tools/opa/build`), else `opa` on PATH. Nothing here prints; the CLI renders the result.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_migrate.errors import InputError, MigrateError

OPA_VERSION = "1.22.4"  # pinned: tools/opa/build builds it; the examples are tested against it
PACKAGE = "dramigrate"
EXAMPLES = Path(__file__).parent / "examples"


def find_opa() -> Path:
    """The OPA binary, or an InputError that says how to get one."""
    env = os.environ.get("DRA_MIGRATE_OPA")
    if env:
        if not os.access(env, os.X_OK):
            raise InputError(f"DRA_MIGRATE_OPA={env} is not an executable", "point it at an opa binary")
        return Path(env)
    cache = Path(os.environ.get("DRA_MIGRATE_OPA_CACHE") or Path.home() / ".cache" / "dra-migrate" / "opa")
    pinned = cache / f"v{OPA_VERSION}" / "opa"
    if os.access(pinned, os.X_OK):
        return pinned
    found = shutil.which("opa")
    if found:
        return Path(found)
    raise InputError(
        "no OPA policy engine found",
        "build the pinned one with tools/opa/build (from the Go module proxy), install opa, or set DRA_MIGRATE_OPA",
    )


@dataclass(frozen=True)
class Verdict:
    deny: list[str]
    warn: list[str]
    engine: str  # "opa <version>" as the binary reports it

    @property
    def passed(self) -> bool:
        return not self.deny

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "deny": self.deny, "warn": self.warn, "engine": self.engine}


def _messages(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [] if value is None else [value]
    out = []
    for item in items:
        if isinstance(item, Mapping) and "msg" in item:
            out.append(str(item["msg"]))
        else:
            out.append(item if isinstance(item, str) else json.dumps(item, sort_keys=True))
    return sorted(out)


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as e:
        raise MigrateError(f"the policy engine took longer than {timeout_s:.0f}s", "check the policies") from e


def engine_version(opa: Path) -> str:
    out = _run([str(opa), "version"], 30)
    first = out.stdout.splitlines()[0] if out.stdout else ""
    return f"opa {first.partition(':')[2].strip() or 'unknown'}"


def evaluate(document: Mapping[str, Any], policy_dir: Path, *, opa: Path | None = None) -> Verdict:
    """Evaluate `data.dramigrate.deny` and `warn` over `document` (the plan's JSON view)."""
    if not policy_dir.is_dir():
        raise InputError(f"policy directory {policy_dir} does not exist", "pass --policy DIR with .rego files")
    if not any(policy_dir.rglob("*.rego")):
        raise InputError(f"{policy_dir} holds no .rego file", f"write policies in package {PACKAGE}")
    binary = opa or find_opa()
    with tempfile.TemporaryDirectory(prefix="dra-migrate-policy-") as tmp:
        input_path = Path(tmp) / "input.json"
        input_path.write_text(json.dumps(document))
        query = f"x := data.{PACKAGE}"  # the package's rules; `deny` and `warn` are read from it
        out = _run(
            [str(binary), "eval", "--format", "json", "--data", str(policy_dir), "--input", str(input_path), query],
            120,
        )
    if out.returncode != 0:
        err = (out.stderr or out.stdout).strip().splitlines()
        raise InputError(f"the policies in {policy_dir} do not evaluate ({_first_error(err)})", "correct the Rego")
    try:
        answer = json.loads(out.stdout)
        result = answer["result"][0]["bindings"]["x"] if answer.get("result") else {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise MigrateError(f"unexpected answer from {binary}: {out.stdout[:200]!r}") from e
    if not isinstance(result, Mapping):
        raise InputError(f"data.{PACKAGE} is not a package in {policy_dir}", f"write the policies in package {PACKAGE}")
    deny, warn = _as_list(result.get("deny")), _as_list(result.get("warn"))
    return Verdict(_messages(deny), _messages(warn), engine_version(binary))


def _first_error(lines: list[str]) -> str:
    """OPA's errors come as JSON ({"errors": [{"message", "location": {file, row}}]}) or text."""
    try:
        first = json.loads("\n".join(lines))["errors"][0]
        where = first.get("location") or {}
        return f"{where.get('file', '?')}:{where.get('row', '?')}: {first.get('message')}"
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return lines[0] if lines else "opa failed"


def _as_list(value: Any) -> list[Any]:
    """A Rego set arrives as a JSON array; a rule that is an object of messages, as its values."""
    if isinstance(value, Mapping):
        return list(value.values())
    return value if isinstance(value, list) else [] if value is None else [value]
