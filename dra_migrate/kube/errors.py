"""The API client's error taxonomy: every failed request is a `KubeError` naming its verb and path.

Two kinds, as kopf splits them (kopf docs "Error handling": TemporaryError vs PermanentError):
- transient (`transient` is True): trying later can succeed. No response at all (`Unreachable`), or an
  answer that says "not now": 429 and 5xx other than 501 -- what client-go retries
  (k8s.io/client-go rest/with_retry.go, `IsRetryableResponse`). The client retries these itself first.
- permanent: the server understood and refused (401, 403, 404, 409, 422, ...). Retrying the same
  request cannot help; callers decide (404 on delete is fine, 409 on create means "re-read").

`ApiError` keeps the server's `Status` (reason, message, details) so an operator sees the API server's
own words, and says what to do for the two a user can fix (401, 403).
"""

from __future__ import annotations

from typing import Any

import orjson

from dra_migrate.errors import ClusterError

# What client-go retries (with_retry.go): 429 and 5xx other than 501 (Not Implemented never changes).
TRANSIENT_STATUS: frozenset[int] = frozenset({429, 500, 502, 503, 504})

_VERB = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "WATCH": "watch"}


class KubeError(ClusterError):
    """A request to the API server failed. `method` and `path` name the request."""

    transient = False

    def __init__(self, message: str, hint: str = "", *, method: str = "", path: str = "") -> None:
        super().__init__(message, hint)
        self.method = method
        self.path = path


class ApiError(KubeError):
    """The API server answered with an error; keeps its HTTP status, Status reason, message and details."""

    def __init__(self, method: str, path: str, status: int, body: bytes, retry_after: float | None = None) -> None:
        try:
            doc = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        self.status = status
        self.reason = str(doc.get("reason", ""))
        self.api_message = str(doc.get("message", ""))
        details = doc.get("details")
        self.details: dict[str, Any] = details if isinstance(details, dict) else {}
        self.retry_after = retry_after
        self.body = body
        text = f"{method} {path}: {status} {self.reason} {self.api_message or body[:200]!r}".strip()
        super().__init__(text, _hint(method, path, status, self.api_message), method=method, path=path)

    @property
    def transient(self) -> bool:  # type: ignore[override]
        return self.status in TRANSIENT_STATUS


class Unreachable(KubeError):
    """No (whole) response from the API server -- connection refused or reset, TLS cut, timeout --
    after any retries. Always transient: the request may not even have arrived."""

    transient = True


def is_transient(e: BaseException) -> bool:
    """True when the same request may succeed later (see the module's taxonomy)."""
    return isinstance(e, KubeError) and e.transient


def rbac_target(method: str, path: str) -> tuple[str, str, str]:
    """(verb, resource, API group) a request needs in RBAC terms, from its REST path:
    GET on a collection is `list`, on an object `get`; a subresource is `resource/sub`."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = (parts[1] if len(parts) > 1 else ""), parts[3:]
    else:
        return _VERB.get(method, method.lower()), path, ""
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] if rest else ""
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    verb = _VERB.get(method, method.lower())
    if method == "GET" and len(rest) == 1:
        verb = "list"
    if method == "DELETE" and len(rest) == 1:
        verb = "deletecollection"
    return verb, resource, group


def _in_namespace(path: str) -> bool:
    """Whether a REST path is inside one namespace (/api/v1/namespaces/NS/pods...), not the Namespace itself."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    return rest[:1] == ["namespaces"] and len(rest) > 2


# RBAC's refusal says who cannot do what (k8s.io/apiserver@v0.37.2 pkg/endpoints/handlers/responsewriters/
# errors.go ForbiddenStatusError: `User %q cannot %s`); admission's 403 (Pod Security, ResourceQuota, a namespace
# being deleted: admission.NewForbidden) says what it refused, and a permission would not help.
_RBAC_REFUSAL = " cannot "


def _hint(method: str, path: str, status: int, message: str = "") -> str:
    if status == 401:
        return "the API server rejected the credentials: refresh your kubeconfig credentials"
    if status == 403 and message and _RBAC_REFUSAL not in message:
        return "the API server's admission refused it (Pod Security, a ResourceQuota, a policy, the namespace's state)"
    if status == 403:
        verb, resource, group = rbac_target(method, path)
        scope = ""
        if not _in_namespace(path):
            # A RoleBinding grants its Role in its own namespace only; a request across every namespace (or on a
            # cluster-scoped object) needs a ClusterRole bound by a ClusterRoleBinding (kubernetes.io/docs
            # "Using RBAC Authorization", RoleBinding and ClusterRoleBinding). A user who may list pods in some
            # namespaces is refused the cluster-wide list an inventory makes: no partial inventory is read.
            scope = " across the cluster, with a ClusterRoleBinding (a RoleBinding grants it in one namespace only)"
        return (
            f"grant verb {verb!r} on resource {resource!r} in API group {group!r}{scope} "
            "(deploy/rbac/ holds every permission the tool needs)"
        )
    if status in TRANSIENT_STATUS:
        return "the API server is overloaded or failing: try again later"
    return ""
