"""Raw HTTP requests to a `Server.start_http` endpoint, as a tasks client sends them in either era.

No mcpsync client: every header and body is written here, so a test states exactly what went over
the wire (and an attack can send what no client would). An answer may come as JSON or as an event
stream; `Answer` is the JSON-RPC message either way, with the HTTP status.
"""

from __future__ import annotations

import http.client
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from mcpsync.protocol.versions import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from mcpsync.tasks.record import TASKS_EXTENSION

from .._timeouts import LONG
from ..sse_stream import SseStream

MODERN = "2026-07-28"
EXTENSION = {"extensions": {TASKS_EXTENSION: {}}}
NAMED = {"tools/call": "name", "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


@dataclass
class Answer:
    """One request's answer: the HTTP status, and the JSON-RPC response (None for none)."""

    status: int
    message: dict[str, Any] | None
    others: list[dict[str, Any]] = field(default_factory=list)
    """What came on the request's event stream before the response (notifications, requests)."""

    @property
    def result(self) -> dict[str, Any]:
        assert self.message is not None and "result" in self.message, (self.status, self.message)
        result: dict[str, Any] = self.message["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert self.message is not None and "error" in self.message, (self.status, self.message)
        error: dict[str, Any] = self.message["error"]
        return error

    @property
    def code(self) -> int:
        return int(self.error["code"])


class Endpoint:
    """The `/mcp` endpoint on a loopback port; `token` goes as a bearer token when given."""

    def __init__(self, port: int, token: str | None = None) -> None:
        self.port = port
        self.token = token
        self._ids = itertools.count(1)

    def send(self, body: Any, headers: dict[str, str]) -> http.client.HTTPResponse:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=LONG)
        sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
        if self.token is not None:
            sent["Authorization"] = f"Bearer {self.token}"
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        connection.request("POST", "/mcp", data, sent)
        return connection.getresponse()

    def post(self, body: Any, headers: dict[str, str]) -> Answer:
        """Send one frame and read its whole answer."""
        response = self.send(body, headers)
        kind = response.getheader("Content-Type") or ""
        if kind.startswith("text/event-stream"):
            stream = SseStream(response)
            others = []
            try:
                while True:
                    message = stream.message()[1]
                    if "id" in message and "method" not in message:
                        return Answer(response.status, message, others)
                    others.append(message)
            finally:
                stream.close()
        raw = response.read()
        if not kind.startswith("application/json"):  # the HTTP server's own refusal (413, 431, ...)
            return Answer(response.status, None)
        return Answer(response.status, json.loads(raw) if raw.strip() else None)

    # -- 2026-07-28 ------------------------------------------------------------------------------
    def modern(self, method: str, params: dict[str, Any] | None = None, *, capabilities: dict[str, Any] | None = None,
               name: str | None = None, headers: dict[str, str] | None = None) -> Answer:
        """A 2026-07-28 request; `capabilities` default to the tasks extension's; `Mcp-Name`
        mirrors the body unless `name` is given."""
        params = dict(params or {})
        params["_meta"] = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: EXTENSION if capabilities is None else capabilities,
                           **params.get("_meta", {})}
        sent = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        mirrored = params.get(NAMED[method]) if method in NAMED else None
        if name is not None:
            sent["Mcp-Name"] = name
        elif isinstance(mirrored, str):
            sent["Mcp-Name"] = mirrored
        return self.post({"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}, {**sent, **(headers or {})})

    # -- the handshake era -----------------------------------------------------------------------
    def session(self, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> Session:
        params = {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": {"name": "tasks-test", "version": "1"}}
        answer = self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, {"MCP-Protocol-Version": version})
        session_id = answer.getheader("Mcp-Session-Id")
        kind = answer.getheader("Content-Type") or ""
        if kind.startswith("text/event-stream"):
            stream = SseStream(answer)
            initialized = stream.message()[1]
            stream.close()
        else:
            initialized = json.loads(answer.read())
        assert answer.status == 200 and session_id is not None, (answer.status, initialized)
        session = Session(self, session_id, version, initialized["result"])
        note = self.send({"jsonrpc": "2.0", "method": "notifications/initialized"}, session.headers)
        note.read()
        assert note.status == 202
        return session


class Session:
    """A handshake-era session of the endpoint."""

    def __init__(self, endpoint: Endpoint, session_id: str, version: str, initialized: dict[str, Any]) -> None:
        self.endpoint = endpoint
        self.id = session_id
        self.version = version
        self.initialized = initialized
        self._ids = itertools.count(1)

    @property
    def headers(self) -> dict[str, str]:
        return {"MCP-Protocol-Version": self.version, "Mcp-Session-Id": self.id}

    def frame(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}

    def request(self, method: str, params: dict[str, Any] | None = None) -> Answer:
        return self.endpoint.post(self.frame(method, params), self.headers)

    def request_raw(self, method: str, params_json: str) -> Answer:
        """A request whose params are written out as given (JSON no encoder here would write)."""
        body = f'{{"jsonrpc": "2.0", "id": {next(self._ids)}, "method": "{method}", "params": {params_json}}}'
        return self.endpoint.post(body.encode(), self.headers)

    def stream(self, method: str, params: dict[str, Any] | None = None) -> SseStream:
        """A request whose answer is read event by event (a tasks/result carrying questions)."""
        return SseStream(self.endpoint.send(self.frame(method, params), self.headers))

    def reply(self, request_id: Any, result: dict[str, Any]) -> None:
        """Answer a request the server sent on a stream."""
        answer = self.endpoint.send({"jsonrpc": "2.0", "id": request_id, "result": result}, self.headers)
        answer.read()
        assert answer.status == 202, answer.status
