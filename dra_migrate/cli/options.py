"""Options shared by every command that reads a cluster, and loading the state they name."""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dra_migrate.errors import InputError
from dra_migrate.render import FORMATS, Document, emit, terminal_width, to_json, to_names, to_yaml, use_color

if TYPE_CHECKING:  # imported where used: the kubernetes client and the state model are slow to import
    from dra_migrate.cluster.state import ClusterState
    from dra_migrate.cluster.templates import TemplateTable

log = logging.getLogger("dra_migrate")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class SourceOptions:
    snapshot: Path | None
    kubeconfig: Path | None
    context: str | None
    kubernetes_version: str | None
    templates: Path | None

    def template_table(self) -> TemplateTable:
        from dra_migrate.cluster.templates import TemplateTable

        table = TemplateTable.builtin()
        return table.extended(self.templates) if self.templates else table


def source_options(f: F) -> F:
    """--snapshot | --kubeconfig/--context, --kubernetes-version, --templates -> `source: SourceOptions`."""

    @click.option(
        "--snapshot", type=click.Path(path_type=Path), help="Read a snapshot file or directory (-: standard input)."
    )
    @click.option("--kubeconfig", type=click.Path(path_type=Path), help="Read a live cluster (default: as kubectl).")
    @click.option("--context", help="The kubeconfig context to use.")
    @click.option("--kubernetes-version", help="The server version a snapshot came from (e.g. v1.37.2).")
    @click.option("--templates", type=click.Path(path_type=Path), help="Extra pod-template paths for your CRDs.")
    @functools.wraps(f)
    def wrapper(
        *args: Any,
        snapshot: Path | None,
        kubeconfig: Path | None,
        context: str | None,
        kubernetes_version: str | None,
        templates: Path | None,
        **kwargs: Any,
    ) -> Any:
        if snapshot and (kubeconfig or context):
            raise InputError("--snapshot cannot be combined with --kubeconfig/--context", "choose one source")
        if kubernetes_version is not None:
            from dra_migrate.inventory.fleet import parse_version

            # Not one (`abc`, `v1`) read as an unknown version: every version-gated finding judged on nothing.
            if parse_version(kubernetes_version) is None:
                raise InputError(
                    f"--kubernetes-version {kubernetes_version!r} is not a Kubernetes version",
                    "write it as kubectl version prints the server's, e.g. v1.37.2",
                )
        src = SourceOptions(snapshot, kubeconfig, context, kubernetes_version, templates)
        return f(*args, source=src, **kwargs)

    return wrapper  # type: ignore[return-value]


# A DeviceClass name is a DNS subdomain (k8s.io/api v0.37.2 resource/v1 types.go, DeviceClass: "Must be a DNS
# subdomain"; apimachinery pkg/util/validation IsDNS1123Subdomain): lower case, digits, '-' and '.', at most 253.
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*", re.ASCII)


def label_keys(_ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """A click callback: every value a label key (--pool-label). One that is not (`''`, `a b`) selected no
    node, and the `next:` line carried it on unquoted."""
    from dra_migrate.plan.params import label_key_problem

    for value in values:
        if (problem := label_key_problem(value)) is not None:
            raise click.BadParameter(f"{value!r} is not a label key ({problem})", param=param)
    return values


def pool_label_option(help: str = "Node label that names a pool.") -> Callable[[F], F]:
    """`--pool-label KEY` (repeatable), each value checked as a label key: one declaration for every command
    that groups nodes into pools (inventory, check, match, plan)."""
    return click.option("--pool-label", "pool_labels", multiple=True, metavar="KEY", callback=label_keys, help=help)


def class_names(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: a DeviceClass name, or a comma-separated list of them (--device-class, --fallback).
    One that is not a DNS subdomain (`''`, `a b`, `GPU`) was written into every converted manifest, which
    the API server then refuses."""
    if value is None:
        return None
    for name in value.split(","):
        name = name.strip()
        if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
            raise click.BadParameter(
                f"{name!r} is not a DeviceClass name (lower case, digits, '-' and '.'; kubectl get deviceclasses)",
                param=param,
            )
    return value


def _flag(param: click.Parameter) -> str:
    return next((o for o in param.opts if o.startswith("--")), param.opts[0] if param.opts else str(param.name))


def duration(*, zero_ok: bool = False) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """A click callback: a duration option (`--drain-timeout 10m`) judged as it is parsed, naming the option
    (`bad --drain-timeout '-5m': not a duration`), before a command decides it has nothing to do (rollback
    with no journal) or connects (probe)."""

    def callback(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        from dra_migrate.plan.params import checked_duration

        if value is not None:
            checked_duration(_flag(param), value, zero_ok=zero_ok)
        return value

    return callback


# A namespace is a DNS label (apimachinery v0.37.2 pkg/api/validation ValidateNamespaceName: IsDNS1123Label).
_DNS1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?", re.ASCII)


def namespace_name(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: a namespace (`--lock-namespace`, probe's `--namespace`). `''` or `a b` went into
    the request path (`/namespaces//leases/...`) for the API server to refuse, or was ignored."""
    if value is not None and (len(value) > 63 or not _DNS1123_LABEL.fullmatch(value)):
        raise click.BadParameter(f"{value!r} is not a namespace name (lower case, digits and '-')", param=param)
    return value


def driver_name(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: a DRA driver name (ResourceSlice spec.driver: a DNS subdomain of at most 63)."""
    if value is not None and (len(value) > 63 or not _DNS1123_SUBDOMAIN.fullmatch(value)):
        raise click.BadParameter(f"{value!r} is not a DRA driver name (e.g. gpu.nvidia.com)", param=param)
    return value


def resource_name(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: an extended resource name (a qualified name with a domain, as nvidia.com/gpu:
    k8s.io/kubernetes v1.37.2 pkg/apis/core/helper IsExtendedResourceName)."""
    from dra_migrate.plan.params import label_key_problem

    if value is not None and ("/" not in value or label_key_problem(value) is not None):
        raise click.BadParameter(f"{value!r} is not an extended resource name (e.g. nvidia.com/gpu)", param=param)
    return value


def finite(_ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A click callback: a number that is one (`--qps nan` is not a rate)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number", param=param)
    return value


def check_given_kubeconfig(kubeconfig: Path, context: str | None = None) -> None:
    """An explicit --kubeconfig: every file of it there (kubectl refuses one that is not: `stat ...: no such
    file or directory`) and a kubeconfig the client loads with `context` (`cluster/kubeconfig.py`), checked
    before a command decides it has nothing to do, and before it connects (loading connects to nothing).
    A pipe (`<(sops -d ...)`) is read once, and kept for the client."""
    from dra_migrate.cluster.kubeconfig import checked_api_client

    for p in str(kubeconfig).split(os.pathsep):
        if p and not Path(p).expanduser().exists():
            raise InputError(f"kubeconfig {p}: no such file", "check --kubeconfig")
        if p and Path(p).expanduser().is_dir():
            raise InputError(f"kubeconfig {p}: a directory, not a file", "pass the kubeconfig file to --kubeconfig")
    checked_api_client(kubeconfig, context)


def output_option(
    formats: tuple[str, ...] = FORMATS, default: str = "table", names: str = "", deprecated_format: bool = False
) -> Callable[[F], F]:
    """`-o/--output FORMAT`, the same vocabulary on every command that prints data (README "Output").

    `names`: what `-o name` lists. `deprecated_format`: also accept the old `--format` (hidden)."""
    help_text = "Output format" + ("; table fits the terminal, wide shows every column" if "wide" in formats else "")
    if "name" in formats and names:
        help_text += f"; name lists {names}"
    option = click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(formats),
        default=default,
        show_default=True,
        help=help_text + ".",
    )
    if not deprecated_format:
        return option

    def both(f: F) -> F:
        legacy = click.option("--format", "legacy_format", type=click.Choice(formats), hidden=True, default=None)

        @functools.wraps(f)
        def wrapper(*args: Any, output: str, legacy_format: str | None, **kwargs: Any) -> Any:
            if legacy_format is not None:
                click.echo(f"warning: --format is deprecated: use -o/--output {legacy_format}", err=True)
                output = legacy_format
            return f(*args, output=output, **kwargs)

        return option(legacy(wrapper))  # type: ignore[return-value]

    return both


# The format a file's extension names, for `--out FILE` without `-o`.
_EXTENSION_FORMATS = {
    ".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown", ".json": "json",
    ".yaml": "yaml", ".yml": "yaml", ".txt": "table",
}  # fmt: skip


def output_for_file(out: Path | None, output: str, formats: tuple[str, ...]) -> str:
    """The format to write `--out FILE` in: `-o` when given; else the one FILE's extension names (r.html ->
    html), so a report is never written as markdown into a .html file. `-o` and an extension that name two
    formats are refused rather than guessed between."""
    if out is None:
        return output
    named = _EXTENSION_FORMATS.get(out.suffix.lower())
    if named not in formats:
        return output
    ctx = click.get_current_context(silent=True)
    source = ctx.get_parameter_source("output") if ctx is not None else None
    explicit = source is not None and source is not click.core.ParameterSource.DEFAULT
    if ctx is not None and ctx.params.get("legacy_format") is not None:
        explicit = True
    if not explicit:
        return str(named)
    if output != named:
        raise InputError(
            f"-o {output} and --out {out} name two formats ({output} and {named})",
            f"drop -o to write {named}, or name the file for {output}",
        )
    return output


def next_step(command: str) -> None:
    """The closing `next:` line (stderr) that names the command to run after this one."""
    click.echo(f"next: {re.sub(' {2,}', ' ', command).strip()}", err=True)


def source_args(src: SourceOptions) -> str:
    """The source options as the user gave them, for a `next:` line."""
    given = [
        ("--snapshot", src.snapshot),
        ("--kubeconfig", src.kubeconfig),
        ("--context", src.context),
        ("--kubernetes-version", src.kubernetes_version),
        ("--templates", src.templates),
    ]
    return " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in given if value)


def print_data(
    output: str, data: Any, document: Callable[[], Document], names: Callable[[], list[str]] | None = None
) -> None:
    """Print `data` in the `-o` format; the human formats are built from the same data, so they agree."""
    if output == "json":
        emit(to_json(data))
    elif output == "yaml":
        emit(to_yaml(data))
    elif output == "name":
        emit(to_names(names() if names is not None else []))
    else:
        emit(document().pieces(output, color=use_color(sys.stdout), width=terminal_width(sys.stdout)))


STDIN = "-"
STDIN_FILE = Path("/dev/stdin")  # read as any pipe is: once, as it comes (`plan.stream.scan`)


def plan_argument(
    name: str = "plan_file", metavar: str = "PLAN", *, only_reads: bool, required: bool = True
) -> Callable[[F], F]:
    """A command's plan file. `-` is stdin for a command that only reads the plan (`git show
    main:plans/prod.yaml | dra-migrate show -`), as it is for `--snapshot -` and `convert -`. apply, rollback,
    status and unlock find the plan's journal beside its file (`<plan>.journal.jsonl`): they need the file."""

    def stdin(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
        if value is None or str(value) != STDIN:
            return value
        if not only_reads:
            raise InputError(
                f"{ctx.info_name} keeps the plan's journal beside its file, and `-` (stdin) has none",
                "save the plan to a file and pass its path",
            )
        return STDIN_FILE

    return click.argument(name, metavar=metavar, required=required, type=click.Path(path_type=Path), callback=stdin)


def refuse_stdin_twice(*paths: Path | str | None) -> None:
    """stdin is read once: two inputs cannot both be `-`."""
    if sum(p is not None and str(p) in (STDIN, str(STDIN_FILE)) for p in paths) > 1:
        raise InputError("`-` (stdin) is given for two inputs, and stdin can be read once", "save one to a file")


def read_plan(path: Path) -> dict[str, Any]:
    """A plan file, read and verified by the codec (`plan.io.load`, which refuses an edit), saying so on a
    terminal when that takes a while: every command that reads a plan reads it here (`show` streams its
    tables through `plan.stream` instead, under the same line)."""
    from dra_migrate.cli.progress import Working
    from dra_migrate.plan import io as plan_io

    with Working(f"reading {path}"):
        return plan_io.load(path)


def load_state(src: SourceOptions) -> ClusterState:
    from dra_migrate.cli.progress import TerminalProgress, Working, counted
    from dra_migrate.cluster.live import LiveCluster, LiveOptions, read_objects
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.cluster.state import StateBuilder

    templates = src.template_table()
    if src.snapshot:
        # Every command that reads a snapshot reads it here: 10,000 nodes of 50 pods take 10-25 s (issue 29).
        with Working(f"reading {src.snapshot}"):
            state = load_snapshot(src.snapshot, kubernetes_version=src.kubernetes_version, templates=templates)
    else:
        cluster = LiveCluster(LiveOptions(src.kubeconfig, src.context))
        info, objects = read_objects(cluster, templates)
        builder = StateBuilder(info, templates)
        builder.add_all(counted(objects, TerminalProgress()))  # a large fleet takes a while: say so
        state = builder.state
        log.info("read %d objects from %s in %d API requests", state.count(), cluster.server, cluster.requests)
    if src.snapshot and not state.of("Node"):
        # A live cluster may have no nodes yet; a snapshot without them was exported incompletely.
        raise InputError(
            f"{state.source.location}: no Node objects found",
            "a snapshot must include the nodes (kubectl get nodes -o yaml)",
        )
    return state


def _journal_state_option() -> Callable[[F], F]:
    from dra_migrate.execute.journals import AUTO, STATES

    return click.option(
        "--state",
        type=click.Choice(STATES),
        default=AUTO,
        show_default=True,
        help="Where apply's journal lives: a file beside the plan (report: or --journal), ConfigMaps in "
        "--lock-namespace (docs/in-cluster.md), or auto: in the cluster when run in a pod on its ServiceAccount "
        "and no journal file lies beside the plan, else a file.",
    )


def journal_state_option(f: F) -> F:
    """apply, rollback, status and report: one definition, so their --state cannot drift apart. Made
    when a command using it is defined: the journals module brings the API client (~0.1 s of imports)
    that `show`, `diff` and the other commands importing this module never need."""
    return _journal_state_option()(f)
