"""Server-side validation of CEL selectors: what kube-apiserver itself says, when a cluster is at hand.

Each distinct expression is sent as a DeviceClass create with `dryRun=All` (nothing is stored; KEP-576
server-side dry run runs admission and validation in full). DeviceClass validation compiles the selector
exactly as for ResourceClaims (kubernetes pkg/apis/resource/validation/validation.go
validateCELExpression: the DRA compiler, NewExpressions environment, the cost limit), so a 422 means the
selector would be refused wherever the tool writes it. The verdict is compared with the offline one
(dra_migrate.dra.cel.compile_selector); where they differ, or the offline evaluator could not tell
(UnsupportedSelectorError), the caller reports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.dryrun import status_message
from dra_migrate.cluster.live import LiveCluster, LiveOptions
from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.cel import SelectorError, UnsupportedSelectorError, compile_selector
from dra_migrate.errors import ClusterError
from dra_migrate.kube import ApiError, Unreachable

DEVICECLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
_TIMEOUT = (5.0, 30.0)


@dataclass(frozen=True)
class SelectorVerdict:
    expression: str
    offline: str  # "accepted", "rejected" or "refused" (no offline verdict)
    offline_message: str
    server: str  # "accepted", "rejected" or "unknown" (could not ask: no permission, unreachable)
    server_message: str

    @property
    def disagrees(self) -> bool:
        return self.server != "unknown" and self.offline != "refused" and self.offline != self.server

    def describe(self) -> str:
        """One line for stderr."""
        short = self.expression if len(self.expression) <= 80 else self.expression[:77] + "..."
        if self.disagrees:
            return (
                f"selector {short!r}: the API server says {self.server} ({self.server_message or 'ok'}),"
                f" the offline check says {self.offline} ({self.offline_message or 'ok'}); trust the server"
            )
        if self.offline == "refused" and self.server != "unknown":
            return f"selector {short!r}: not checked offline; the API server says {self.server} {self.server_message}"
        if self.server == "unknown":
            return f"selector {short!r}: not validated server-side: {self.server_message}"
        return f"selector {short!r}: {self.server}"


def offline_verdict(expression: str) -> tuple[str, str]:
    try:
        compile_selector(expression)
    except UnsupportedSelectorError as e:
        return "refused", str(e)
    except SelectorError as e:
        return "rejected", str(e)
    return "accepted", ""


def dry_run_body(expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"generateName": "dra-migrate-validate-"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def server_verdict(cluster: LiveCluster, expression: str) -> tuple[str, str]:
    """("accepted"|"rejected"|"unknown", message) from a dry-run DeviceClass create."""
    try:
        cluster.kube.request(
            "POST",
            DEVICECLASSES,
            query=[("dryRun", "All"), ("fieldValidation", "Strict")],
            body=dry_run_body(expression),
            timeout=_TIMEOUT,
        )
    except Unreachable as e:
        return "unknown", f"cannot reach the API server: {e.message}"
    except ApiError as e:
        message = status_message(e.body)
        if e.status == 422:
            return "rejected", message
        return "unknown", f"HTTP {e.status}: {message}"
    return "accepted", ""


def validate_selectors(cluster: LiveCluster, expressions: Iterable[str]) -> list[SelectorVerdict]:
    out = []
    for expression in dict.fromkeys(expressions):
        offline, offline_message = offline_verdict(expression)
        server, server_message = server_verdict(cluster, expression)
        out.append(SelectorVerdict(expression, offline, offline_message, server, server_message))
    return out


def validate_live(kubeconfig: Any, context: str | None, expressions: Iterable[str]) -> list[SelectorVerdict]:
    """Validate against the cluster named by --kubeconfig/--context; [] when nothing to validate."""
    exprs = list(expressions)
    if not exprs:
        return []
    try:
        cluster = LiveCluster(LiveOptions(kubeconfig, context))
    except ClusterError as e:
        return [SelectorVerdict(x, *offline_verdict(x), "unknown", e.message) for x in dict.fromkeys(exprs)]
    return validate_selectors(cluster, exprs)


def worth_reporting(verdicts: Iterable[SelectorVerdict]) -> list[SelectorVerdict]:
    """Disagreements, offline refusals the server settled, and selectors the server could not judge."""
    return [v for v in verdicts if v.disagrees or v.offline == "refused" or v.server == "unknown"]


def existing_class_selectors(state: ClusterState) -> list[str]:
    """The selector expressions of the DeviceClasses in the cluster."""
    out = []
    for dc in state.of("resource.k8s.io/DeviceClass"):
        for s in (dc.get("spec") or {}).get("selectors") or []:
            expression = (s.get("cel") or {}).get("expression") if isinstance(s, dict) else None
            if isinstance(expression, str):
                out.append(expression)
    return out


def live_selector_warnings(kubeconfig: Any, context: str | None, expressions: Iterable[str]) -> list[str]:
    """For the CLI (--kubeconfig/--context): one line per selector whose server verdict is worth saying."""
    return [v.describe() for v in worth_reporting(validate_live(kubeconfig, context, expressions))]
