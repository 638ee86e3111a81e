"""The one Kubernetes API client (the only package that imports `kubernetes`).

- `connect()` / `new_api_client()`: kubeconfig resolution (as kubectl), user agent `dra-migrate/<version>`.
- `Kube`: JSON requests with one retry policy (`RetryPolicy`), one rate limit (`RateLimit`, QPS/burst
  defaults `DEFAULT_QPS`/`DEFAULT_BURST`), counters (`Stats`).
- errors: `KubeError` (`ApiError` keeps the server's Status; `Unreachable`), `transient` on each.
- `Informer`: list+watch of one kind with selectors, resumed from the last resourceVersion, re-listed on 410.

docs/architecture.md says where to add an API call.
"""

from dra_migrate.kube.client import (
    DEFAULT_BURST,
    DEFAULT_QPS,
    DEFAULT_TIMEOUT,
    NO_RETRIES,
    PAGE_SIZE,
    READ_RETRIES,
    USER_AGENT,
    WRITE_RETRIES,
    Kube,
    Obj,
    Query,
    RateLimit,
    RetryPolicy,
    Stats,
    path_of,
    thread_request_seconds,
)
from dra_migrate.kube.config import connect, current_context, kubeconfig_paths, new_api_client
from dra_migrate.kube.errors import TRANSIENT_STATUS, ApiError, KubeError, Unreachable, is_transient, rbac_target
from dra_migrate.kube.stream import WatchStream
from dra_migrate.kube.watch import (
    ADDED,
    DELETED,
    MODIFIED,
    Event,
    Informer,
    NamespaceIndex,
    NodeIndex,
    object_key,
    selector_query,
)

__all__ = [
    "ADDED",
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "DEFAULT_TIMEOUT",
    "DELETED",
    "MODIFIED",
    "NO_RETRIES",
    "PAGE_SIZE",
    "READ_RETRIES",
    "TRANSIENT_STATUS",
    "USER_AGENT",
    "WRITE_RETRIES",
    "ApiError",
    "Event",
    "Informer",
    "Kube",
    "KubeError",
    "NamespaceIndex",
    "NodeIndex",
    "Obj",
    "Query",
    "RateLimit",
    "RetryPolicy",
    "Stats",
    "Unreachable",
    "WatchStream",
    "connect",
    "current_context",
    "is_transient",
    "kubeconfig_paths",
    "new_api_client",
    "object_key",
    "path_of",
    "rbac_target",
    "selector_query",
    "thread_request_seconds",
]
