"""The HTTP transport's header and status rules, without sockets.

The pure rules (`_rules`, `_headers`) are tested table by table; the status code each
kind of request gets is tested by calling the WSGI application directly with a built environ
(the engine still runs on the transport's worker threads, which every test shuts down).
"""

from __future__ import annotations

import base64
import io
import json
import threading
from typing import Any, Iterable

import pytest

from mcpsync import Context, Server, Service, Tool
from mcpsync.protocol.jsonrpc import McpError, Request
from mcpsync.protocol.versions import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, Envelope, Era
from mcpsync.protocol.param_headers import invalid_annotation, param_headers
from mcpsync.transport.http._headers import check_routing_headers, decode_value
from mcpsync.transport.http._rules import Headers, accepts, error_status, rebinding_refusal, route
from mcpsync.transport.http._sessions import SessionTable
from mcpsync.transport.http._stream import Exchange
from mcpsync.protocol import jsonrpc

from .._timeouts import LONG, SHORT

pytestmark = pytest.mark.timeout(60)

MODERN = "2026-07-28"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "days": {"type": "integer", "x-mcp-header": "Days"},
        "metric": {"type": "boolean", "x-mcp-header": "Metric"},
        "note": {"type": "string"},
    },
}


# -- pure rules ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/json, text/event-stream", (True, True)),
        ("text/event-stream, application/json", (True, True)),
        ("application/json", (True, False)),
        ("text/event-stream", (False, True)),
        ("*/*", (True, True)),
        ("application/*, text/*", (True, True)),
        ("application/json;q=0.9, text/event-stream;q=0", (True, False)),
        ("text/html", (False, False)),
        (None, (True, True)),  # no Accept at all accepts anything (RFC 9110)
    ],
)
def test_accept_header(accept: str | None, expected: tuple[bool, bool]) -> None:
    assert accepts(accept) == expected


@pytest.mark.parametrize(
    ("params", "version_header", "era"),
    [
        ({"_meta": {META_PROTOCOL_VERSION: MODERN}}, None, Era.MODERN),  # the body decides first
        ({"_meta": {META_PROTOCOL_VERSION: MODERN}}, "2025-11-25", Era.MODERN),
        ({}, MODERN, Era.MODERN),  # a modern header without an envelope: told -32602, not served legacy
        ({}, "1900-01-01", Era.MODERN),
        ({}, "2025-06-18", Era.HANDSHAKE),
        ({}, None, Era.HANDSHAKE),
    ],
)
def test_routing_by_body_then_header(params: dict[str, Any], version_header: str | None, era: Era) -> None:
    assert route(Request(1, "tools/list", params), version_header) is era


@pytest.mark.parametrize(
    ("code", "modern", "handshake"),
    [(-32700, 400, 200), (-32600, 400, 200), (-32602, 400, 200), (-32020, 400, 200), (-32021, 400, 200), (-32022, 400, 200), (-32601, 404, 200), (-32603, 200, 200), (-32002, 200, 200)],
)
def test_error_status_by_era(code: int, modern: int, handshake: int) -> None:
    assert error_status(code, Era.MODERN) == modern
    assert error_status(code, Era.HANDSHAKE) == handshake


def _env(host: str = "127.0.0.1:8000", origin: str | None = None, remote: str = "127.0.0.1") -> dict[str, Any]:
    env = {"HTTP_HOST": host, "REMOTE_ADDR": remote}
    if origin is not None:
        env["HTTP_ORIGIN"] = origin
    return env


@pytest.mark.parametrize(
    ("env", "hosts", "origins", "refused"),
    [
        (_env(), None, None, False),
        (_env("localhost:8000"), None, None, False),
        (_env("[::1]:8000", remote="::1"), None, None, False),
        (_env("evil.example.com"), None, None, True),  # DNS rebinding: a loopback peer naming another host
        (_env("evil.example.com:8000", origin="http://evil.example.com:8000"), None, None, True),
        (_env(origin="http://evil.example.com"), None, None, True),
        (_env(origin="http://localhost:5173"), None, None, False),  # a local web app
        (_env(origin="http://127.0.0.1:8000"), None, None, False),
        (_env("mcp.example.com"), ["mcp.example.com"], None, False),  # behind a local reverse proxy
        (_env("mcp.example.com:443"), ["mcp.example.com:8443"], None, True),
        (_env("mcp.example.com"), ["*"], None, False),
        (_env("mcp.example.com", remote="10.1.2.3"), None, None, False),  # not loopback, no list: any host
        (_env("other.example.com", remote="10.1.2.3"), ["mcp.example.com"], None, True),
        (_env("mcp.example.com", "https://mcp.example.com", remote="10.1.2.3"), None, None, False),  # same origin
        (_env("mcp.example.com", "https://app.example.com", remote="10.1.2.3"), None, None, True),
        (_env("mcp.example.com", "https://app.example.com", remote="10.1.2.3"), None, ["https://app.example.com"], False),
        (_env(origin="null"), None, None, True),
    ],
)
def test_dns_rebinding_rules(env: dict[str, Any], hosts: list[str] | None, origins: list[str] | None, refused: bool) -> None:
    reason = rebinding_refusal(env, frozenset(hosts) if hosts is not None else None, frozenset(origins) if origins is not None else None)
    assert (reason is not None) is refused, reason


def _b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("plain", "plain"),
        (_b64("Hello"), "Hello"),
        (_b64(" spaced ü "), " spaced ü "),
        ("=?base64?SGVsbG8?=", None),  # missing padding
        ("=?base64?SGVs!!!bG8=?=", None),  # not base64
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),  # no suffix: a literal
        ("SGVsbG8=?=", "SGVsbG8=?="),  # no prefix: a literal
    ],
)
def test_header_value_decoding(raw: str, decoded: str | None) -> None:
    assert decode_value(raw) == decoded


def _check(method: str, params: dict[str, Any], given: dict[str, str], schema: Any = None) -> McpError | None:
    request = Request(1, method, params)
    envelope = Envelope(params.get("_version", MODERN), {}, None, None)
    try:
        check_routing_headers({k.lower(): v for k, v in given.items()}, request, envelope, lambda name: param_headers(schema))
    except McpError as exc:
        assert exc.code == -32020
        return exc
    return None


BASE = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "weather"}


@pytest.mark.parametrize(
    ("method", "params", "given", "ok"),
    [
        ("tools/list", {}, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}, True),
        ("tools/list", {}, {"Mcp-Method": "tools/list"}, False),  # no version header
        ("tools/list", {"_version": "v999.0.0"}, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}, False),
        ("tools/list", {}, {"MCP-Protocol-Version": MODERN}, False),  # no method header
        ("tools/list", {}, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "prompts/list"}, False),
        ("tools/list", {}, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "TOOLS/LIST"}, False),  # values are case-sensitive
        ("tools/call", {"name": "weather"}, BASE, True),
        ("tools/call", {"name": "weather"}, {**BASE, "Mcp-Name": "wrong_tool_name"}, False),
        ("tools/call", {"name": "weather"}, {k: v for k, v in BASE.items() if k != "Mcp-Name"}, False),
        ("tools/call", {"name": "wetter ☀"}, {**BASE, "Mcp-Name": _b64("wetter ☀")}, True),
        ("prompts/get", {"name": "review"}, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "prompts/get", "Mcp-Name": "review"}, True),
        ("resources/read", {"uri": "file:///a"}, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "resources/read", "Mcp-Name": "file:///a"}, True),
        ("resources/read", {"uri": "file:///a"}, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "resources/read", "Mcp-Name": "file:///b"}, False),
    ],
)
def test_standard_routing_headers(method: str, params: dict[str, Any], given: dict[str, str], ok: bool) -> None:
    assert (_check(method, params, given) is None) is ok


@pytest.mark.parametrize(
    ("arguments", "extra", "ok"),
    [
        ({"region": "north"}, {"Mcp-Param-Region": "north"}, True),
        ({"region": "north"}, {}, False),  # value in the body, header omitted
        ({}, {"Mcp-Param-Region": "north"}, False),  # header without a value
        ({"region": None}, {}, True),  # null counts as absent
        ({"region": "north"}, {"Mcp-Param-Region": "south"}, False),
        ({"region": "Hello"}, {"Mcp-Param-Region": _b64("Hello")}, True),
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVsbG8?="}, False),  # bad padding never matches
        ({"days": 42}, {"Mcp-Param-Days": "42.0"}, True),  # integers compare numerically
        ({"days": 42}, {"Mcp-Param-Days": "42.5"}, False),
        ({"metric": True}, {"mcp-param-metric": "true"}, True),  # header names are case-insensitive
        ({"metric": False}, {"Mcp-Param-Metric": "False"}, False),
        ({"note": "x"}, {}, True),  # not annotated: nothing to mirror
    ],
)
def test_mcp_param_headers_mirror_annotated_arguments(arguments: dict[str, Any], extra: dict[str, str], ok: bool) -> None:
    assert (_check("tools/call", {"name": "weather", "arguments": arguments}, {**BASE, **extra}, WEATHER_SCHEMA) is None) is ok


def test_a_schema_with_invalid_annotations_is_not_checked() -> None:
    bad = {"type": "object", "properties": {"ratio": {"type": "number", "x-mcp-header": "Ratio"}}}
    assert invalid_annotation(bad) is not None
    assert _check("tools/call", {"name": "weather", "arguments": {"ratio": 0.5}}, BASE, bad) is None


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "bad name"}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}},
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}},
        {"type": "string", "x-mcp-header": "Root"},
    ],
)
def test_invalid_x_mcp_header_annotations(schema: dict[str, Any]) -> None:
    assert invalid_annotation(schema) is not None


def test_header_values_lose_surrounding_whitespace() -> None:
    assert dict(Headers({"HTTP_MCP_NAME": "  weather  ", "CONTENT_TYPE": "application/json", "PATH_INFO": "/"})) == {"mcp-name": "weather", "content-type": "application/json"}
    assert Headers({"HTTP_MCP_NAME": "weather"}).get("Mcp-Name") == "weather"  # any case


# -- the application, called directly -------------------------------------------------------------------

class Reply:
    def __init__(self, status: str, response_headers: list[tuple[str, str]], body: Iterable[bytes]) -> None:
        self.status = int(status.split()[0])
        self.headers = {name.lower(): value for name, value in response_headers}
        self.body = body

    @property
    def streaming(self) -> bool:
        return self.headers.get("content-type") == "text/event-stream"

    def json(self) -> Any:
        data = b"".join(self.body)
        return json.loads(data) if data.strip() else None

    def events(self) -> Iterable[dict[str, Any]]:
        """The JSON-RPC messages of an SSE body, as they come (comments and a priming event's
        empty data skipped)."""
        for chunk in self.body:
            for line in chunk.split(b"\n"):
                if line.startswith(b"data: ") and line[6:].strip():
                    yield json.loads(line[6:])


def call(app: Any, method: str = "POST", body: Any = b"", *, path: str = "/mcp", **given: str | None) -> Reply:
    """Call the WSGI app once; `given` sets headers by their HTTP name with `_` for `-`
    (None removes a default one)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    env: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.input": io.BytesIO(raw),
        "CONTENT_LENGTH": str(len(raw)),
        "CONTENT_TYPE": "application/json",
        "HTTP_HOST": "127.0.0.1:8000",
        "HTTP_ACCEPT": "application/json, text/event-stream",
    }
    for name, value in given.items():
        key = name.upper() if name.upper() in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + name.upper()
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    captured: list[Any] = []
    body_iter = app(env, lambda status, response_headers, exc_info=None: captured.extend([status, response_headers]))
    return Reply(captured[0], captured[1], body_iter)


def envelope(**extra: Any) -> dict[str, Any]:
    return {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}, **extra}


def modern(app: Any, method: str, params: dict[str, Any] | None = None, *, id: Any = 1, **given: str | None) -> Reply:
    params = dict(params or {})
    params.setdefault("_meta", envelope())
    routing: dict[str, str | None] = {"MCP_PROTOCOL_VERSION": MODERN, "MCP_METHOD": method}
    if method in ("tools/call", "prompts/get") and "name" in params:
        routing["MCP_NAME"] = params["name"]
    return call(app, body={"jsonrpc": "2.0", "id": id, "method": method, "params": params}, **{**routing, **given})


def legacy(app: Any, method: str, params: dict[str, Any] | None = None, *, id: Any = 1, session: str | None = None, **given: str | None) -> Reply:
    frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if id is not None:
        frame["id"] = id
    if session is not None:
        given["MCP_SESSION_ID"] = session
    return call(app, body=frame, **given)


def initialize(app: Any) -> str:
    reply = legacy(app, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    assert reply.status == 200 and reply.json()["result"]["protocolVersion"] == "2025-11-25"
    return reply.headers["mcp-session-id"]


class Gates:
    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.cancelled = threading.Event()

    def on_cancel(self) -> None:
        self.cancelled.set()
        self.release.set()


@pytest.fixture
def gates() -> Gates:
    return Gates()


@pytest.fixture
def server(gates: Gates) -> Server:
    service = Service("rules")

    @service.tool
    def echo(text: str) -> str:
        return text

    @service.tool
    def hold(ctx: Context) -> str:
        """Report progress, then wait for the test to release it (or a cancel)."""
        ctx.progress(1, 2, "started")
        gates.started.set()
        ctx.on_cancel(gates.on_cancel)
        gates.release.wait(LONG)
        return "released"

    @service.tool
    def quiet(ctx: Context) -> str:
        """Wait silently for the test to release it (or a cancel)."""
        gates.started.set()
        ctx.on_cancel(gates.on_cancel)
        gates.release.wait(LONG)
        return "done"

    @service.tool
    def stubborn(ctx: Context) -> str:
        """Notices a cancel but goes on until the test releases it."""
        gates.started.set()
        ctx.on_cancel(gates.cancelled.set)
        gates.release.wait(LONG)
        return "finished anyway"

    service.add_tool(Tool(lambda: "ok", name="needs_elicitation", requires={"elicitation": {}}))
    service.add_tool(Tool(lambda region: region, name="weather", input_schema=WEATHER_SCHEMA))
    return Server("rules", services=[service], shutdown_timeout=LONG)


@pytest.fixture
def app(server: Server, gates: Gates) -> Iterable[Any]:
    app = server.wsgi_app(keepalive=0.2)
    yield app
    gates.release.set()
    assert app.shutdown(LONG)


@pytest.mark.parametrize(
    ("method", "params", "given", "status", "code"),
    [
        ("server/discover", {}, {}, 200, None),
        ("server/discover", {"_meta": None}, {}, 400, -32602),  # no envelope, modern header
        ("server/discover", {"_meta": {META_PROTOCOL_VERSION: MODERN}}, {}, 400, -32602),
        ("server/discover", {"_meta": envelope(**{META_PROTOCOL_VERSION: "v999.0.0"})}, {}, 400, -32020),  # header before version
        ("server/discover", {"_meta": envelope(**{META_PROTOCOL_VERSION: "1900-01-01"})}, {"MCP_PROTOCOL_VERSION": "1900-01-01"}, 400, -32022),
        ("server/discover", {}, {"MCP_METHOD": None}, 400, -32020),
        ("no/such/method", {}, {}, 404, -32601),
        ("ping", {}, {}, 404, -32601),
        ("logging/setLevel", {"level": "info"}, {}, 404, -32601),
        ("resources/subscribe", {"uri": "x:/"}, {}, 404, -32601),
        ("initialize", {"protocolVersion": MODERN, "capabilities": {}}, {}, 404, -32601),
        ("tools/call", {"name": "nope"}, {}, 400, -32602),
        ("tools/call", {"name": "needs_elicitation"}, {}, 400, -32021),
        ("tools/call", {"name": "echo"}, {"MCP_NAME": "wrong_tool_name"}, 400, -32020),
        ("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, {"MCP_NAME": "  echo  "}, 200, None),
        ("tools/call", {"name": "weather", "arguments": {"region": "n"}}, {}, 400, -32020),  # Mcp-Param-Region missing
        ("tools/call", {"name": "weather", "arguments": {"region": "n"}}, {"MCP_PARAM_REGION": "n"}, 200, None),
        ("resources/read", {"uri": "nothing:/here"}, {"MCP_NAME": "nothing:/here"}, 400, -32602),
    ],
)
def test_modern_status_codes(app: Any, method: str, params: dict[str, Any], given: dict[str, Any], status: int, code: int | None) -> None:
    if params.get("_meta", "") is None:
        params = {k: v for k, v in params.items() if k != "_meta"}
        reply = call(app, body={"jsonrpc": "2.0", "id": 7, "method": method, "params": params}, MCP_PROTOCOL_VERSION=MODERN, MCP_METHOD=method)
    else:
        reply = modern(app, method, params, id=7, **given)
    assert reply.status == status
    assert reply.headers["content-type"] == "application/json"
    answer = reply.json()
    assert answer["id"] == 7
    assert (answer.get("error") or {}).get("code") == code, answer


def test_discover_and_initialize_advertise_change_notifications_over_http(app: Any) -> None:
    capabilities = modern(app, "server/discover").json()["result"]["capabilities"]
    assert capabilities["tools"] == {"listChanged": True} and capabilities["resources"] == {"subscribe": True, "listChanged": True}
    reply = legacy(app, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
    assert reply.json()["result"]["capabilities"]["prompts"] == {"listChanged": True}


@pytest.mark.parametrize(
    ("body", "given", "status", "code"),
    [
        (b"{not json", {}, 400, -32700),
        (b"[]", {}, 400, -32600),  # batches are not supported
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, {"MCP_PROTOCOL_VERSION": MODERN}, 400, -32600),  # a posted response
        ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, {"MCP_PROTOCOL_VERSION": MODERN}, 202, None),
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, {"MCP_PROTOCOL_VERSION": "1900-01-01"}, 400, -32022),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"CONTENT_TYPE": "text/plain"}, 415, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"ACCEPT": "application/json"}, 406, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"ACCEPT": "text/event-stream"}, 406, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"HOST": "evil.example.com"}, 403, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"ORIGIN": "https://evil.example.com"}, 403, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"CONTENT_LENGTH": None}, 411, -32600),
    ],
)
def test_http_level_refusals(app: Any, body: Any, given: dict[str, Any], status: int, code: int | None) -> None:
    reply = call(app, body=body, **given)
    assert reply.status == status
    if code is None:
        assert reply.json() is None
    else:
        assert reply.json()["error"]["code"] == code


def test_a_body_over_the_limit_is_413(server: Server) -> None:
    app = server.wsgi_app(max_body_bytes=1024)
    try:
        reply = call(app, body=b"{" + b" " * 2000 + b"}")
        assert reply.status == 413
    finally:
        assert app.shutdown(LONG)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_are_post_only_in_2026(app: Any, method: str) -> None:
    for given in ({}, {"MCP_PROTOCOL_VERSION": MODERN, "MCP_SESSION_ID": "anything"}):
        reply = call(app, method, **given)
        assert reply.status == 405 and reply.headers["allow"] == "POST"
    assert call(app, "PUT").status == 405


def test_other_paths_are_404_or_the_fallback_app(server: Server) -> None:
    assert call(server.wsgi_app(), path="/elsewhere").status == 404

    def fallback(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"the other app: " + environ["PATH_INFO"].encode()]

    mounted = server.wsgi_app(path="/api/mcp/", fallback=fallback)
    other = call(mounted, "GET", path="/index.html")
    assert other.status == 200 and b"".join(other.body) == b"the other app: /index.html"
    assert modern(mounted, "server/discover").status == 200
    assert server.shutdown(LONG)


def test_handshake_sessions(app: Any) -> None:
    assert legacy(app, "tools/list").status == 400  # no session id
    assert legacy(app, "tools/list", session="unknown").status == 404
    session = initialize(app)
    assert len(session) >= 32 and session.isascii() and " " not in session
    assert legacy(app, "notifications/initialized", id=None, session=session).status == 202
    listed = legacy(app, "tools/list", session=session, MCP_PROTOCOL_VERSION="2025-11-25")
    assert listed.status == 200 and "resultType" not in listed.json()["result"]
    failed = legacy(app, "tools/call", {"name": "nope"}, session=session)
    assert failed.status == 200 and failed.json()["error"]["code"] == -32602  # in-band in the handshake era
    assert legacy(app, "ping", session=session).json()["result"] == {}
    assert call(app, "DELETE", MCP_SESSION_ID=session).status == 204
    assert legacy(app, "tools/list", session=session).status == 404
    assert call(app, "DELETE", MCP_SESSION_ID=session).status == 404


def test_sessions_expire_when_idle_and_are_capped() -> None:
    now = [100.0]
    table = SessionTable(idle_timeout=10.0, max_sessions=2, capacity=4, clock=lambda: now[0])
    first, second = table.new(), table.new()
    assert first is not None and second is not None and first.id != second.id
    table.add(first)
    table.add(second)
    assert table.find(first.id) is first and table.find(second.id) is second
    assert table.new() is None  # full of sessions used within the eviction grace (test_http_sessions.py)
    busy = Exchange(Request(1, "tools/call"), streams=True, capacity=4)
    assert table.begin(second, busy)
    now[0] += 11.0
    assert table.find(first.id) is None  # idle too long: gone, and its stream ended
    assert first.events.closed
    assert table.find(second.id) is second  # a request in flight keeps it alive
    table.end(second, busy)
    assert table.new() is not None  # room again
    now[0] += 11.0
    assert table.find(second.id) is None


def test_progress_turns_the_answer_into_an_event_stream(app: Any, gates: Gates) -> None:
    params = {"name": "hold", "_meta": envelope(progressToken="p")}
    gates.release.set()
    reply = modern(app, "tools/call", params)
    assert reply.status == 200 and reply.streaming
    assert reply.headers["x-accel-buffering"] == "no"
    events = list(reply.events())
    assert [e.get("method") for e in events] == ["notifications/progress", None]
    assert events[-1]["result"]["content"][0]["text"] == "released"


def test_a_silent_request_becomes_a_stream_after_the_keepalive_interval(app: Any, gates: Gates) -> None:
    reply = modern(app, "tools/call", {"name": "quiet"})  # returns once the 0.2 s passed in silence
    assert reply.streaming
    body = iter(reply.body)
    chunks = [next(body), next(body)]  # the stream opens, then a keep-alive comment
    gates.release.set()
    chunks += list(body)
    assert any(chunk.startswith(b":") for chunk in chunks)  # comments while it ran
    assert json.loads(chunks[-1].split(b"data: ")[1])["result"]["content"][0]["text"] == "done"


def test_closing_the_stream_cancels_the_request(app: Any, gates: Gates) -> None:
    reply = modern(app, "tools/call", {"name": "hold", "_meta": envelope(progressToken="p")})
    assert reply.streaming
    body = iter(reply.body)
    assert b"notifications/progress" in next(body)
    reply.body.close()  # what the WSGI server does when a write fails: the client went away
    assert gates.cancelled.wait(LONG)


def test_a_request_past_its_timeout_is_cancelled_and_answered(server: Server, gates: Gates) -> None:
    app = server.wsgi_app(request_timeout=SHORT, keepalive=LONG)
    try:
        reply = modern(app, "tools/call", {"name": "quiet"})
        answer = reply.json()
        assert reply.status == 200 and answer["error"]["code"] == -32603 and "timed out" in answer["error"]["message"]
        assert gates.cancelled.wait(LONG)
    finally:
        gates.release.set()
        assert app.shutdown(LONG)


def test_listen_acknowledges_first_then_delivers_tagged_changes_then_completes_on_shutdown(server: Server) -> None:
    app = server.wsgi_app(keepalive=LONG)
    reply = modern(app, "subscriptions/listen", {"notifications": {"toolsListChanged": True, "promptsListChanged": False}}, id="L")
    assert reply.status == 200 and reply.streaming
    events = reply.events()
    ack = next(events)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {"_meta": {"io.modelcontextprotocol/subscriptionId": "L"}, "notifications": {"toolsListChanged": True}}
    server.refresh_prompts()  # not asked for
    server.refresh_tools()
    changed = next(events)
    assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "L"}}}
    stopper = threading.Thread(target=app.shutdown, args=(LONG,))
    stopper.start()
    final = next(events)
    assert final["id"] == "L" and final["result"]["resultType"] == "complete"
    assert final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L"
    assert list(events) == []
    reply.body.close()
    stopper.join(LONG)
    assert app.wait(0)
    assert call(app, body={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status == 503


def test_listen_needs_an_event_stream_and_respects_the_caps(server: Server) -> None:
    app = server.wsgi_app(subscription_cap=1, keepalive=LONG)
    try:
        first = modern(app, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=1)
        assert next(first.events())["method"] == "notifications/subscriptions/acknowledged"
        second = modern(app, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=2)
        assert second.status == 200 and second.json()["error"] == {"code": -32603, "message": "Subscription limit reached"}
        first.body.close()  # the client went away: its slot is free again
        third = modern(app, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=3)
        assert next(third.events())["method"] == "notifications/subscriptions/acknowledged"
        third.body.close()
    finally:
        assert app.shutdown(LONG)


def test_the_handshake_get_stream_carries_untagged_changes(server: Server, app: Any) -> None:
    session = initialize(app)
    assert call(app, "GET", MCP_SESSION_ID=session, ACCEPT="application/json").status == 406
    stream = call(app, "GET", MCP_SESSION_ID=session)
    assert stream.status == 200 and stream.streaming
    assert call(app, "GET", MCP_SESSION_ID=session).status == 409  # one GET stream per session
    server.refresh_tools()
    assert next(stream.events()) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert call(app, "DELETE", MCP_SESSION_ID=session).status == 204
    assert list(stream.events()) == []  # ending the session ends its stream
    stream.body.close()


def test_a_handshake_cancel_notification_cancels_the_request(app: Any, gates: Gates) -> None:
    session = initialize(app)
    replies: list[Reply] = []
    caller = threading.Thread(target=lambda: replies.append(legacy(app, "tools/call", {"name": "quiet"}, id="c1", session=session)))
    caller.start()
    assert gates.started.wait(LONG)
    cancel = legacy(app, "notifications/cancelled", {"requestId": "c1"}, id=None, session=session)
    assert cancel.status == 202
    assert gates.cancelled.wait(LONG)
    caller.join(LONG)
    assert replies[0].status == 204  # no response for a cancelled request
    gates.release.set()


def test_a_duplicate_id_in_flight_in_one_session_is_refused(app: Any, gates: Gates) -> None:
    session = initialize(app)
    caller = threading.Thread(target=lambda: legacy(app, "tools/call", {"name": "quiet"}, id=5, session=session).json())
    caller.start()
    assert gates.started.wait(LONG)
    duplicate = legacy(app, "tools/call", {"name": "echo", "arguments": {"text": "x"}}, id=5, session=session)
    assert duplicate.json()["error"]["code"] == -32600
    assert legacy(app, "tools/call", {"name": "echo", "arguments": {"text": "x"}}, id="5", session=session).json()["result"]
    gates.release.set()
    caller.join(LONG)


@pytest.mark.parametrize(("tool", "answer"), [("quiet", {"result": "done"}), ("stubborn", {"error": "the server is shutting down"})])
def test_shutdown_cancels_running_requests_and_answers_them(server: Server, gates: Gates, tool: str, answer: dict[str, str]) -> None:
    app = server.wsgi_app(keepalive=LONG, shutdown_timeout=SHORT)
    replies: list[Reply] = []
    caller = threading.Thread(target=lambda: replies.append(modern(app, "tools/call", {"name": tool})))
    caller.start()
    assert gates.started.wait(LONG)
    clean: list[bool] = []
    stopper = threading.Thread(target=lambda: clean.append(app.shutdown()))
    stopper.start()
    caller.join(LONG)
    assert gates.cancelled.is_set()
    got = replies[0].json()
    if "result" in answer:  # a tool that ends when cancelled is answered as usual
        assert got["result"]["content"][0]["text"] == answer["result"]
    else:  # one that does not is answered for it at the deadline, and shutdown reports it
        assert got["error"] == {"code": -32603, "message": answer["error"]}
    gates.release.set()
    stopper.join(LONG)
    assert app.wait(0) and clean == [tool == "quiet"]


def test_encoded_frames_are_single_sse_lines(app: Any) -> None:
    # A newline inside a value must stay escaped: one SSE data line per JSON-RPC message.
    frame = jsonrpc.encode(jsonrpc.result_frame(1, {"text": "a\nb"}))
    assert frame.count(b"\n") == 1
