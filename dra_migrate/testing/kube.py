"""A fake of the `kubernetes` ApiClient surface that `dra_migrate.kube.Kube` uses (`param_serialize`,
`call_api`, `configuration.host`), answering from a script: for unit tests of retries, errors and the
informer without a server. Integration tests use the real control plane instead (tests/integration)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import orjson


@dataclass
class FakeResponse:
    """An HTTP answer: a JSON body, or (a watch) a list of events sent one line each."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[dict[str, Any]] | None = None
    released: bool = False

    def read(self) -> bytes:
        if self.body is None:
            return b""
        return self.body if isinstance(self.body, bytes) else orjson.dumps(self.body)

    @property
    def response(self) -> FakeResponse:  # the urllib3 response a RESTResponse wraps
        return self

    def stream(self, amt: int = 65536, decode_content: bool = True) -> Iterator[bytes]:
        for event in self.events or []:
            yield orjson.dumps(event) + b"\n"

    def release_conn(self) -> None:
        self.released = True


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A metav1.Status body as the API server sends it."""
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message}  # fmt: skip


class FakeApiClient:
    """Answers each request with `handler(call)`: a FakeResponse, or an exception to raise (a broken
    connection). Every request is recorded in `calls`."""

    def __init__(self, handler: Callable[[Call], FakeResponse | BaseException], host: str = "https://fake.invalid"):
        self.handler = handler
        self.calls: list[Call] = []
        self.configuration = type("Configuration", (), {"host": host})()
        self.user_agent = "fake"

    @classmethod
    def scripted(cls, *answers: FakeResponse | BaseException) -> FakeApiClient:
        """Answers in turn; the last one repeats."""
        queue = list(answers)

        def next_answer(_call: Call) -> FakeResponse | BaseException:
            return queue.pop(0) if len(queue) > 1 else queue[0]

        return cls(next_answer)

    def param_serialize(self, **kw: Any) -> tuple[str, str, dict[str, str], Any, None]:
        query = kw.get("query_params") or []
        url = kw["resource_path"] + ("?" + urlencode(query) if query else "")
        return kw["method"], url, dict(kw.get("header_params") or {}), kw.get("body"), None

    def call_api(self, method: str, url: str, header_params: dict[str, str] | None = None, body: Any = None,
                 **_kw: Any) -> FakeResponse:  # fmt: skip
        path, _, qs = url.partition("?")
        call = Call(method, path, dict(parse_qsl(qs)), dict(header_params or {}), body)
        self.calls.append(call)
        answer = self.handler(call)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class FakeConfigMaps:
    """ConfigMaps as the API server keeps them, for the in-cluster journal's unit tests: create (409 when
    the name exists), get, list with an equality label selector, and JSON merge patch (409 when the
    patch's `metadata.resourceVersion` is not the object's). Each write bumps a cluster-wide
    resourceVersion. `lose_answer`: the next n writes land but their answer never arrives (a broken
    connection after the server stored it). Use `client()` as the ApiClient."""

    PREFIX = "/api/v1/namespaces/"

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 100
        self.lose_answer = 0
        self.writes = 0

    def client(self) -> FakeApiClient:
        return FakeApiClient(self.handle)

    def _stored(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        self.writes += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return orjson.loads(orjson.dumps(obj))  # type: ignore[no-any-return]

    def _answer(self, obj: dict[str, Any], code: int = 200) -> FakeResponse | BaseException:
        if self.lose_answer > 0:
            self.lose_answer -= 1
            return ConnectionResetError("connection reset by peer (the write landed)")
        return FakeResponse(code, obj)

    def handle(self, call: Call) -> FakeResponse | BaseException:
        rest = call.path[len(self.PREFIX) :].split("/")
        if not call.path.startswith(self.PREFIX) or len(rest) < 2 or rest[1] != "configmaps":
            return FakeResponse(404, status(404, "NotFound", f"no such path {call.path}"))
        ns, name = rest[0], (rest[2] if len(rest) > 2 else "")
        key = (ns, name)
        if call.method == "GET" and not name:
            wanted = dict(p.split("=", 1) for p in call.query.get("labelSelector", "").split(",") if p)
            field_name = call.query.get("fieldSelector", "").removeprefix("metadata.name=")
            items = [o for (n, name_), o in sorted(self.objects.items()) if n == ns and all(
                ((o["metadata"].get("labels") or {}).get(k) == v) for k, v in wanted.items())
                and (not field_name or name_ == field_name)]  # fmt: skip
            return FakeResponse(200, {"kind": "ConfigMapList", "metadata": {"resourceVersion": str(self.rv)},
                                      "items": items})  # fmt: skip
        if call.method == "GET":
            obj = self.objects.get(key)
            return FakeResponse(200, obj) if obj else FakeResponse(404, status(404, "NotFound", f"{name} not found"))
        if call.method == "POST":
            body = orjson.loads(orjson.dumps(call.body))
            key = (ns, body["metadata"]["name"])
            if key in self.objects:
                return FakeResponse(409, status(409, "AlreadyExists", f"configmaps {key[1]!r} already exists"))
            self.objects[key] = self._stored(body)
            return self._answer(self.objects[key], 201)
        if call.method == "PATCH":
            obj = self.objects.get(key)
            if obj is None:
                return FakeResponse(404, status(404, "NotFound", f"{name} not found"))
            patch = call.body
            want = (patch.get("metadata") or {}).get("resourceVersion")
            if want is not None and want != obj["metadata"]["resourceVersion"]:
                return FakeResponse(409, status(409, "Conflict", "the object has been modified"))
            obj.setdefault("data", {}).update(patch.get("data") or {})
            self.objects[key] = self._stored(obj)
            return self._answer(self.objects[key])
        return FakeResponse(405, status(405, "MethodNotAllowed", call.method))
