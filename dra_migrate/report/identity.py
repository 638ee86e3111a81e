"""Who ran the report: the Kubernetes identity the API server sees, from a SelfSubjectReview.

A SelfSubjectReview (authentication.k8s.io/v1, GA in 1.28) is created, not stored: the server answers
with the caller's `userInfo` whatever the credential (token, certificate, exec plugin, OIDC). Only the
username and groups are kept; `extra` can carry credential ids and is left out.
"""

from __future__ import annotations

from typing import Any, Protocol

from dra_migrate.report.model import Identity

PATH = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
BODY = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


class Creates(Protocol):
    def create(self, path: str, body: Any, query: Any = ...) -> dict[str, Any]: ...


def who_am_i(api: Creates) -> Identity:
    review = api.create(PATH, BODY)
    user = (review.get("status") or {}).get("userInfo") or {}
    return Identity(str(user.get("username") or "(anonymous)"), [str(g) for g in user.get("groups") or []])
