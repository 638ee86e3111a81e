"""The conventions operators know from kubectl and Terraform (issue 18, issue 11 item 9).

Exit codes decided in one place, one `-o` vocabulary, output that fits 80 columns, colour with
meaning and none when piped, completion, help with examples, global flags anywhere, `next:` lines.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from dra_migrate.cli import exitcodes
from dra_migrate.cli.main import COMMANDS, cli, hoist_global_flags
from dra_migrate.cluster.identity import CLUSTER_KEYS
from dra_migrate.plan import io as plan_io
from dra_migrate.render import Document, styled, use_color
from dra_migrate.render.checks import check_document
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = str((ROOT / "fixtures" / "clusters" / "demo.yaml").relative_to(ROOT))
MANIFEST = ROOT / "fixtures" / "manifests" / "pod.yaml"
PLAN = str((ROOT / "plans" / "demo-example.yaml").relative_to(ROOT))
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# Every command line a user can type, to the subcommand (generate's one verb included).
COMMAND_PATHS = [[n] for n in COMMANDS if n != "generate"] + [["generate", "deviceclasses"]]
# The commands that print data, and so take -o.
WITH_OUTPUT = ["inventory", "check", "match", "plan", "show", "diff", "status", "report", "probe", "rehearse"]


def _one_line(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# --- 1. exit codes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=[" ".join(p) for p in COMMAND_PATHS])
def test_an_unknown_option_exits_1_naming_it(path: list[str]) -> None:
    r = run(*path, "--no-such-option")
    assert r.code == exitcodes.FAILED, (r.code, r.stderr)
    line = _one_line(r.stderr)
    assert line.startswith("error: ") and "--no-such-option" in line and "--help" in line
    assert r.stdout == ""


@pytest.mark.parametrize("command", WITH_OUTPUT)
def test_a_bad_output_format_exits_1_naming_the_option(command: str) -> None:
    r = run(command, "-o", "xml")
    assert r.code == exitcodes.FAILED
    line = _one_line(r.stderr)
    assert "'-o'" in line or "--output" in line
    assert "xml" in line


@pytest.mark.parametrize(
    "command",
    ["show", "diff", "status", "report", "apply", "rollback", "unlock", "completion", "rehearse", "probe", "convert"],
)
def test_a_missing_argument_exits_1(command: str) -> None:
    r = run(command)
    assert r.code == exitcodes.FAILED
    assert "Missing" in _one_line(r.stderr)


def test_an_unknown_command_and_a_missing_command_exit_1() -> None:
    assert run("nope").code == exitcodes.FAILED
    assert "nope" in _one_line(run("nope").stderr)
    none = run()
    # No command: the help, as formatted (not squashed onto an error line), on stderr, and 1, whatever the
    # click (8.1 printed it on stdout and exited 0; 8.2 raises it as a usage error).
    assert none.code == exitcodes.FAILED and none.stdout == ""
    assert none.stderr.startswith("Usage: ") and "\nCommands:\n" in none.stderr and "\n  inventory " in none.stderr


def test_the_codes_that_mean_found_something_stay_2() -> None:
    assert run("check", "--snapshot", DEMO).code == exitcodes.ACTION_NEEDED  # the demo has blockers
    assert run("diff", PLAN, "--snapshot", "fixtures/clusters/h100-homogeneous.yaml").code == exitcodes.ACTION_NEEDED
    assert run("diff", PLAN, PLAN).code == exitcodes.OK


def test_ctrl_c_exits_130_without_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    import dra_migrate.cli.inventory as inventory

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(inventory, "load_state", interrupted)
    r = run("inventory", "--snapshot", DEMO)
    assert r.code == exitcodes.INTERRUPTED
    assert "interrupted" in r.stderr and "Traceback" not in r.stderr


def test_a_closed_stdout_is_not_an_error(tmp_path: Path) -> None:
    """`dra-migrate show PLAN -o json | head -0`: the reader is gone before the first write."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-m", "dra_migrate", "show", PLAN, "-o", "json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait() == exitcodes.OK, err
    assert err == ""


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("deep.json", "[" * 100_000 + "]" * 100_000),
        ("deep.yaml", "a: " + "[" * 5_000 + "]" * 5_000),
        ("binary.yaml", b"\xff\xfe\x00garbage"),
    ],
)
def test_hostile_plan_files_are_one_line_errors_naming_the_file(
    tmp_path: Path, name: str, content: str | bytes
) -> None:
    f = tmp_path / name
    if isinstance(content, bytes):
        f.write_bytes(content)
    else:
        f.write_text(content)
    for command in (["show", str(f)], ["status", str(f)], ["diff", str(f), str(f)], ["report", str(f)]):
        r = run(*command)
        assert r.code == exitcodes.FAILED, (command, r.stderr)
        line = _one_line(r.stderr)
        assert name in line and "internal error" not in line, line


def test_a_directory_or_missing_file_is_an_input_error(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "missing.yaml"):
        r = run("show", str(path))
        assert r.code == exitcodes.FAILED
        line = _one_line(r.stderr)
        assert str(path) in line and "internal error" not in line


# --- 2. one output vocabulary ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize(
    "args",
    [
        ["inventory", "--snapshot", DEMO],
        ["check", "--snapshot", DEMO],
        ["match", "--snapshot", DEMO],
        ["show", PLAN],
        ["diff", PLAN, PLAN],
        ["status", PLAN],
        ["diff", PLAN, "--snapshot", DEMO],
    ],
    ids=lambda a: a[0] if isinstance(a, list) else a,
)
def test_machine_formats_carry_format_version(args: list[str], fmt: str) -> None:
    r = run(*args, "-o", fmt)
    assert r.code in (0, 2), r.stderr
    data = json.loads(r.stdout) if fmt == "json" else yaml.safe_load(r.stdout)
    assert isinstance(data["formatVersion"], int)


def test_cluster_is_the_same_object_in_inventory_check_and_match() -> None:
    shapes = [
        json.loads(run(c, "--snapshot", DEMO, "-o", "json").stdout)["cluster"] for c in ("inventory", "check", "match")
    ]
    assert shapes[0] == shapes[1] == shapes[2]
    assert shapes[0]["kubernetesVersion"] == "v1.37.2"


def _json(*args: str) -> dict[str, Any]:
    r = run(*args, "-o", "json")
    assert r.code in (0, 2), r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def test_cluster_is_the_same_object_in_every_output(tmp_path: Path) -> None:
    """Issue 18: one shape, `cluster.state.cluster_object`: the same keys in the same order everywhere; a
    plan knows its cluster's name and version only, so there the rest is null and `source` is "plan"."""
    read = _json("inventory", "--snapshot", DEMO)["cluster"]
    assert list(read)[: len(CLUSTER_KEYS)] == list(CLUSTER_KEYS)
    assert read["name"] == "gke_acme-ml-demo_us-central1_demo" and read["source"] == "snapshot"
    core = {k: read[k] for k in CLUSTER_KEYS}
    plan = str(tmp_path / "p.yaml")
    planned = _json("plan", "--snapshot", DEMO, "--out", plan)
    diffed = _json("diff", PLAN, plan)
    drifted = _json("diff", plan, "--snapshot", DEMO)
    from_plan = [
        planned["cluster"],
        _json("show", plan)["cluster"],
        _json("status", plan)["cluster"],
        _json("report", plan)["cluster"],
        diffed["a"]["cluster"],
        diffed["b"]["cluster"],
        drifted["plan"]["cluster"],
    ]
    assert all(c == from_plan[0] for c in from_plan), from_plan
    assert from_plan[0] == {**{k: None for k in CLUSTER_KEYS}, "name": read["name"],
                            "kubernetesVersion": "v1.37.2", "source": "plan"}  # fmt: skip
    # Read now: the whole core, as inventory says it.
    assert drifted["cluster"] == core
    assert _json("report", plan, "--snapshot", DEMO)["cluster"] == core
    shown = yaml.safe_load(run("show", plan, "-o", "yaml").stdout)
    assert shown["cluster"] == from_plan[0]


def _refs(findings: list[dict[str, Any]]) -> list[Any]:
    return [o for f in findings for o in f["objects"]]


def test_finding_objects_are_structured_in_every_output(tmp_path: Path) -> None:
    """Issue 18: `{kind, namespace, name}` in JSON and YAML; the plan file keeps the text its digest covers."""
    whole, part = str(tmp_path / "whole.yaml"), str(tmp_path / "part.yaml")
    run("plan", "--snapshot", DEMO, "--out", whole)
    planned = _json("plan", "--snapshot", DEMO, "--out", part, "--exclude-pools", "a100-shared-pool")
    pool = {"kind": "Pool", "namespace": None, "name": "a100-shared-pool"}
    left_out = [f for x in planned["excludedPools"] for f in x["findings"]]
    assert pool in _refs(left_out)
    shown = _json("show", whole)
    outputs = {
        "plan": left_out,
        "show": shown["findings"],
        "show review": [f for x in _json("show", part)["review"]["excludedPools"] for f in x["findings"]],
        "report": _json("report", whole)["findings"],
        "report excludedPools": [f for x in _json("report", part)["excludedPools"] for f in x["findings"]],
        "diff": _json("diff", whole, part)["summary"]["findings"]["removed"],
        "show yaml": yaml.safe_load(run("show", whole, "-o", "yaml").stdout)["findings"],
    }
    for where, findings in outputs.items():
        refs = _refs(findings)
        assert refs and all(isinstance(o, dict) and set(o) == {"kind", "namespace", "name"} for o in refs), where
    assert pool in _refs(shown["findings"]) and any(pool in f["objects"] for f in outputs["diff"])
    # The plan file is unchanged: text, as the digest covers it (and plans written before still load).
    on_disk = yaml.safe_load(Path(whole).read_text())
    assert "Pool a100-shared-pool" in _refs(on_disk["findings"]) and isinstance(on_disk["cluster"], str)
    # Humans read text.
    assert "Pool a100-shared-pool" in run("report", whole, "-o", "markdown").stdout
    table = run("diff", whole, part, "-o", "wide").stdout
    assert "Pool a100-shared-pool" in table and "'kind'" not in table


def test_probe_takes_the_output_vocabulary(monkeypatch: pytest.MonkeyPatch) -> None:
    """probe prints data too: every -o, JSON and YAML with formatVersion; exit 2 still means it failed."""
    import dra_migrate.cli.probe as probe
    from dra_migrate.execute.probe import ProbeResult

    devices = [{"name": "gpu-0", "attributes": {"productName": "H100"}, "capacity": {"memory": "80Gi"}}]
    result = ProbeResult("n1", "gpu.nvidia.com", "gpu.nvidia.com", devices, problems=["the container saw nothing"])
    monkeypatch.setattr(probe, "live_ops", lambda *_: type("Ops", (), {"kube": None})())
    monkeypatch.setattr(probe, "run_probe", lambda *_: result)
    for fmt in ("json", "yaml"):
        r = run("probe", "--node", "n1", "-o", fmt)
        data = json.loads(r.stdout) if fmt == "json" else yaml.safe_load(r.stdout)
        assert r.code == exitcodes.ACTION_NEEDED and data["formatVersion"] == 1 and data["result"] == "failed"
    assert run("probe", "--node", "n1", "-o", "name").stdout == "gpu-0\n"
    assert re.search(r"^\| gpu-0 +\|", run("probe", "--node", "n1", "-o", "markdown").stdout, re.M)
    assert "productName=H100" in run("probe", "--node", "n1", "-o", "wide").stdout


def test_name_lists_one_name_per_line() -> None:
    names = run("check", "--snapshot", DEMO, "-o", "name").stdout.splitlines()
    findings = json.loads(run("check", "--snapshot", DEMO, "-o", "json").stdout)["findings"]
    assert names == list(dict.fromkeys(f["id"] for f in findings))
    assert "dra-driver-missing" in names
    consumers = run("inventory", "--snapshot", DEMO, "-o", "name").stdout.splitlines()
    assert "Deployment/ml-serving/chat-api" in consumers
    assert run("show", PLAN, "-o", "name").stdout.splitlines()[0] == "prepare"


def test_report_takes_o_and_keeps_format_as_a_hidden_alias() -> None:
    new = run("report", PLAN, "-o", "json")
    old = run("report", PLAN, "--format", "json")
    assert new.code == old.code == 0
    assert json.loads(new.stdout) == json.loads(old.stdout)
    assert "deprecated" in old.stderr
    assert "--format" not in run("report", "--help").stdout


def test_convert_refuses_o_with_the_option_to_use(tmp_path: Path) -> None:
    r = run("convert", str(MANIFEST), "-o", str(tmp_path / "out"))
    assert r.code == exitcodes.FAILED
    assert "--output-dir" in _one_line(r.stderr)
    assert not (tmp_path / "out").exists()


def test_snapshot_refuses_o_with_the_option_to_use(tmp_path: Path) -> None:
    r = run("snapshot", "-o", str(tmp_path / "s.yaml"))
    assert r.code == exitcodes.FAILED
    assert "--out" in _one_line(r.stderr)
    r = run("snapshot")
    assert r.code == exitcodes.FAILED and "--out" in _one_line(r.stderr)


# --- 4. plan shows what it planned -------------------------------------------------------------------


def test_plan_prints_its_summary_on_stdout_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "p.yaml"
    r = run("plan", "--snapshot", DEMO, "--out", str(out))
    assert r.code == 0, r.stderr
    for word in ("pool(s)", "node(s)", "wave(s)", "pod(s) evicted", "estimated", "blocker"):
        assert word in r.stdout
    first = out.read_text()
    again = run("plan", "--snapshot", DEMO, "--out", str(out), "--max-unavailable", "2")
    assert again.code == exitcodes.FAILED and "--force" in _one_line(again.stderr)
    assert out.read_text() == first
    forced = run("plan", "--snapshot", DEMO, "--out", str(out), "--max-unavailable", "2", "--force")
    assert forced.code == 0 and out.read_text() != first


def test_plan_default_name_carries_the_time_of_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = run("plan", "--snapshot", str(ROOT / DEMO), "-o", "name")
    assert r.code == 0, r.stderr
    written = Path(r.stdout.strip())
    assert written.exists() and re.fullmatch(r".+-\d{8}-\d{6}\.yaml", written.name)


def test_plan_detailed_exitcode(tmp_path: Path) -> None:
    """Terraform's meaning (issue 28): 0 no changes, 2 changes present, 1 error — applicability aside."""
    import dataclasses

    from dra_migrate.cli.plan import has_changes
    from dra_migrate.plan.model import Plan, PoolStage, PrepareStage, Wave

    blocked = run("plan", "--snapshot", DEMO, "--out", str(tmp_path / "a.yaml"), "--detailed-exitcode")
    assert blocked.code == exitcodes.ACTION_NEEDED  # changes present (not applicable either)
    plain = run("plan", "--snapshot", DEMO, "--out", str(tmp_path / "b.yaml"))
    assert plain.code == exitcodes.OK
    ok = run(
        "plan",
        "--snapshot",
        "fixtures/clusters/half-migrated.yaml",
        "--out",
        str(tmp_path / "d.yaml"),
        "--detailed-exitcode",
    )
    assert ok.code == exitcodes.ACTION_NEEDED, ok.stdout  # applicable, and it has changes: 2, as Terraform
    loaded = Plan.from_dict(plan_io.load(tmp_path / "d.yaml"))
    assert has_changes(loaded)
    empty = (PrepareStage("prepare", ()), PoolStage("p", "p", (), (), (Wave("wave-1", (), 0, "0s"),)))
    assert not has_changes(dataclasses.replace(loaded, stages=empty))
    bad = run("plan", "--snapshot", str(tmp_path / "missing.yaml"), "--detailed-exitcode")
    assert bad.code == exitcodes.FAILED


# --- 5. terminals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["inventory", "--snapshot", DEMO],
        ["inventory", "--snapshot", "fixtures/clusters/mig-timeslice.yaml"],
        ["check", "--snapshot", DEMO],
        ["check", "--snapshot", "fixtures/clusters/mig-timeslice.yaml"],
        ["match", "--snapshot", DEMO],
        ["show", PLAN],
        ["status", PLAN],
        ["diff", PLAN, "--snapshot", "fixtures/clusters/h100-homogeneous.yaml"],
    ],
    ids=lambda a: "-".join(Path(x).stem for x in a),
)
def test_default_tables_fit_80_columns_and_wide_shows_more(args: list[str]) -> None:
    narrow = run(*args, env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert narrow.code in (0, 2), narrow.stderr
    too_long = [line for line in narrow.stdout.splitlines() if len(line) > 80]
    assert not too_long, too_long
    wide = run(*args, "-o", "wide", env={"COLUMNS": "80"})
    assert max(map(len, wide.stdout.splitlines())) >= max(map(len, narrow.stdout.splitlines()))


def test_wide_has_every_column() -> None:
    narrow = run("inventory", "--snapshot", DEMO, env={"COLUMNS": "80"}).stdout
    wide = run("inventory", "--snapshot", DEMO, "-o", "wide", env={"COLUMNS": "80"}).stdout
    assert "PER POD × REPLICAS" not in narrow and "PER POD × REPLICAS" in wide
    assert "DEVICE PLUGIN" in wide and "…" not in wide


def test_no_python_reprs_or_placeholders_in_tables() -> None:
    for args in (["show", PLAN], ["show", PLAN, "-o", "wide"], ["status", PLAN]):
        out = run(*args).stdout
        assert "{original." not in out and "{node." not in out
        assert "[]" not in out and "{'" not in out and "None" not in out and "True" not in out


def test_show_states_each_steps_parameters() -> None:
    out = run("show", PLAN).stdout
    assert "label nvidia.com/gpu.deploy.device-plugin=false" in out
    assert "label nvidia.com/dra-kubelet-plugin=true" in out


def test_piped_output_has_no_colour() -> None:
    for args in (["check", "--snapshot", DEMO], ["show", PLAN], ["diff", PLAN, "--snapshot", DEMO]):
        assert not ANSI.search(run(*args).stdout)


class _Tty:
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(_Tty())  # type: ignore[arg-type]
    assert not use_color(sys.stdout) or sys.stdout.isatty()
    monkeypatch.setenv("NO_COLOR", "")  # any value, even empty (no-color.org)
    assert not use_color(_Tty())  # type: ignore[arg-type]


def test_colour_means_something() -> None:
    report = json.loads(run("check", "--snapshot", DEMO, "-o", "json").stdout)
    text = check_document(report).render("table", color=True)
    assert "\x1b[31mBLOCKER" in text  # blockers red
    assert "\x1b[33mWARNING" in text  # warnings yellow
    assert "\x1b[32myes" in text and "\x1b[31mNO" in text  # fits / does not fit
    plain = check_document(report).render("table", color=False)
    assert not ANSI.search(plain)
    assert ANSI.sub("", text).replace(" ", "") == plain.replace(" ", "")


def test_diff_additions_green_removals_red() -> None:
    from dra_migrate.render.diff import drift_document

    r = run("diff", PLAN, "--snapshot", "fixtures/clusters/h100-homogeneous.yaml", "-o", "json")
    text = drift_document(json.loads(r.stdout)).render("table", color=True)
    assert "\x1b[32madded" in text and "\x1b[31mremoved" in text


def test_colour_does_not_break_table_alignment() -> None:
    doc = Document()
    doc.table(["a", "b"], [[styled("NO", "bad"), "x"], ["yes", "y"]])
    lines = [ANSI.sub("", x) for x in doc.render("table", color=True).splitlines()]
    assert [x.rindex(x.split()[-1]) for x in lines] == [5, 5, 5]


# --- 6. discoverability ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=[" ".join(p) for p in COMMAND_PATHS])
def test_every_command_has_examples_in_its_help(path: list[str]) -> None:
    r = run(*path, "--help")
    assert r.code == 0
    assert "Example" in r.stdout
    examples = [x for x in r.stdout.splitlines() if x.strip().startswith(("dra-migrate ", "echo ", "eval "))]
    assert len(examples) >= 2 or (path == ["generate"] and examples)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str) -> None:
    r = run("completion", shell)
    assert r.code == 0
    assert "_DRA_MIGRATE_COMPLETE" in r.stdout
    assert f"{shell}_complete" in r.stdout


def test_completion_completes_commands_and_options() -> None:
    def complete(words: str) -> list[str]:
        env = {"_DRA_MIGRATE_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
        r = CliRunner().invoke(cli, [], env=env, prog_name="dra-migrate")
        return [line.split(",", 1)[1] for line in r.output.splitlines() if "," in line]

    assert complete("dra-migrate ch") == ["check"]
    assert "--exclude-pools" in complete("dra-migrate plan --exc")
    assert run("completion", "tcsh").code == exitcodes.FAILED


def test_global_flags_are_accepted_after_the_subcommand() -> None:
    assert hoist_global_flags(["check", "-v", "--snapshot", "x", "--", "-v"]) == [
        "-v",
        "check",
        "--snapshot",
        "x",
        "--",
        "-v",
    ]
    r = run("inventory", "--snapshot", DEMO, "-o", "json", "--debug")
    assert r.code == 0 and json.loads(r.stdout)["formatVersion"] == 1
    bad = run("show", "missing.yaml", "--debug")
    assert bad.code == exitcodes.FAILED and "missing.yaml" in bad.stderr


# A `dra-migrate ARGS` process that prints, at its end, which of the modules named in its first argument
# it imported (start-up time and memory are benchmarked; what keeps them low is tested here).
_LOADED = (
    "import json, sys; from dra_migrate.cli.main import main\n"
    "try:\n    main(sys.argv[2:])\nexcept SystemExit:\n    pass\n"
    "print(json.dumps([m for m in sys.argv[1].split(',') if m in sys.modules]), file=sys.stderr)\n"
)
_DEMO_PLAN = str(ROOT / "tests" / "golden" / "plans" / "demo.yaml")


def _loaded(args: list[str], modules: tuple[str, ...], cwd: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", _LOADED, ",".join(modules), *args]
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    last = p.stderr.strip().splitlines()[-1:] or ["(no output)"]
    try:
        return list(json.loads(last[0]))
    except ValueError:
        raise AssertionError((args, p.stderr[-2000:])) from None


def test_version_and_help_import_no_command_module() -> None:
    heavy = ("kubernetes", "deepdiff", "celpy", "dra_migrate.cli.plan", "tabulate")
    for args in (["--version"], ["--help"], ["completion", "bash"]):
        assert _loaded(args, heavy, ROOT) == [], args


def test_commands_that_only_read_a_plan_load_no_cel_engine_and_no_deepdiff(tmp_path: Path) -> None:
    """show, status and apply's refusal stay within a few times a bare YAML load at 10,000 nodes
    (bench/plan_scale.py) only while they skip the CEL engine and deepdiff at start-up (~0.4 s): an import
    at the top of any plan module they reach (a split of plan/build.py did so once) fails here."""
    heavy = ("deepdiff", "celpy", "pydantic", "dra_migrate.dra.cel", "dra_migrate.checks.run")
    for args in (["show", _DEMO_PLAN], ["status", _DEMO_PLAN], ["show", _DEMO_PLAN, "-o", "json"]):
        assert _loaded(args, heavy, tmp_path) == [], args


def test_diff_and_show_load_no_markdown_tables_journals_or_edit_checks(tmp_path: Path) -> None:
    """`diff` at 2,000 nodes is held to 2x loading both plans (bench/plan_scale.py), where start-up weighs:
    tabulate (Markdown only), the journals with the API client (apply, status, report only) and the
    checks of an edit's meaning (review and rebase only) are imported where they are used."""
    heavy = (
        "tabulate", "dra_migrate.execute.journals", "dra_migrate.kube", "dra_migrate.plan.validate",
        "dra_migrate.plan.consistency",
    )  # fmt: skip
    for args in (["diff", _DEMO_PLAN, _DEMO_PLAN], ["show", _DEMO_PLAN], ["show", _DEMO_PLAN, "-o", "json"]):
        assert _loaded(args, heavy, tmp_path) == [], args


def test_show_loads_no_cluster_model_inventory_node_specs_thread_pool_or_temp_files(tmp_path: Path) -> None:
    """`show`'s peak memory is held to 5x the plan file's size (bench/plan_scale.py); at 10,000 nodes the
    modules it imports weighed as much as the file's rows. Reading a plan needs none of these: the cluster
    model and the inventory (the plan's own node-scoped blockers and the GC pause used to bring them), the
    twin's node specs (the estimate reads only its timing profile), a thread pool, or the temp-file module
    (and `secrets` with it) that only writers use."""
    heavy = (
        "dra_migrate.cluster.state", "dra_migrate.inventory.fleet", "dra_migrate.inventory.platform",
        "dra_migrate.sim.spec", "dra_migrate.dra.devices", "concurrent.futures", "tempfile", "secrets",
    )  # fmt: skip
    for args in (["show", _DEMO_PLAN], ["show", _DEMO_PLAN, "-o", "wide"], ["show", _DEMO_PLAN, "-o", "json"]):
        assert _loaded(args, heavy, tmp_path) == [], args


def test_reading_a_plan_the_tool_wrote_loads_no_round_trip_parser_openssl_or_archive_modules(tmp_path: Path) -> None:
    """Of `show`'s peak memory above `--version`, these were 6 MB before a byte of the plan was read: ruamel
    (the strict reader, needed only for a refusal's line), OpenSSL's libcrypto behind `hashlib` (the
    digests use CPython's own SHA-256) and bz2/lzma behind `shutil` (for the terminal's width)."""
    heavy = ("ruamel", "hashlib", "_hashlib", "shutil", "bz2", "lzma")
    shows = (["show", _DEMO_PLAN], ["show", _DEMO_PLAN, "-o", "json"], ["show", _DEMO_PLAN, "-o", "wide"])
    for args in (*shows, ["diff", _DEMO_PLAN, _DEMO_PLAN]):
        assert _loaded(args, heavy, tmp_path) == [], args


def test_next_lines_name_the_next_command(tmp_path: Path) -> None:
    inv = run("inventory", "--snapshot", DEMO, "--pool-label", "pool")
    assert f"next: dra-migrate check --snapshot {DEMO} --pool-label pool" in inv.stderr
    chk = run("check", "--snapshot", DEMO)
    assert "next:" in chk.stderr and f"dra-migrate plan --snapshot {DEMO}" in chk.stderr
    assert "--exclude-pools a100-shared-pool" in chk.stderr  # the pool whose capacity does not fit
    out = tmp_path / "p.yaml"
    pln = run("plan", "--snapshot", "fixtures/clusters/half-migrated.yaml", "--out", str(out))
    assert f"next: dra-migrate show {out}" in pln.stderr and f"dra-migrate apply {out}" in pln.stderr
    assert "next:" not in pln.stdout


# --- progress: countdown during a soak, objects read from a live cluster ---------------------------------


class _Terminal:
    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> None:
        self.text += s

    def flush(self) -> None:
        pass


def test_soak_countdown_and_listing_progress_on_a_terminal() -> None:
    from dra_migrate.cli.progress import TerminalProgress, counted, soak_ticks

    term = _Terminal()
    progress = TerminalProgress(term, every_s=0)  # type: ignore[arg-type]
    ticks = list(soak_ticks(125, 60))
    assert [r for r, _ in ticks] == [125, 65, 5] and sum(s for _, s in ticks) == 125
    for remaining, _ in ticks:
        progress.soak("pool-h100-pool/wave-1", remaining, 125)
    assert "2m05s left of 2m05s" in term.text and "5s left" in term.text
    objects = list(counted(iter([{"kind": "Node"}, {"kind": "Pod"}]), progress))
    assert len(objects) == 2 and "2 objects (Pod)" in term.text
    assert term.text.endswith("\r\x1b[K")  # the line is cleared before normal output continues


def test_no_progress_when_not_a_terminal() -> None:
    from dra_migrate.cli.progress import TerminalProgress, counted

    piped = _Terminal()
    piped.isatty = lambda: False  # type: ignore[method-assign]
    progress = TerminalProgress(piped)  # type: ignore[arg-type]
    list(counted(iter([{"kind": "Node"}]), progress))
    progress.soak("s/w", 3, 3)
    assert piped.text == ""
