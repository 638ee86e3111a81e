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
