"""Reading a live cluster: read-only, one paginated list sequence per kind, bounded timeouts.

Config is resolved as kubectl does: --kubeconfig, else $KUBECONFIG (a colon-separated list,
merged), else ~/.kube/config, else the in-cluster service account. Optional kinds (CRDs, newer
APIs) are listed only when discovery shows them served; one that is not installed is not an error.
Responses are parsed with orjson straight from the wire, never through the client's models
(which cost far more time and memory than the JSON itself).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from dra_migrate import __version__
from dra_migrate.cluster.kinds import ALL_KINDS, Kind
from dra_migrate.cluster.state import SourceInfo
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.errors import ClusterError, MigrateError

log = logging.getLogger(__name__)

PAGE_SIZE = 500  # kubectl's default --chunk-size
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0
USER_AGENT = f"dra-migrate/{__version__}"
_ATTEMPTS = 5
_TRANSIENT = (429, 500, 502, 503, 504)
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

    def __init__(self, opts: LiveOptions) -> None:
        self.api = _api_client(opts)
        self.requests = 0
        self.context = opts.context or _first_current_context(_kubeconfig_paths(opts))
        self.server = str(self.api.configuration.host)

    def get(self, path: str, query: list[tuple[str, Any]] | None = None, accept: str = "application/json") -> Any:
        """One GET, retried on what is transient: 429 and 5xx (honouring Retry-After) and broken
        connections, with backoff, a few times; a refused connection fails at once (nothing listens)."""
        from urllib3.exceptions import HTTPError, NewConnectionError

        method, url, headers, _, _ = self.api.param_serialize(
            "GET",
            path,
            query_params=query or [],
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
        )
        delay = 0.2
        for attempt in range(1, _ATTEMPTS + 1):
            self.requests += 1
            try:
                resp = self.api.call_api(
                    method, url, header_params=headers, _request_timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)
                )
                body = resp.read()
            except (HTTPError, OSError) as e:
                refused = isinstance(e, NewConnectionError) or "refused" in str(e).lower()
                if attempt == _ATTEMPTS or refused:
                    raise ClusterError(
                        f"cannot reach the API server at {self.server}: {_reason(e)}",
                        "check --kubeconfig/--context and that the cluster is reachable",
                    ) from e
            else:
                if resp.status < 400:
                    return orjson.loads(body)
                if resp.status not in _TRANSIENT or attempt == _ATTEMPTS:
                    raise _api_error(resp.status, body, path)
                delay = max(delay, _retry_after(resp))
            time.sleep(min(delay, 5.0))
            delay *= 2
        raise AssertionError("unreachable")

    def version(self) -> str | None:
        v = self.get("/version")
        return v.get("gitVersion") if isinstance(v, dict) else None

    def discover(self) -> dict[str, frozenset[str]]:
        """Every served group/version ("v1", "apps/v1", ...) and the resources (plurals) it serves.

        Two requests through aggregated discovery (GA in Kubernetes 1.30, KEP-3352), which lists every
        resource at once; a server without it answers with plain group lists, and then each group
        version is asked for its resources.
        """
        out: dict[str, frozenset[str]] = {}
        for path in ("/api", "/apis"):
            doc = self.get(path, accept=_AGGREGATED_DISCOVERY)
            if doc.get("kind") == "APIGroupDiscoveryList":
                for group in doc.get("items") or []:
                    name = str((group.get("metadata") or {}).get("name") or "")
                    for v in group.get("versions") or []:
                        gv = f"{name}/{v['version']}" if name else str(v["version"])
                        out[gv] = frozenset(str(r.get("resource")) for r in v.get("resources") or [])
            else:
                versions = doc.get("versions") or [
                    v["groupVersion"] for g in doc.get("groups") or [] for v in g.get("versions") or []
                ]
                for gv in versions:
                    listing = self.get(f"/api/{gv}" if path == "/api" else f"/apis/{gv}")
                    out[gv] = frozenset(str(r.get("name")) for r in listing.get("resources") or [])
        return out

    def list_kind(self, kind: Kind) -> Iterator[dict[str, Any]]:
        """Every object of a kind, page by page (limit/continue), with apiVersion/kind filled in."""
        token: str | None = None
        while True:
            query: list[tuple[str, Any]] = [("limit", PAGE_SIZE)]
            if token:
                query.append(("continue", token))
            page = self.get(kind.list_path(), query)
            for item in page.get("items") or []:
                # List responses omit apiVersion/kind on items; put them back so objects stand alone.
                item["apiVersion"] = kind.api_version
                item["kind"] = kind.kind
                yield item
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

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
        except ClusterError as e:
            log.warning("cluster identity not recorded: cannot read namespace kube-system: %s", e)
            return None
        uid = (ns.get("metadata") or {}).get("uid") if isinstance(ns, dict) else None
        return str(uid) if uid else None


def kinds_to_read(served: dict[str, frozenset[str]], templates: TemplateTable) -> list[Kind]:
    """Built-in kinds always; optional kinds (CRDs, newer APIs) and user kinds when they are served."""

    def is_served(api_version: str, plural: str) -> bool:
        return plural in served.get(api_version, frozenset())

    kinds = [k for k in ALL_KINDS if not k.optional or is_served(k.api_version, k.plural)]
    known = {k.key for k in ALL_KINDS}
    for spec in templates.user_kinds():
        if spec.kind in known or not is_served(str(spec.api_version), str(spec.plural)):
            continue
        group, _, version = str(spec.api_version).rpartition("/")
        kinds.append(Kind(group, version, spec.kind.rpartition("/")[2], str(spec.plural), spec.namespaced, True))
    return kinds


def read_objects(cluster: LiveCluster, templates: TemplateTable) -> tuple[SourceInfo, Iterator[dict[str, Any]]]:
    served = cluster.discover()
    info = cluster.source_info(tuple(sorted(served)))

    def stream() -> Iterator[dict[str, Any]]:
        for kind in kinds_to_read(served, templates):
            yield from cluster.list_kind(kind)

    return info, stream()


def _api_client(opts: LiveOptions) -> Any:
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    from dra_migrate.cluster.kubeconfig import check_kubeconfig

    explicit = opts.kubeconfig is not None
    path = _kubeconfig_paths(opts)
    check_kubeconfig(path)  # malformed: one line naming the file and the line or key
    try:
        if explicit or _any_exists(path):
            context = opts.context or _first_current_context(path)
            api = config.new_client_from_config(config_file=path, context=context)  # type: ignore[no-untyped-call]
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api = client.ApiClient()
        else:
            raise ClusterError(
                "no kubeconfig found (looked at $KUBECONFIG, ~/.kube/config and the in-cluster service account)",
                "pass --kubeconfig PATH or --snapshot PATH",
            )
    except ConfigException as e:
        raise ClusterError(f"cannot use kubeconfig {path}: {e}", "check --kubeconfig and --context") from e
    except OSError as e:
        raise ClusterError(f"cannot read kubeconfig {path}: {e.strerror}", "check --kubeconfig") from e
    api.user_agent = USER_AGENT
    return api


def _kubeconfig_paths(opts: LiveOptions) -> str:
    """--kubeconfig, else $KUBECONFIG (a list), else ~/.kube/config: as kubectl resolves it."""
    return str(opts.kubeconfig) if opts.kubeconfig else os.environ.get("KUBECONFIG") or "~/.kube/config"


def _first_current_context(paths: str) -> str | None:
    """kubectl's rule for a merged $KUBECONFIG: the first file that sets current-context wins
    (kubectl config docs, "Merging kubeconfig files"); the Python client's merger takes a later one."""
    from dra_migrate.cluster.yamlio import load_yaml_documents

    for p in paths.split(os.pathsep):
        f = Path(p).expanduser()
        if not p or not f.is_file():
            continue
        try:
            docs = list(load_yaml_documents(f.read_text(), str(f)))
        except (OSError, MigrateError):
            continue  # the client reports an unreadable kubeconfig itself
        current = docs[0].get("current-context") if docs and isinstance(docs[0], dict) else None
        if current:
            return str(current)
    return None


def _retry_after(resp: Any) -> float:
    try:
        return float(resp.getheader("Retry-After") or 0)
    except (TypeError, ValueError, AttributeError):
        return 0.0


def _any_exists(paths: str) -> bool:
    return any(Path(p).expanduser().exists() for p in paths.split(os.pathsep) if p)


def _reason(e: BaseException) -> str:
    reason = getattr(e, "reason", None)
    text = str(reason or e)
    return text.split(": ", 1)[-1] if len(text) > 200 else text


def _api_error(status: int, body: bytes, path: str) -> ClusterError:
    """An error that quotes the API server's Status message and says which permission is missing."""
    message = ""
    try:
        decoded = orjson.loads(body or b"{}")
        message = str(decoded.get("message", "")) if isinstance(decoded, dict) else ""
    except orjson.JSONDecodeError:
        pass
    resource = path.rsplit("/", 1)[-1]
    group = path.split("/")[2] if path.startswith("/apis/") else ""
    if status == 403:
        return ClusterError(
            f"forbidden: cannot list {resource} in API group {group!r}: {message or 'RBAC refused'}",
            f"grant verb 'list' on resource {resource!r} in API group {group!r} "
            "(deploy/rbac/readonly.yaml holds every permission the tool needs to read)",
        )
    if status == 401:
        return ClusterError(
            "unauthorized: the API server rejected the credentials", "refresh your kubeconfig credentials"
        )
    return ClusterError(f"GET {path} failed: HTTP {status} {message}".rstrip(), "check the API server's health")
