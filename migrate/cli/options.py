"""Options shared by every command that reads a cluster, and loading the state they name."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from migrate.cluster.live import LiveCluster, LiveOptions, read_objects
from migrate.cluster.snapshot import load_snapshot
from migrate.cluster.state import ClusterState, StateBuilder
from migrate.cluster.templates import TemplateTable
from migrate.errors import InputError
from migrate.render import FORMATS

log = logging.getLogger("migrate")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class SourceOptions:
    snapshot: Path | None
    kubeconfig: Path | None
    context: str | None
    kubernetes_version: str | None
    templates: Path | None

    def template_table(self) -> TemplateTable:
        table = TemplateTable.builtin()
        return table.extended(self.templates) if self.templates else table


def source_options(f: F) -> F:
    """--snapshot | --kubeconfig/--context, --kubernetes-version, --templates -> `source: SourceOptions`."""

    @click.option("--snapshot", type=click.Path(path_type=Path), help="Read a snapshot file or directory.")
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
        src = SourceOptions(snapshot, kubeconfig, context, kubernetes_version, templates)
        return f(*args, source=src, **kwargs)

    return wrapper  # type: ignore[return-value]


def output_option(formats: tuple[str, ...] = FORMATS, default: str = "table") -> Callable[[F], F]:
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(formats),
        default=default,
        show_default=True,
        help="Output format.",
    )


def load_state(src: SourceOptions) -> ClusterState:
    templates = src.template_table()
    if src.snapshot:
        state = load_snapshot(src.snapshot, kubernetes_version=src.kubernetes_version, templates=templates)
    else:
        cluster = LiveCluster(LiveOptions(src.kubeconfig, src.context))
        info, objects = read_objects(cluster, templates)
        builder = StateBuilder(info, templates)
        builder.add_all(objects)
        state = builder.state
        log.info("read %d objects from %s in %d API requests", state.count(), cluster.server, cluster.requests)
    if src.snapshot and not state.of("Node"):
        # A live cluster may have no nodes yet; a snapshot without them was exported incompletely.
        raise InputError(
            f"{state.source.location}: no Node objects found",
            "a snapshot must include the nodes (kubectl get nodes -o yaml)",
        )
    return state
