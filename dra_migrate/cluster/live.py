"""Reading a live cluster: read-only, one paginated list sequence per kind, bounded timeouts.

Config is resolved as kubectl does: --kubeconfig, else $KUBECONFIG (a colon-separated list,
merged), else ~/.kube/config, else the in-cluster service account. Optional kinds (CRDs, newer
APIs) are listed only when discovery shows them served; one that is not installed is not an error.
Requests, retries (reads fail fast when nothing listens), rate limit and errors are the API client's
(`dra_migrate.kube`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dra_migrate.cluster.configrefs import ConfigMapsInUse
from dra_migrate.cluster.kinds import ALL_KINDS, Kind, version_priority
from dra_migrate.cluster.state import SourceInfo
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.errors import ClusterError, MigrateError
from dra_migrate.kube import (
    DEFAULT_TIMEOUT,
    READ_RETRIES,
    ApiError,
    Kube,
    KubeError,
    connect,
    current_context,
    kubeconfig_paths,
)

log = logging.getLogger(__name__)

_AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)


@dataclass(frozen=True)
class LiveOptions:
    kubeconfig: Path | None = None
    context: str | None = None


class LiveCluster:
    """A read-only connection to one cluster. Counts the HTTP requests it makes."""

    unavailable: dict[str, str]  # group versions whose discovery failed (`discover`), and why

    def __init__(self, opts: LiveOptions) -> None:
        from dra_migrate.cluster.kubeconfig import check_kubeconfig

        self.unavailable = {}
        check_kubeconfig(kubeconfig_paths(opts.kubeconfig))  # malformed: one line naming the file, line or key
        self.kube: Kube = connect(opts.kubeconfig, opts.context, retry=READ_RETRIES)
        self.context = opts.context or current_context(kubeconfig_paths(opts.kubeconfig))
        self.server = self.kube.server

    @property
    def api(self) -> Any:
        """The underlying ApiClient (for `Kube` wrappers that share the connection)."""
        return self.kube.api_client

    @property
    def requests(self) -> int:
        return self.kube.stats.requests

    def get(self, path: str, query: list[tuple[str, Any]] | None = None, accept: str = "application/json") -> Any:
        """One GET with the read policy: 429/5xx/broken connections retried, a refused one fails at once."""
        return self.kube.get(path, query or [], accept=accept, timeout=DEFAULT_TIMEOUT)

    def version(self) -> str | None:
        v = self.get("/version")
        return v.get("gitVersion") if isinstance(v, dict) else None

    def discover(self) -> dict[str, frozenset[str]]:
        """Every served group/version ("v1", "apps/v1", ...) and the resources (plurals) it serves.

        Two requests through aggregated discovery (GA in Kubernetes 1.30, KEP-3352), which lists every
        resource at once; a server without it answers with plain group lists, and then each group
        version is asked for its resources.

        A group version that cannot say what it serves -- an aggregated API whose backend is down answers 503,
        or aggregated discovery marks it `freshness: Stale` (k8s.io/api@v0.37.2 apidiscovery/v2/types.go) -- is
        left out and kept in `unavailable` (group version -> why), as client-go goes on with the groups that
        answered (k8s.io/client-go@v0.37.2 discovery/discovery_client.go `ErrGroupDiscoveryFailed`,
        discovery/aggregated_discovery.go `StaleGroupVersionError`): a metrics-server that is down does not stop
        the read. `kinds_to_read` refuses one that holds a kind the tool reads.
        """
        out: dict[str, frozenset[str]] = {}
        self.unavailable = {}
        for path in ("/api", "/apis"):
            doc = self.get(path, accept=_AGGREGATED_DISCOVERY)
            if doc.get("kind") == "APIGroupDiscoveryList":
                for group in doc.get("items") or []:
                    name = str((group.get("metadata") or {}).get("name") or "")
                    for v in group.get("versions") or []:
                        gv = f"{name}/{v['version']}" if name else str(v["version"])
                        if v.get("freshness") == "Stale":
                            self.unavailable[gv] = "its discovery document is Stale (the API's backend did not answer)"
                            continue
                        out[gv] = frozenset(str(r.get("resource")) for r in v.get("resources") or [])
            else:
                versions = doc.get("versions") or [
                    v["groupVersion"] for g in doc.get("groups") or [] for v in g.get("versions") or []
                ]
                for gv in versions:
                    try:
                        listing = self.get(f"/api/{gv}" if path == "/api" else f"/apis/{gv}")
                    except KubeError as e:
                        if isinstance(e, ApiError) and e.status in (401, 403):
                            raise  # the credentials, not the group: every group would say the same
                        self.unavailable[gv] = str(e)
                        continue
                    out[gv] = frozenset(str(r.get("name")) for r in listing.get("resources") or [])
        for gv, why in sorted(self.unavailable.items()):
            log.warning("API %s is unavailable, its kinds are not discovered: %s", gv, why)
        return out

    def list_kind(self, kind: Kind) -> Iterator[dict[str, Any]]:
        """Every object of a kind, page by page (limit/continue), with apiVersion/kind filled in.

        An optional kind whose list answers 404 before any page (its CRD removed after discovery: `helm upgrade`
        of an operator replaces its CRDs) is none when discovery, asked again, agrees it is gone; when it still
        lists it (an API server behind the load balancer that has not caught up), the 404 fails the read."""
        read = False
        try:
            for page in self.kube.pages(kind.list_path()):
                read = True
                for item in page.get("items") or []:
                    # List responses omit apiVersion/kind on items; put them back so objects stand alone.
                    item["apiVersion"] = kind.api_version
                    item["kind"] = kind.kind
                    yield item
        except ApiError as e:
            if read or not kind.optional or e.status != 404 or not self._gone(kind):
                raise
            log.warning("%s %s: no longer served (removed since discovery): none read", kind.group, kind.kind)

    def _gone(self, kind: Kind) -> bool:
        served = self.discover()
        if any(_group(gv) == kind.group for gv in self.unavailable):
            return False
        return _as_served(kind, served) is None

    def source_info(self, served: tuple[str, ...]) -> SourceInfo:
        return SourceInfo(
            kind="live",
            location=self.server,
            context=self.context,
            kubernetes_version=self.version(),
            taken_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            served_apis=served,
            cluster_uid=self.cluster_uid(),
        )

    def cluster_uid(self) -> str | None:
        """The kube-system Namespace's uid: the cluster's identity (cluster/identity.py). None, with a
        warning, when the credentials may not read it (deploy/rbac/readonly.yaml grants it)."""
        try:
            ns = self.get("/api/v1/namespaces/kube-system")
        except MigrateError as e:
            log.warning("cluster identity not recorded: cannot read namespace kube-system: %s", e)
            return None
        uid = (ns.get("metadata") or {}).get("uid") if isinstance(ns, dict) else None
        return str(uid) if uid else None


def kinds_to_read(
    served: dict[str, frozenset[str]], templates: TemplateTable, unavailable: Mapping[str, str] | None = None
) -> list[Kind]:
    """Built-in kinds always; optional kinds (CRDs, newer APIs) and user kinds when they are served, at the
    version the table names or, where the cluster no longer (or not yet) serves that one, at the version
    of the same group it serves them at (`served_version`).

    `unavailable`: group versions whose discovery failed (`LiveCluster.discover`). One in the group of a kind
    read here fails the read: whether that kind is there cannot be told, and reading on as if it were not would
    present an inventory without it as complete."""
    kinds = [k for k in (_as_served(k, served) for k in ALL_KINDS) if k is not None]
    candidates = list(ALL_KINDS)
    known = {k.key for k in ALL_KINDS}
    for spec in templates.user_kinds():
        if spec.kind in known:
            continue
        group, _, version = str(spec.api_version).rpartition("/")
        user = Kind(group, version, spec.kind.rpartition("/")[2], str(spec.plural), spec.namespaced, True)
        candidates.append(user)
        if (found := _as_served(user, served)) is not None:
            kinds.append(found)
    _refuse_unknown(candidates, unavailable or {})
    return kinds


def _refuse_unknown(kinds: list[Kind], unavailable: Mapping[str, str]) -> None:
    for gv, why in sorted(unavailable.items()):
        names = sorted({k.kind for k in kinds if k.group and k.group == _group(gv)})
        if names:
            raise ClusterError(
                f"cannot tell whether the cluster serves {', '.join(names)}: API {gv} is unavailable: {why}",
                f"run again once {gv} answers (kubectl get apiservice {gv.partition('/')[2]}.{_group(gv)}); "
                "a snapshot taken now would leave its objects out",
            )


def _as_served(kind: Kind, served: dict[str, frozenset[str]]) -> Kind | None:
    """The kind as this cluster serves it; None for an optional kind it does not serve at any version.

    A CRD's versions come and go: Kueue serves its queues at v1beta2 and keeps v1beta1 only as deprecated
    (sigs.k8s.io/kueue v0.17.0 `apis/kueue/v1beta1`, `+kubebuilder:deprecatedversion`), and a release that
    drops it leaves them served at v1beta2 alone. Listing only the table's version then read none of them,
    without a word, and every finding about them was missing. The objects are read at the version served
    (the snapshot reader takes any version of a known kind; fields renamed in it are not read, which the
    warning says)."""
    if not kind.optional or kind.plural in served.get(kind.api_version, frozenset()):
        return kind
    others = [
        gv.rpartition("/")[2] for gv, plurals in served.items() if _group(gv) == kind.group and kind.plural in plurals
    ]
    if not others:
        return None
    version = max(others, key=version_priority)
    log.warning(
        "%s %s is not served at %s, the version this tool reads; read at %s (fields it renamed are not read)",
        kind.group, kind.kind, kind.version, version,
    )  # fmt: skip
    return dataclasses.replace(kind, version=version)


def _group(group_version: str) -> str:
    return group_version.rpartition("/")[0]


def read_objects(cluster: LiveCluster, templates: TemplateTable) -> tuple[SourceInfo, Iterator[dict[str, Any]]]:
    served = cluster.discover()
    kinds = kinds_to_read(served, templates, cluster.unavailable)  # before any list: refuse early
    info = cluster.source_info(tuple(sorted(served)))

    def stream() -> Iterator[dict[str, Any]]:
        # ConfigMaps last: by then every DaemonSet and ClusterPolicy has been seen, so each ConfigMap is
        # kept or dropped as it arrives (cluster/configrefs.py) and none is held in memory.
        in_use = ConfigMapsInUse()
        for kind in [k for k in kinds if k.key != "ConfigMap"]:
            for obj in cluster.list_kind(kind):
                in_use.note(obj)
                yield obj
        for kind in [k for k in kinds if k.key == "ConfigMap"]:
            yield from (cm for cm in cluster.list_kind(kind) if in_use.used(cm))

    return info, stream()
