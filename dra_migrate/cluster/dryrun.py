"""`--dry-run=server`: what the live API server says of manifests, with nothing persisted.

Each object is sent as kubectl's `apply --server-side --dry-run=server` sends it: a server-side apply
PATCH (`application/apply-patch+yaml`, `fieldManager=dra-migrate`, `force=true`) with `dryRun=All`, so an
object that exists is judged as an update and a new one as a create, through the full admission and
validation chain, and nothing is stored (KEP-576, "APIServer dry-run"; the `dryRun` query parameter of
https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run). An object with only
`generateName` is a dry-run POST. The resource (plural, namespaced) of each kind comes from discovery,
one request per group/version. A 4xx answer is the server's rejection, reported per object; a server
that cannot be reached is an error of the command.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson

from dra_migrate.cluster.live import LiveCluster
from dra_migrate.kube import ApiError, path_of

Obj = dict[str, Any]
FIELD_MANAGER = "dra-migrate"
_TIMEOUT = (5.0, 30.0)


@dataclass(frozen=True)
class DryRunVerdict:
    where: str  # the file (or "<stdin>", "generated") the object came from
    ref: str  # "DeviceClass gpu.nvidia.com", "Deployment ml/train"
    accepted: bool
    message: str  # the server's reason when rejected

    def describe(self) -> str:
        if self.accepted:
            return f"{self.where}: {self.ref}: accepted by the API server (dry run)"
        return f"{self.where}: {self.ref}: rejected by the API server: {self.message}"


def status_message(data: bytes) -> str:
    """The reason of a Status body: its causes' messages, else its message, on one line."""
    try:
        status = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data[:200].decode(errors="replace")
    causes = ((status.get("details") or {}).get("causes") or []) if isinstance(status, dict) else []
    messages = [
        f"{c['field']}: {c.get('message', '')}" if c.get("field") else str(c.get("message", ""))
        for c in causes
        if isinstance(c, dict)
    ]
    if isinstance(status, dict) and not messages:
        messages = [str(status.get("message", ""))]
    return " ".join("; ".join(m for m in messages if m).split())[:400]


class _Resources:
    """kind -> (plural, namespaced) per group/version, from discovery, asked once per group/version."""

    def __init__(self, cluster: LiveCluster) -> None:
        self.cluster = cluster
        self._by_gv: dict[str, dict[str, tuple[str, bool]]] = {}

    def find(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        if api_version not in self._by_gv:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            try:
                listing = self.cluster.get(path)
            except ApiError as e:
                if e.status != 404:
                    raise
                listing = {}
            self._by_gv[api_version] = {
                str(r.get("kind")): (str(r.get("name")), bool(r.get("namespaced")))
                for r in listing.get("resources") or []
                if isinstance(r, dict) and "/" not in str(r.get("name", ""))  # subresources aside
            }
        return self._by_gv[api_version].get(kind)


def _ref(kind: str, namespace: str | None, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def dry_run(
    cluster: LiveCluster, objects: Iterable[tuple[str, Obj]], namespace: str = "default"
) -> list[DryRunVerdict]:
    """The server's verdict on each (where, object); `namespace` for namespaced objects that name none."""
    resources = _Resources(cluster)
    out = []
    for where, obj in objects:
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        raw_meta = obj.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        name = str(meta.get("name") or "")
        found = resources.find(api_version, kind)
        if found is None:
            out.append(
                DryRunVerdict(where, _ref(kind, None, name or "?"), False, f"{api_version} {kind} is not served here")
            )
            continue
        plural, namespaced = found
        ns = str(meta.get("namespace") or namespace) if namespaced else None
        ref = _ref(kind, ns, name or str(meta.get("generateName", "?")))
        out.append(_send(cluster, where, ref, path_of(api_version, plural, namespace=ns or ""), name, obj))
    return out


def _send(cluster: LiveCluster, where: str, ref: str, collection: str, name: str, obj: Obj) -> DryRunVerdict:
    query: list[tuple[str, Any]] = [("dryRun", "All"), ("fieldValidation", "Strict")]
    try:
        if name:
            cluster.kube.request(
                "PATCH",
                f"{collection}/{quote(name, safe='')}",
                query=[*query, ("fieldManager", FIELD_MANAGER), ("force", "true")],
                body=orjson.dumps(obj).decode(),  # JSON is YAML: the apply-patch body as text
                content_type="application/apply-patch+yaml",
                timeout=_TIMEOUT,
            )
        else:
            cluster.kube.request("POST", collection, query=query, body=obj, timeout=_TIMEOUT)
    except ApiError as e:
        if 400 <= e.status < 500 and e.status != 429:
            return DryRunVerdict(where, ref, False, status_message(e.body))
        raise
    return DryRunVerdict(where, ref, True, "")
