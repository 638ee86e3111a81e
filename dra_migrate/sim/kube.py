"""The simulator's view of the API client: `dra_migrate.kube` (one implementation of requests, errors,
retries and watches) plus what only the simulator needs: its user agent, timestamps, object copies.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dra_migrate
from dra_migrate import kube as _kube
from dra_migrate.kube import ApiError, Kube, Obj, Query, path_of

# Its own user agent, so audit logs tell the simulator's writes from the tool's.
USER_AGENT = f"dra-migrate-sim/{dra_migrate.__version__}"

__all__ = [
    "USER_AGENT",
    "ApiError",
    "Kube",
    "Obj",
    "Query",
    "new_api_client",
    "now_rfc3339",
    "path_of",
    "strip_server_fields",
]


def new_api_client(kubeconfig: Path | str, user_agent: str = USER_AGENT, *, pool_size: int | None = None) -> Any:
    """`dra_migrate.kube.new_api_client` with the simulator's user agent by default."""
    return _kube.new_api_client(kubeconfig, user_agent, pool_size=pool_size)


def now_rfc3339(micro: bool = False) -> str:
    """Timestamps as the API writes them (MicroTime for Leases, Time elsewhere)."""
    t = time.time()
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    return f"{base}.{int((t % 1) * 1e6):06d}Z" if micro else f"{base}Z"


# Metadata the server fills in: an object sent back with these is rejected or misread. Finalizers go
# too, since no controller runs here to remove them.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
)


def strip_server_fields(obj: Mapping[str, Any]) -> Obj:
    """A copy of `obj` fit to create: no server-populated metadata, no status, no ownerReferences."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    meta.pop("ownerReferences", None)
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}
