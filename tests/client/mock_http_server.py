"""A scripted MCP Streamable HTTP server for the client tests, on 127.0.0.1, port 0.

`MockServer` is a stdlib `ThreadingHTTPServer` that answers both eras with just enough MCP
(server/discover, initialize, tools/list, tools/call, subscriptions/listen, the GET stream, DELETE)
and records every HTTP request with its headers. A test replaces the answer to any JSON-RPC method
(or to "GET" / "DELETE") with `@server.route(method)`; the route gets the recorded request and a
`Reply` that can answer JSON, an empty status, or an SSE stream written event by event (chunked),
wait on a gate, hold the stream open for `push()`, or wait for the client to disconnect.

Nothing sleeps: tests wait on `server.wait_for(predicate)` (a Condition notified on every recorded
request, disconnect or stream change). `close()` releases every gate, shuts every connection,
stops the server and joins every thread it started, failing loudly if one survives.

    with MockServer() as server:
        @server.route("tools/call")
        def boom(request, reply):
            reply.empty(500)
"""

from __future__ import annotations

import base64
import itertools
import socket
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import ujson

from tests._timeouts import LONG

MODERN = "2026-07-28"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
TOOLS = [{"name": "echo", "description": "Echoes its arguments.", "inputSchema": {"type": "object"}}]


@dataclass
class Recorded:
    """One HTTP request as the server saw it."""

    verb: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    message: Any = None  # the parsed JSON body, if any
    raw_headers: list[tuple[str, str]] | None = None  # as sent, duplicates included

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def header_count(self, name: str) -> int:
        return sum(1 for n, _ in self.raw_headers or [] if n.lower() == name.lower())

    @property
    def rpc_method(self) -> str | None:
        return self.message.get("method") if isinstance(self.message, dict) else None

    @property
    def rpc_id(self) -> Any:
        return self.message.get("id") if isinstance(self.message, dict) else None

    @property
    def params(self) -> dict[str, Any]:
        params = self.message.get("params") if isinstance(self.message, dict) else None
        return params if isinstance(params, dict) else {}

    @property
    def modern(self) -> bool:
        meta = self.params.get("_meta")
        return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


@dataclass
class _Held:
    """An SSE stream held open for pushes."""

    kind: str
    session: str | None
    reply: "Reply"
    key: Any = None


class Reply:
    """The route's side of one HTTP exchange."""

    def __init__(self, handler: "_Handler") -> None:
        self._handler = handler
        self._server: MockServer = handler.server.mock  # type: ignore[attr-defined]
        self._write_lock = threading.Lock()
        self._sse = False
        self.done = False

    # -- one-shot answers
    def json(self, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        body = ujson.dumps(obj).encode()
        self.raw(status, body, "application/json", headers)

    def error(self, request_id: Any, code: int, message: str, status: int = 200, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.json({"jsonrpc": "2.0", "id": request_id, "error": error}, status)

    def result(self, request_id: Any, result: Any, headers: dict[str, str] | None = None) -> None:
        self.json({"jsonrpc": "2.0", "id": request_id, "result": result}, headers=headers)

    def empty(self, status: int = 202, headers: dict[str, str] | None = None) -> None:
        self.raw(status, b"", None, headers)

    def raw(self, status: int, body: bytes, content_type: str | None, headers: dict[str, str] | None = None) -> None:
        h = self._handler
        h.send_response(status)
        if content_type:
            h.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
        h.wfile.flush()
        self.done = True

    # -- streams
    def start_sse(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        h = self._handler
        h.send_response(status)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Transfer-Encoding", "chunked")
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.flush()
        h.close_connection = True
        self._sse = True
        self.done = True

    def event(self, obj: Any = None, *, data: str | None = None, event: str | None = None, id: str | None = None, retry: int | None = None) -> bool:
        """Write one SSE event (a JSON-RPC message `obj`, or raw `data` lines); False if the client
        is gone."""
        lines = []
        if event is not None:
            lines.append(f"event: {event}")
        if id is not None:
            lines.append(f"id: {id}")
        if retry is not None:
            lines.append(f"retry: {retry}")
        text = ujson.dumps(obj) if obj is not None else data
        if text is not None:
            lines.extend(f"data: {line}" for line in text.split("\n"))
        return self.write_chunk(("\n".join(lines) + "\n\n").encode())

    def comment(self, text: str = "keep-alive") -> bool:
        return self.write_chunk(f": {text}\n".encode())

    def write_chunk(self, data: bytes) -> bool:
        with self._write_lock:
            try:
                self._handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self._handler.wfile.flush()
                return True
            except OSError:
                return False

    def end_sse(self) -> None:
        with self._write_lock:
            try:
                self._handler.wfile.write(b"0\r\n\r\n")
                self._handler.wfile.flush()
            except OSError:
                pass

    def wait_gate(self, gate: threading.Event) -> bool:
        """Wait for a test's gate (or the server's shutdown); False if the gate never opened."""
        self._server._gates.append(gate)
        gate.wait(LONG)
        return gate.is_set() and not self._server._stop.is_set()

    def wait_for_disconnect(self) -> bool:
        """Block until the client closes the connection; records ("disconnect", what)."""
        conn = self._handler.connection
        try:
            conn.settimeout(LONG)
            gone = conn.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            gone = True
        except OSError:
            gone = False
        if gone:
            self._server._note(("disconnect", self._handler.what))
        return gone

    def hold(self, kind: str, session: str | None = None, key: Any = None) -> None:
        """Keep this SSE stream open for `server.push(kind, ...)` until the client disconnects."""
        held = _Held(kind, session, self, key)
        self._server._hold(held)
        try:
            self.wait_for_disconnect()
        finally:
            self._server._unhold(held)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = LONG  # a safety net for a read that would otherwise never end
    what = "?"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_POST(self) -> None:
        self._serve("POST")

    def do_GET(self) -> None:
        self._serve("GET")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, verb: str) -> None:
        mock: MockServer = self.server.mock  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            message = ujson.loads(body) if body else None
        except ValueError:
            message = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        recorded = Recorded(verb, self.path, headers, body, message, list(self.headers.items()))
        self.what = recorded.rpc_method or verb
        mock._record(recorded)
        reply = Reply(self)
        route = mock.routes.get(recorded.rpc_method if verb == "POST" else verb)
        try:
            (route or mock.default)(recorded, reply)
        except (BrokenPipeError, ConnectionResetError):
            return
        if not reply.done:
            reply.empty(500)
        elif reply._sse:
            reply.end_sse()


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a client's whole request pool may connect at once (the default is 5)

    def __init__(self, mock: "MockServer") -> None:
        self.mock = mock
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_one, args=(request, client_address), name=f"mock-http-{next(self.mock._numbers)}", daemon=True
        )
        with self.mock._cond:
            self.mock._threads.append(thread)
            self.mock._sockets.add(request)
        thread.start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self.mock._cond:
                self.mock._sockets.discard(request)


class MockServer:
    """Answers both eras (each can be switched off) and records everything.

    Args:
        modern: serve 2026-07-28 requests (else answer them like a legacy-only server: 400 with a
            non-modern body).
        legacy: serve `initialize` and the handshake era (else 404 -32601).
        sessions: assign an Mcp-Session-Id on initialize and require it afterwards.
        get_stream: offer the handshake GET stream (else 405).
        negotiated: the version `initialize` answers with.
        supported: the modern versions accepted (others get 400 -32022).
    """

    def __init__(
        self,
        *,
        modern: bool = True,
        legacy: bool = True,
        sessions: bool = True,
        get_stream: bool = True,
        negotiated: str = "2025-06-18",
        supported: tuple[str, ...] = (MODERN,),
    ) -> None:
        self.modern, self.legacy, self.sessions, self.get_stream = modern, legacy, sessions, get_stream
        self.negotiated, self.supported = negotiated, supported
        self.routes: dict[str, Callable[[Recorded, Reply], None]] = {}
        self.requests: list[Recorded] = []
        self.notes: list[Any] = []
        self.live_sessions: set[str] = set()
        self._cond = threading.Condition()
        self._held: list[_Held] = []
        self._gates: list[threading.Event] = []
        self._threads: list[threading.Thread] = []
        self._sockets: set[socket.socket] = set()
        self._numbers = itertools.count(1)
        self._stop = threading.Event()
        self._httpd = _HttpServer(self)
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}/mcp"
        self._serving = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="mock-http-server", daemon=True)
        self._serving.start()

    # -- the test's side
    def route(self, method: str) -> Callable[[Callable[[Recorded, Reply], None]], Callable[[Recorded, Reply], None]]:
        def register(fn: Callable[[Recorded, Reply], None]) -> Callable[[Recorded, Reply], None]:
            self.routes[method] = fn
            return fn

        return register

    def wait_for(self, predicate: Callable[[], Any], timeout: float = LONG) -> Any:
        with self._cond:
            value = self._cond.wait_for(predicate, timeout)
        assert value, "the mock server never saw what the test waited for"
        return value

    def seen(self, predicate: Callable[[], Any], timeout: float = LONG) -> bool:
        """Like wait_for, for a route: False instead of an AssertionError."""
        with self._cond:
            return bool(self._cond.wait_for(lambda: predicate() or self._stop.is_set(), timeout)) and not self._stop.is_set()

    def posts(self, rpc_method: str | None = None) -> list[Recorded]:
        with self._cond:
            return [r for r in self.requests if r.verb == "POST" and (rpc_method is None or r.rpc_method == rpc_method)]

    def verbs(self, verb: str) -> list[Recorded]:
        with self._cond:
            return [r for r in self.requests if r.verb == verb]

    def held(self, kind: str) -> int:
        with self._cond:
            return sum(1 for h in self._held if h.kind == kind)

    def push(self, kind: str, message: dict[str, Any]) -> int:
        """Write `message` as an event to every held stream of `kind`; returns how many got it."""
        with self._cond:
            targets = [h for h in self._held if h.kind == kind]
        return sum(1 for h in targets if h.reply.event(message))

    def expire_sessions(self) -> None:
        with self._cond:
            self.live_sessions.clear()

    def close(self) -> None:
        """Release the gates, shut every connection, stop serving, join every thread. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        for gate in list(self._gates):
            gate.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._serving.join(LONG)
        with self._cond:
            sockets = list(self._sockets)
            threads = list(self._threads)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in threads:
            thread.join(LONG)
        alive = [t.name for t in threads + [self._serving] if t.is_alive()]
        if alive:
            raise RuntimeError(f"the mock server's threads did not stop: {alive}")

    def __enter__(self) -> "MockServer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- bookkeeping
    def _record(self, recorded: Recorded) -> None:
        with self._cond:
            self.requests.append(recorded)
            self._cond.notify_all()

    def _note(self, note: Any) -> None:
        with self._cond:
            self.notes.append(note)
            self._cond.notify_all()

    def _hold(self, held: _Held) -> None:
        with self._cond:
            self._held.append(held)
            self._cond.notify_all()

    def _unhold(self, held: _Held) -> None:
        with self._cond:
            self._held.remove(held)
            self._cond.notify_all()

    # -- default behaviour
    def default(self, request: Recorded, reply: Reply) -> None:
        if request.verb == "GET":
            return self._get(request, reply)
        if request.verb == "DELETE":
            return self._delete(request, reply)
        message = request.message
        if not isinstance(message, dict):
            return reply.error(None, -32700, "Parse error", 400)
        if "method" not in message or "id" not in message:  # a notification or a response
            if not request.modern and self.sessions and request.rpc_method != "initialize" and not self._session_ok(request, reply):
                return None
            return reply.empty(202)
        if request.modern:
            return self._modern(request, reply) if self.modern else reply.error("server-error", -32600, "Bad Request: No valid session ID provided", 400)
        if not self.legacy:
            return reply.error(request.rpc_id, -32601, f"Method not found: {request.rpc_method}", 404)
        return self._legacy(request, reply)

    def _modern(self, request: Recorded, reply: Reply) -> None:
        rid, method, params = request.rpc_id, request.rpc_method, request.params
        version = params["_meta"][META_PROTOCOL_VERSION]
        problem = None
        if request.header("MCP-Protocol-Version") != version:
            problem = "MCP-Protocol-Version does not match the body"
        elif request.header("Mcp-Method") != method:
            problem = "Mcp-Method does not match the body"
        elif method in NAMED and decode_header(request.header("Mcp-Name")) != params.get(NAMED[method]):
            problem = "Mcp-Name does not match the body"
        if problem is not None:
            return reply.error(rid, -32020, f"Header mismatch: {problem}", 400)
        if version not in self.supported:
            return reply.error(rid, -32022, "Unsupported protocol version", 400, {"supported": list(self.supported), "requested": version})
        info = {"io.modelcontextprotocol/serverInfo": {"name": "mock", "version": "1.0"}}
        if method == "server/discover":
            return reply.result(rid, {
                "resultType": "complete", "supportedVersions": list(self.supported),
                "capabilities": {"tools": {"listChanged": True}}, "ttlMs": 0, "cacheScope": "private", "_meta": info,
            })
        if method == "tools/list":
            return reply.result(rid, {"resultType": "complete", "tools": TOOLS, "ttlMs": 0, "cacheScope": "private", "_meta": info})
        if method == "tools/call":
            return self._call(request, reply, {"resultType": "complete", "_meta": info})
        if method == "subscriptions/listen":
            reply.start_sse()
            accepted = {k: v for k, v in params.get("notifications", {}).items() if v}
            reply.event({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                         "params": {"_meta": {META_SUBSCRIPTION_ID: rid}, "notifications": accepted}})
            return reply.hold("listen", key=rid)
        return reply.error(rid, -32601, f"Method not found: {method}", 404)

    def _legacy(self, request: Recorded, reply: Reply) -> None:
        rid, method = request.rpc_id, request.rpc_method
        if method == "initialize":
            headers = {}
            if self.sessions:
                session = uuid.uuid4().hex
                with self._cond:
                    self.live_sessions.add(session)
                headers["Mcp-Session-Id"] = session
            result = {"protocolVersion": self.negotiated, "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "mock", "version": "1.0"}}
            return reply.result(rid, result, headers)
        if not self._session_ok(request, reply):
            return None
        if request.header("MCP-Protocol-Version") not in (None, self.negotiated):
            return reply.error(rid, -32600, "Bad Request: unsupported MCP-Protocol-Version", 400)
        if method == "tools/list":
            return reply.result(rid, {"tools": TOOLS})
        if method == "tools/call":
            return self._call(request, reply, {})
        if method == "ping":
            return reply.result(rid, {})
        return reply.error(rid, -32601, f"Method not found: {method}")

    def _call(self, request: Recorded, reply: Reply, extra: dict[str, Any]) -> None:
        params = request.params
        arguments = ujson.dumps(params.get('arguments'), sort_keys=True, ensure_ascii=False)
        text = f"{params.get('name')}:{arguments}"
        result = {"content": [{"type": "text", "text": text}], "isError": False, **extra}
        token = (params.get("_meta") or {}).get("progressToken")
        if token is None:
            return reply.result(request.rpc_id, result)
        reply.start_sse()
        for step in (1, 2):
            reply.event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": step, "total": 2}})
        reply.event({"jsonrpc": "2.0", "id": request.rpc_id, "result": result})

    def _session_ok(self, request: Recorded, reply: Reply) -> bool:
        if not self.sessions:
            return True
        session = request.header("Mcp-Session-Id")
        if session is None:
            reply.error(request.rpc_id, -32600, "Bad Request: No valid session ID provided", 400)
            return False
        with self._cond:
            known = session in self.live_sessions
        if not known:
            reply.error(request.rpc_id, -32600, "Session not found", 404)
            return False
        return True

    def _get(self, request: Recorded, reply: Reply) -> None:
        if not self.get_stream:
            return reply.empty(405, {"Allow": "POST"})
        if not self._session_ok(request, reply):
            return None
        reply.start_sse()
        reply.comment("stream open")
        return reply.hold("get", request.header("Mcp-Session-Id"))

    def _delete(self, request: Recorded, reply: Reply) -> None:
        if not self.sessions:
            return reply.empty(405, {"Allow": "POST"})
        if not self._session_ok(request, reply):
            return None
        with self._cond:
            self.live_sessions.discard(request.header("Mcp-Session-Id"))
        return reply.empty(200)


def decode_header(value: str | None) -> str | None:
    """Undo the 2026-07-28 `=?base64?...?=` encoding of a routing header."""
    if value is not None and value.startswith("=?base64?") and value.endswith("?="):
        return base64.b64decode(value[len("=?base64?") : -2]).decode("utf-8")
    return value
