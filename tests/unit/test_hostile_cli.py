"""Every command against every kind of bad input: the operator's contract, table-driven.

The commands and their file parameters are read from the click group (`cli`), not listed by hand, so a
command or a file option added later is driven here too; a file parameter this table does not know fails
`test_every_file_parameter_is_classified` until it says what the parameter reads.

The contract (docs/usage.md "Exit codes", docs/exit-codes.md): a bad input is exit 1, exactly one line on
stderr that starts `error: ` and names the file, no traceback, no "internal error", nothing on stdout,
nothing written (the working directory and the inputs' directory as they were), and no connection tried:
$KUBECONFIG names an API server nobody runs, and an error that says it "cannot reach" it means the tool
went to the cluster before it had judged its input.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from dra_migrate.cli.main import cli
from tests.unit.cli import run
from tests.unit.helpers import unreachable_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans" / "demo-example.yaml"
DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"
MANIFEST = ROOT / "fixtures" / "manifests" / "pod.yaml"
NODE = """apiVersion: v1
kind: Node
metadata: {name: gpu-1, labels: {nvidia.com/gpu.present: "true"}}
status: {capacity: {nvidia.com/gpu: "8"}, allocatable: {nvidia.com/gpu: "8"}}
"""
JOURNAL = '{"seq": 1, "time": "2026-11-21T09:00:07Z", "event": "run-start", "phase": "apply", "planDigest": "x"}\n'


def _leaves(group: click.Group) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)

    def walk(cmd: click.Command, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], click.Command]]:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                yield from walk(sub, (*path, name))
        else:
            yield path, cmd

    return walk(group, ())


LEAVES = dict(_leaves(cli))

# File parameters that name what a command writes (their own tests: test_paths_not_files, test_atomic_*).
OUTPUTS = {"out", "out_file", "output_dir", "directory"}
# What each file parameter reads, by its name.
READS = {
    "snapshot": "snapshot",
    "kubeconfig": "kubeconfig",
    "templates": "templates",
    "ignore_file": "ignore",
    "plan_file": "plan",
    "plan_a": "plan",
    "plan_b": "plan",
    "rebase": "plan",
    "against": "plan",
    "journal_file": "journal",
    "rehearsal_file": "rehearsal",
    "policy_dir": "policies",
    "paths": "manifests",
}
# Commands that read or change a live cluster only: they take no snapshot (or refuse one).
LIVE_ONLY = {("apply",), ("rollback",), ("unlock",), ("probe",), ("snapshot",)}
# A parameter read only with another option: the option that makes the command read it.
ONLY_WITH = {
    (("status",), "kubeconfig"): ["--state", "in-cluster"],
    (("report",), "kubeconfig"): ["--state", "in-cluster"],
    (("convert",), "kubeconfig"): ["--dry-run", "server"],
    (("generate", "deviceclasses"), "kubeconfig"): ["--dry-run", "server"],
    (("plan",), "against"): ["--rebase", "{plan}"],
}
# Required non-file parameters: a valid value.
REQUIRED_VALUES = {"lock_id": "x", "node": "gpu-1", "rule_id": "gpu-request-limits", "shell": "bash"}

FILE_PARAMS = [
    (path, p.name)
    for path, cmd in LEAVES.items()
    for p in cmd.params
    if isinstance(p.type, click.Path) and p.name not in OUTPUTS
]


def test_every_file_parameter_is_classified() -> None:
    unknown = sorted({name for _, name in FILE_PARAMS if name not in READS})
    assert not unknown, f"say what these read in READS (or OUTPUTS): {unknown}"
    assert len(LEAVES) >= 20 and len(FILE_PARAMS) >= 40  # the walk found the commands


# --- the bad inputs ---------------------------------------------------------------------------------------


def _bad_inputs(bad: Path) -> dict[str, Path]:
    """Each class of bad input, as a path under `bad`."""
    bad.mkdir()

    def put(name: str, data: bytes) -> Path:
        (bad / name).write_bytes(data)
        return bad / name

    plan = PLAN.read_bytes()
    (bad / "empty-dir").mkdir()
    (bad / "a file").write_text("x")
    return {
        "missing": bad / "not here" / "no such file.yaml",  # a space in the name: quoted, never split
        "directory": bad / "empty-dir",
        "under-a-file": bad / "a file" / "x.yaml",
        "empty": put("empty.yaml", b""),
        "binary": put("binary.yaml", bytes(range(256)) * 16),
        "not-utf8": put("latin1.yaml", b"apiVersion: v1\nkind: Node\nmetadata: {name: caf\xe9}\n"),
        "nul": put("nul.yaml", b"apiVersion: v1\x00\nkind: List\n"),
        "scalar": put("scalar.yaml", b"just a sentence\n"),
        "truncated-plan": put("truncated-plan.yaml", plan[: len(plan) // 2]),
        "truncated-json": put("truncated.json", b'{"apiVersion": "v1", "kind": "List", "items": [{"kind": "No'),
        "a-plan": put("a-plan.yaml", plan),
        "a-snapshot": put("a-snapshot.yaml", NODE.encode()),
        "a-journal": put("a-journal.jsonl", JOURNAL.encode()),
    }


CLASSES = (
    "missing", "directory", "under-a-file", "empty", "binary", "not-utf8", "nul", "scalar", "truncated-plan",
    "truncated-json", "a-plan", "a-snapshot", "a-journal",
)  # fmt: skip
# A class that is a valid input of that kind, or one the command judges as its own documented outcome (not
# an input error): the command reads it; only a traceback or an internal error breaks the contract then.
READ = {
    ("plan", "a-plan"): "a plan",
    ("snapshot", "a-snapshot"): "a snapshot",
    ("journal", "a-journal"): "a journal (of another plan: refused by its digest, naming the file)",
    ("journal", "empty"): "a journal of nothing applied (docs/apply.md)",
    ("journal", "truncated-json"): "a torn last line, a crash mid-write: repaired (docs/apply.md)",
    ("ignore", "empty"): "an ignore file that ignores nothing",
    ("templates", "empty"): "no extra template paths",
    ("manifests", "empty"): "nothing to convert (docs/convert.md)",
    ("manifests", "directory"): "a directory of no manifests: nothing to convert",
    ("manifests", "scalar"): "YAML that is not a Kubernetes object is left as it is (docs/convert.md)",
    ("manifests", "a-journal"): "likewise: JSON lines that ask for no GPU",
    # GPU counts outside a pod template: convert's own finding, one line per request and a summary, exit 1.
    ("manifests", "a-plan"): "unconvertible requests (docs/convert.md)",
    ("manifests", "truncated-plan"): "likewise",
    ("manifests", "a-snapshot"): "likewise: a Node's capacity",
}
# A parameter that a refusal of the command line comes before (it is not read): the refusal's words.
BEFORE = {
    (("apply",), "snapshot"): "change a live cluster",
    (("rollback",), "snapshot"): "change a live cluster",
    (("snapshot",), "snapshot"): "reads a live cluster",
}


@dataclass
class Case:
    path: tuple[str, ...]
    param: str
    cls: str


CASES = [Case(path, name, cls) for path, name in FILE_PARAMS for cls in CLASSES]
# Without a base snapshot: the parameter under test is the source, or excludes one.
NO_BASE_SNAPSHOT = {"kubeconfig", "plan_b"}


def _args(case: Case, value: object, work: Path, tmp: Path) -> list[str]:
    cmd = LEAVES[case.path]
    plan = work / "plan.yaml"
    valid = {
        "plan_file": plan,
        "plan_a": plan,
        "paths": work / "pod.yaml",
        "policy_dir": ROOT / "dra_migrate" / "policy" / "examples",
    }
    args = list(case.path)
    for p in cmd.params:
        if p.name == case.param:
            given: object = value
        elif p.required:
            given = valid[p.name] if p.name in valid else REQUIRED_VALUES[str(p.name)]
        elif p.name == "snapshot" and case.param not in NO_BASE_SNAPSHOT and case.path not in LIVE_ONLY:
            given = work / "demo.yaml"  # the plan's cluster: the input under test is what is wrong
        elif p.name == "out" and case.path == ("snapshot",):
            given = work / "out" / "snapshot.yaml"  # what snapshot needs to run at all (never written here)
        else:
            continue
        if p.param_type_name == "argument":
            args.append(str(given))
        else:
            flag = next(o for o in p.opts if o.startswith("--"))
            args += [flag, str(given)]
    extra = ONLY_WITH.get((case.path, str(case.param)), [])
    if extra:  # plan --rebase rewrites the plan it is given: a copy
        (tmp / "rebased.yaml").write_bytes(PLAN.read_bytes())
    return args + [a.format(plan=tmp / "rebased.yaml") for a in extra]


def _tree(d: Path) -> dict[str, tuple[int, int]]:
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(d.rglob("*")) if not f.is_symlink()}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("hostile")
    (work / "plan.yaml").write_bytes(PLAN.read_bytes())
    (work / "demo.yaml").write_bytes(DEMO.read_bytes())
    (work / "pod.yaml").write_bytes(MANIFEST.read_bytes())
    (work / "home").mkdir()
    (work / "out").mkdir()
    unreachable_kubeconfig(work)
    return work


@pytest.fixture(scope="module")
def bad(work: Path) -> dict[str, Path]:
    return _bad_inputs(work / "bad")


@pytest.mark.parametrize("case", CASES, ids=[f"{' '.join(c.path)}-{c.param}-{c.cls}" for c in CASES])
def test_every_command_refuses_every_bad_input_in_one_line(
    case: Case, work: Path, bad: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = READS[str(case.param)]
    value = bad[case.cls]
    readable = (kind, case.cls) in READ
    if readable:  # read, and perhaps written (plan --rebase rewrites its plan): a copy
        value = tmp_path / value.name
        value.write_bytes(bad[case.cls].read_bytes()) if bad[case.cls].is_file() else value.mkdir()
    monkeypatch.chdir(tmp_path if readable else work / "out")  # where a default output (plan's plans/) lands
    env = {"KUBECONFIG": str(work / "kubeconfig"), "HOME": str(work / "home"), "KUBERNETES_SERVICE_HOST": ""}
    args = _args(case, value, work, tmp_path)
    before = _tree(work)
    r = run(*args, env=env)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, (args, r.stderr)
    assert _tree(work) == before, f"{args} wrote a file"
    if readable:
        return
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.code == 1, (args, r.code, r.stdout[:200], r.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), (args, r.stderr)
    assert r.stdout == "", (args, r.stdout[:200])
    line = lines[0]
    before_it = BEFORE.get((case.path, str(case.param)))
    if before_it is not None:
        assert before_it in line, (args, line)
        return
    assert value.name in line, f"{args}: the error does not name the file: {line}"
    assert "cannot reach" not in line, f"{args}: went to the cluster before judging its input: {line}"


# --- the kubeconfig every client is built from ------------------------------------------------------------


@pytest.mark.parametrize("text", [b"just a sentence\n", b"[1, 2]\n", b"apiVersion: v1\x00\n", b"a: [\n"])
def test_a_client_on_a_file_that_is_not_a_kubeconfig_is_a_cluster_error_naming_it(tmp_path: Path, text: bytes) -> None:
    """The floor under every client (the twin's, the simulator's): the Kubernetes client's own loader raised
    TypeError or a YAML error on these, which the CLI could only call an internal error."""
    from dra_migrate.errors import ClusterError
    from dra_migrate.kube.config import new_api_client

    f = tmp_path / "kc.yaml"
    f.write_bytes(text)
    with pytest.raises(ClusterError) as e:
        new_api_client(f)
    assert str(f) in str(e.value)


def test_unlock_and_rollback_refuse_a_snapshot_before_anything_else(tmp_path: Path) -> None:
    """`unlock PLAN --snapshot x` went to $KUBECONFIG's cluster and deleted the lock there (it takes no
    snapshot now); `rollback PLAN --snapshot x` said "nothing to roll back", exit 0, when the plan had no
    journal beside it: both are live-only, as apply is."""
    plan = tmp_path / "plan.yaml"
    plan.write_bytes(PLAN.read_bytes())
    env = {"KUBECONFIG": str(unreachable_kubeconfig(tmp_path)), "KUBERNETES_SERVICE_HOST": ""}
    r = run("unlock", str(plan), "--lock-id", "x", "--snapshot", str(DEMO), env=env)
    assert r.code == 1 and "--snapshot" in r.stderr and "cannot reach" not in r.stderr, r.stderr
    r = run("rollback", str(plan), "--snapshot", str(DEMO), env=env)
    assert r.code == 1 and "change a live cluster" in r.stderr, r.stderr


# --- option values ----------------------------------------------------------------------------------------

# Values each option must refuse (exit 1, one line naming the option), by the option's name. An option this
# table does not know fails `test_every_value_option_is_classified` until it is given bad values or a reason.
BAD_VALUES = {
    "burst": ["0", "-1", "abc"],
    "parallelism": ["0", "-1", "abc"],
    "mps_thread_percentage": ["101", "-1", "abc"],
    "mps_memory_limit": ["512Ki", "abc", ""],
    "qps": ["nan", "abc"],
    "time_scale": ["0", "-1", "nan", "inf", "abc"],
    "drain_timeout": ["-5m", "abc", "0s"],
    "pending_threshold": ["-5m", "abc"],
    "soak": ["-5m", "abc"],
    "timeout": ["-5m", "abc", "0s"],
    "max_unavailable": ["0%", "150%", "abc", "-1", "0"],
    "pools": ["no-such-pool"],
    "exclude_pools": ["no-such-pool"],
    "stage": ["no-such-stage"],
    "until": ["no-such-stage"],
    "order": ["no-such-order"],
    "kubernetes_version": ["abc", "v1", ""],
    "feature_gates": ["x", "A=maybe"],
    "pool_labels": ["", "a b"],
    "device_class": ["", "a b", "GPU"],
    "fallback": ["", "a b", "GPU"],
    "dra_driver": ["", "a b"],
    "driver": ["", "a b"],
    "resource": ["", "a b"],
    "device_plugin_label": ["", "a b"],
    "dra_label": ["", "a b"],
    "namespace": ["", "a b"],
    "canary_namespace": ["", "a b", "Default"],
    "canary_pull_secrets": ["", "a b"],
    "lock_namespace": ["", "a b"],
}
# Options whose every value is the user's (or judged where it is used), with why.
FREE = {
    "canary_command": "a command line, run in the canary pod",
    "canary_image": "an image reference: the registry judges it",
    "context": "a kubeconfig context: the client refuses one the kubeconfig does not name",
    "lock_id": "compared with the lock's holder: a wrong one is refused by unlock",
    "node": "a node name: probe refuses one the cluster does not have",
    "selector": "a CEL expression: compiled and refused by convert (test_cel_*)",
    "output_flag": "refused whatever its value, with the option to use (test_cli_conventions)",
}
VALUE_PARAMS = [
    (path, p.name, p.opts)
    for path, cmd in LEAVES.items()
    for p in cmd.params
    if isinstance(p, click.Option) and not p.is_flag and not isinstance(p.type, (click.Path, click.Choice))
]
VALUE_CASES = [
    (path, str(name), next(o for o in opts if o.startswith("--")), value)
    for path, name, opts in VALUE_PARAMS
    for value in BAD_VALUES.get(str(name), [])
]


def test_every_value_option_is_classified() -> None:
    unknown = sorted({str(name) for _, name, _ in VALUE_PARAMS if name not in BAD_VALUES and name not in FREE})
    assert not unknown, f"give these bad values in BAD_VALUES, or a reason in FREE: {unknown}"


@pytest.mark.parametrize(
    ("path", "name", "flag", "value"), VALUE_CASES, ids=[f"{' '.join(c[0])}-{c[2]}={c[3]!r}" for c in VALUE_CASES]
)
def test_every_option_refuses_a_value_out_of_range_in_one_line(
    path: tuple[str, ...], name: str, flag: str, value: str, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"KUBECONFIG": str(work / "kubeconfig"), "HOME": str(work / "home"), "KUBERNETES_SERVICE_HOST": ""}
    args = [*_args(Case(path, "", ""), None, work, tmp_path), flag, value]
    if path == ("apply",) or path == ("rollback",):
        args.append("--dry-run")
    r = run(*args, env=env)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.code == 1, (args, r.code, r.stdout[:200], r.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), (args, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, (args, r.stderr)
    assert flag in lines[0] or (value and repr(value) in lines[0]), f"{args}: names neither {flag} nor {value!r}"
    assert "cannot reach" not in lines[0], f"{args}: went to the cluster before judging {flag}: {lines[0]}"
    assert r.stdout == "" and list(tmp_path.iterdir()) == [], (args, r.stdout[:200])


# --- colour on a terminal -----------------------------------------------------------------------------------


def _on_a_terminal(*args: str, env: dict[str, str]) -> str:
    """What the real CLI prints to stdout when stdout is a terminal (a pseudo-terminal here)."""
    import re
    import subprocess
    import sys

    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    full_env.update(PYTHONPATH=str(ROOT), COLUMNS="200", **env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dra_migrate", *args], stdout=slave, stderr=subprocess.DEVNULL, env=full_env, cwd=ROOT
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(master)
    return re.sub(r"\r", "", out.decode())


@pytest.mark.parametrize(
    ("extra", "env", "coloured"),
    [
        ([], {"TERM": "xterm-256color"}, True),
        ([], {"TERM": "xterm-256color", "NO_COLOR": ""}, False),
        ([], {"TERM": "dumb"}, False),
        (["--no-color"], {"TERM": "xterm-256color"}, False),
    ],
    ids=["terminal", "NO_COLOR", "TERM=dumb", "--no-color"],
)
def test_colour_on_a_terminal_unless_told_not_to(extra: list[str], env: dict[str, str], coloured: bool) -> None:
    """TERM=dumb (Emacs' shell, a CI log viewer) and a `--no-color` flag got escape sequences before: only
    NO_COLOR turned them off."""
    out = _on_a_terminal("show", str(PLAN), *extra, env=env)
    assert "Plan" in out
    assert ("\x1b[" in out) is coloured, out[:300]


# --- what a written file lets others read -------------------------------------------------------------------


@pytest.mark.parametrize(("keep_env", "mode"), [(False, 0o644), (True, 0o600)])
def test_a_snapshot_that_keeps_env_values_is_readable_by_its_owner_only(
    keep_env: bool, mode: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`snapshot --keep-env` keeps container env values (where API keys and passwords live) and was written
    0644 under the usual umask, readable by every user of the machine: now 0600, as client-go writes a
    kubeconfig. Without it (env redacted, no Secrets read) the file is for a review team: 0644."""
    import dra_migrate.cli.snapshot as snap
    from dra_migrate.cluster.snapshot import load_snapshot

    demo = load_snapshot(DEMO)
    monkeypatch.setattr(snap, "LiveCluster", lambda *_: type("Live", (), {"requests": 0})())
    monkeypatch.setattr(snap, "read_objects", lambda *_: (demo.source, iter([NODE_OBJ])))
    old = os.umask(0o022)
    try:
        r = run("snapshot", "--out", str(tmp_path / "s.yaml"), *(["--keep-env"] if keep_env else []))
    finally:
        os.umask(old)
    assert r.code == 0, r.stderr
    assert (tmp_path / "s.yaml").stat().st_mode & 0o777 == mode


NODE_OBJ = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"}},
    "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}},
}


# --- kubectl dra-migrate <TAB> ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "offered", "directive"),
    [
        ([""], {"inventory", "apply", "completion"}, ":4"),
        (["inventory", "--sn"], {"--snapshot"}, ":4"),
        (["inventory", "-o", ""], {"json", "yaml", "name"}, ":4"),
        (["show", ""], set(), ":0"),  # a plan file: the shell completes file names
        (["explain", "shared-gpu"], {"shared-gpu-capacity-loss"}, ":4"),  # a rule id: offered nothing
    ],
)
def test_kubectl_completes_the_plugin_through_its_completion_helper(
    words: list[str], offered: set[str], directive: str
) -> None:
    """kubectl runs `kubectl_complete-dra_migrate` from PATH with the words after the plugin's name and reads
    a choice a line, then `:<cobra directive>` (kubectl v0.37.2 pkg/cmd/plugin/plugin_completion.go); none was
    installed, so `kubectl dra-migrate <TAB>` offered nothing."""
    import subprocess
    import sys
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl_complete-dra_migrate"] == "dra_migrate.cli.entry:kubectl_complete"
    code = "from dra_migrate.cli.entry import kubectl_complete; kubectl_complete()"
    out = subprocess.run(
        [sys.executable, "-c", code, *words],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    lines = out.stdout.splitlines()
    assert lines[-1] == directive and offered <= set(lines[:-1]), lines
    assert out.stderr == ""


# --- Ctrl-C while convert writes --------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["writing", "renaming"])
def test_ctrl_c_while_convert_writes_leaves_every_file_as_it_was(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`convert k8s/ --in-place` writes every file or none; a Ctrl-C (or SIGTERM) on the second file left the
    first one's temporary file beside it, or, between renames, the first file converted and the second not."""
    import dra_migrate.convert.files as files

    originals = {}
    for name in ("a.yaml", "b.yaml", "c.yaml"):
        (tmp_path / name).write_bytes(MANIFEST.read_bytes())
        originals[name] = MANIFEST.read_bytes()
    calls = {"n": 0}

    def interrupted_on_the_second(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 2:
                raise KeyboardInterrupt
            return real(*args, **kwargs)

        return call

    if where == "writing":
        monkeypatch.setattr(files, "_write_temp", interrupted_on_the_second(files._write_temp))
    else:
        monkeypatch.setattr(files.os, "replace", interrupted_on_the_second(os.replace))
    r = run("convert", str(tmp_path), "--in-place")
    assert r.code == 130 and "Traceback" not in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.yaml", "c.yaml"]
    assert {n: (tmp_path / n).read_bytes() for n in originals} == originals
