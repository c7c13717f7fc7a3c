"""HttpConnection: Streamable HTTP in both eras, against the scripted mock server on 127.0.0.1.

The pure parts (header encoding, the SSE parser, argument checks) are tested without sockets; the
rest drives a real `HttpConnection` (alone, or under a `ClientSession`) against `MockServer`.
Every wait is an Event or Condition with the LONG bound; nothing sleeps.
"""

from __future__ import annotations

import base64
import socket
import threading
import time
from typing import Any, Callable

import pytest
import ujson

from mcpsync.client._http_headers import header_value
from mcpsync.client.http import HttpConnection
from mcpsync.client.listen import ListChanged
from mcpsync.client.session import ClientSession
from mcpsync.errors import ConnectionLost
from mcpsync.protocol.jsonrpc import McpError, Notification, Response
from mcpsync.protocol.sse import SseEvent, SseParser, TooLarge
from mcpsync.protocol.versions import Era
from tests._timeouts import LONG
from tests.client.mock_http_server import MODERN, META_PROTOCOL_VERSION, META_SUBSCRIPTION_ID, MockServer, Recorded, Reply, decode_header

pytestmark = pytest.mark.timeout(60)

ENVELOPE = {
    META_PROTOCOL_VERSION: MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
}


@pytest.fixture
def server():
    with MockServer() as mock:
        yield mock


class Inbox:
    """Collects what a bare connection hands to the session's callbacks."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.lost: list[Exception] = []
        self._cond = threading.Condition()

    def on_message(self, message: Any) -> None:
        with self._cond:
            self.messages.append(message)
            self._cond.notify_all()

    def on_lost(self, error: Exception) -> None:
        with self._cond:
            self.lost.append(error)
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[], Any]) -> Any:
        with self._cond:
            value = self._cond.wait_for(predicate, LONG)
        assert value, f"never happened; got {self.messages!r}, lost {self.lost!r}"
        return value

    def response(self, request_id: Any) -> Response:
        return self.wait_for(lambda: next((m for m in self.messages if isinstance(m, Response) and m.id == request_id), None))

    def responses(self) -> list[Response]:
        with self._cond:
            return [m for m in self.messages if isinstance(m, Response)]


@pytest.fixture
def inbox():
    return Inbox()


def started(url: str, inbox: Inbox, **options: Any) -> HttpConnection:
    connection = HttpConnection(url, **options)
    connection.start(inbox.on_message, inbox.on_lost)
    return connection


def request(request_id: Any, method: str, params: dict[str, Any] | None = None, *, modern: bool = True, **meta: Any) -> dict[str, Any]:
    params = dict(params or {})
    if modern or meta:
        params["_meta"] = {**(ENVELOPE if modern else {}), **meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def session(url: str, mode: str, **options: Any) -> ClientSession:
    return ClientSession(HttpConnection(url, **options), mode=mode, timeout=LONG).open()


# -- pure parts -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, plain",
    [("echo", True), ("file:///a b.txt", True), ("", True), (" lead", False), ("trail ", False),
     ("météo ☀", False), ("tab\there", False), ("=?base64?eA==?=", False)],
)
def test_header_value_is_plain_ascii_or_base64(value: str, plain: bool) -> None:
    encoded = header_value(value)
    if plain:
        assert encoded == value
    else:
        assert encoded.startswith("=?base64?") and encoded.endswith("?=")
        assert base64.b64decode(encoded[9:-2]).decode("utf-8") == value


STREAM = (
    b"\xef\xbb\xbf: a comment\r\n"
    b"retry: 250\r\n"
    b"event: message\r\nid: 7\r\ndata: {\"a\":\r\ndata:  1}\r\n\r\n"
    b"data:no-space\rid: 8\r\r"
    b"event: ping\ndata: x\n\n"
    b"id: 9\ndata:\n\n"
    b"id: 10\n\n"
    b"data: unfinished\n"
)
EXPECTED = [
    SseEvent(b'{"a":\n 1}', "message", "7"),
    SseEvent(b"no-space", "message", "8"),
    SseEvent(b"x", "ping", "8"),
    SseEvent(b"", "message", "9"),
]


@pytest.mark.parametrize("step", [len(STREAM), 1, 2, 5])
def test_sse_parser_handles_fields_line_endings_and_any_chunking(step: int) -> None:
    parser = SseParser()
    events = []
    for start in range(0, len(STREAM), step):
        events.extend(parser.feed(STREAM[start : start + step]))
    events.extend(parser.finish())
    assert events == EXPECTED
    assert parser.last_event_id == "10"  # an event without data still moves the id
    assert parser.retry_ms == 250


def test_sse_parser_refuses_an_oversized_event() -> None:
    parser = SseParser(max_event_bytes=16)
    with pytest.raises(TooLarge):
        parser.feed(b"data: 0123456789\ndata: 0123456789\n")
    with pytest.raises(TooLarge):
        SseParser(max_event_bytes=16).feed(b"data: " + b"x" * 32)


@pytest.mark.parametrize(
    "url, options",
    [("ftp://example.com/mcp", {}), ("example.com/mcp", {}), ("http:///mcp", {}), ("http://u:p@example.com/", {}),
     ("http://example.com:99999/", {}), ("http://example.com/", {"headers": {"X-Bad": "a\r\nb"}}),
     ("http://example.com/", {"headers": {"bad name": "x"}}), ("http://example.com/", {"timeout": 0})],
)
def test_bad_arguments_are_value_errors(url: str, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        HttpConnection(url, **options)


# -- headers per era ------------------------------------------------------------------------------
def test_modern_requests_carry_the_routing_headers(server: MockServer) -> None:
    with session(server.url, "modern", headers={"X-Api-Key": "k1", "mcp-method": "overridden"}) as client:
        assert client.era is Era.MODERN
        assert client.list_tools()[0]["name"] == "echo"
        result = client.call_tool("météo ☀", {"city": "Zürich"})
        assert result["content"][0]["text"] == 'météo ☀:{"city":"Zürich"}'
        with pytest.raises(McpError) as caught:  # the mock has no resources: 404 with a -32601 body
            client.read_resource("file:///a b.txt")
        assert caught.value.code == -32601
    for posted in server.posts():
        assert posted.header("Content-Type") == "application/json"
        assert posted.header("Accept") == "application/json, text/event-stream"
        assert posted.header("MCP-Protocol-Version") == MODERN
        assert posted.header("Mcp-Method") == posted.rpc_method and posted.header_count("Mcp-Method") == 1
        assert posted.header("X-Api-Key") == "k1"
        assert posted.header("Mcp-Session-Id") is None
    assert server.posts("tools/list")[0].header("Mcp-Name") is None
    name = server.posts("tools/call")[0].header("Mcp-Name")
    assert name.startswith("=?base64?") and decode_header(name) == "météo ☀"
    assert server.posts("resources/read")[0].header("Mcp-Name") == "file:///a b.txt"
    assert server.verbs("GET") == [] and server.verbs("DELETE") == []


def test_handshake_requests_carry_the_session_and_negotiated_version(server: MockServer) -> None:
    with session(server.url, "legacy") as client:
        connection = client._connection
        assert client.era is Era.HANDSHAKE and client.protocol_version == "2025-06-18"
        assert connection.protocol_version == "2025-06-18" and connection.session_id in server.live_sessions
        assert client.call_tool("echo", {"x": 1})["content"][0]["text"] == 'echo:{"x":1}'
        session_id = connection.session_id
    initialize, initialized, call = server.posts()[:3]
    assert initialize.rpc_method == "initialize"
    assert initialize.header("Mcp-Session-Id") is None and initialize.header("MCP-Protocol-Version") is None
    assert initialized.rpc_method == "notifications/initialized" and call.rpc_method == "tools/call"
    for later in (initialized, call):
        assert later.header("Mcp-Session-Id") == session_id
        assert later.header("MCP-Protocol-Version") == "2025-06-18"  # the server's choice, not ours
        assert later.header("Mcp-Method") is None and later.header("Mcp-Name") is None


def test_a_notification_gets_202_and_delivers_nothing(inbox: Inbox) -> None:
    with MockServer(sessions=False) as mock:
        connection = started(mock.url, inbox)
        try:
            connection.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
            assert [r.rpc_method for r in mock.posts()] == ["notifications/roots/list_changed"]
        finally:
            connection.close()
    assert inbox.messages == [] and inbox.lost == []


# -- responses: JSON, SSE, errors -----------------------------------------------------------------
def test_sse_progress_arrives_in_order_and_before_the_result(server: MockServer) -> None:
    first_progress_seen = threading.Event()

    @server.route("tools/call")
    def streamed(request: Recorded, reply: Reply) -> None:
        token = request.params["_meta"]["progressToken"]
        reply.start_sse()
        reply.comment()
        reply.event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 3, "message": "one"}}, event="message", id="1")
        if not reply.wait_gate(first_progress_seen):  # opened by the client's progress callback
            return
        pretty = ujson.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 2, "total": 3, "message": "two"}}, indent=2)
        reply.event(data=pretty)  # one message over several data lines
        reply.event({"jsonrpc": "2.0", "id": request.rpc_id, "result": {"resultType": "complete", "content": [], "isError": False}})

    seen: list[tuple[Any, ...]] = []

    def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))
        first_progress_seen.set()

    with session(server.url, "modern") as client:
        result = client.call_tool("slow", progress=progress)
    assert result["isError"] is False
    assert seen == [(1, 3, "one"), (2, 3, "two")]


def test_a_json_batch_body_delivers_every_message(server: MockServer, inbox: Inbox) -> None:
    @server.route("tools/list")
    def batch(request: Recorded, reply: Reply) -> None:
        reply.json([{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}},
                    {"jsonrpc": "2.0", "id": request.rpc_id, "result": {"tools": []}}])

    connection = started(server.url, inbox)
    try:
        connection.send(request(5, "tools/list"))
        assert inbox.response(5).result == {"tools": []}
    finally:
        connection.close()
    assert isinstance(inbox.messages[0], Notification) and inbox.messages[0].method == "notifications/message"


def test_http_400_with_unsupported_version_reaches_the_caller() -> None:
    with MockServer(supported=("2099-01-01",)) as mock:
        with pytest.raises(McpError) as caught:
            session(mock.url, "modern")
    assert caught.value.code == -32022
    assert caught.value.data == {"supported": ["2099-01-01"], "requested": MODERN}


def test_an_error_body_without_id_is_that_requests_error(server: MockServer) -> None:
    @server.route("tools/call")
    def refuse(request: Recorded, reply: Reply) -> None:
        reply.error(None, -32602, "Invalid params: no such tool", 400)

    with session(server.url, "modern") as client:
        with pytest.raises(McpError) as caught:
            client.call_tool("nope")
    assert caught.value.code == -32602 and "no such tool" in caught.value.message


def test_http_500_without_body_fails_only_that_call(server: MockServer) -> None:
    @server.route("tools/call")
    def boom(request: Recorded, reply: Reply) -> None:
        if request.params["name"] == "boom":
            return reply.empty(500)
        return server.default(request, reply)

    with session(server.url, "modern") as client:
        with pytest.raises(McpError) as caught:
            client.call_tool("boom")
        assert caught.value.code == -32603 and "HTTP 500" in caught.value.message
        assert client.call_tool("echo", {"ok": True})["content"][0]["text"] == 'echo:{"ok":true}'


def test_a_stream_that_ends_without_the_response_fails_the_call(server: MockServer) -> None:
    @server.route("tools/call")
    def truncated(request: Recorded, reply: Reply) -> None:
        reply.start_sse()
        reply.event({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "bye"}})

    with session(server.url, "modern") as client:
        started_at = time.monotonic()
        with pytest.raises(McpError) as caught:
            client.call_tool("echo")
        assert time.monotonic() - started_at < LONG / 2
    assert caught.value.code == -32603 and "did not answer" in caught.value.message


def test_a_silent_response_fails_after_sse_read_timeout(server: MockServer) -> None:
    @server.route("tools/call")
    def silent(request: Recorded, reply: Reply) -> None:
        reply.start_sse()
        reply.wait_for_disconnect()

    with session(server.url, "modern", sse_read_timeout=0.2) as client:
        with pytest.raises(McpError) as caught:
            client.call_tool("echo")
        assert caught.value.code == -32603 and "timed out" in caught.value.message
        server.wait_for(lambda: ("disconnect", "tools/call") in server.notes)
        assert client.list_tools()[0]["name"] == "echo"


def test_a_server_request_on_a_stream_is_answered_by_post(server: MockServer) -> None:
    def answered() -> list[Recorded]:
        return [r for r in server.posts() if r.rpc_id == "srv-1" and r.rpc_method is None]

    @server.route("tools/call")
    def ping_first(request: Recorded, reply: Reply) -> None:
        reply.start_sse()
        reply.event({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
        text = "pong seen" if server.seen(answered) else "no pong"
        reply.event({"jsonrpc": "2.0", "id": request.rpc_id, "result": {"content": [{"type": "text", "text": text}]}})

    with session(server.url, "legacy") as client:
        assert client.call_tool("echo")["content"][0]["text"] == "pong seen"
        session_id = client._connection.session_id
    (pong,) = answered()
    assert pong.message == {"jsonrpc": "2.0", "id": "srv-1", "result": {}}
    assert pong.header("Mcp-Session-Id") == session_id and pong.header("MCP-Protocol-Version") == "2025-06-18"


# -- the handshake era's session: GET stream, DELETE, expiry, resumption ---------------------------
def test_get_stream_delivers_list_changes_and_close_deletes_the_session(server: MockServer) -> None:
    client = session(server.url, "legacy")
    try:
        session_id = client._connection.session_id
        listener = client.listen(tools=True, prompts=False)
        server.wait_for(lambda: server.held("get") == 1)
        get = server.verbs("GET")[0]
        assert get.header("Accept") == "text/event-stream"
        assert get.header("Mcp-Session-Id") == session_id and get.header("MCP-Protocol-Version") == "2025-06-18"
        assert server.push("get", {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) == 1
        assert listener.next_event(LONG) == ListChanged("tools")
    finally:
        client.close()
    deletes = server.verbs("DELETE")
    assert len(deletes) == 1 and deletes[0].header("Mcp-Session-Id") == session_id
    assert session_id not in server.live_sessions
    server.wait_for(lambda: ("disconnect", "GET") in server.notes)


def test_an_ended_get_stream_is_reopened_after_its_last_event(server: MockServer) -> None:
    listening = threading.Event()

    @server.route("GET")
    def short_lived(request: Recorded, reply: Reply) -> None:
        if request.header("Last-Event-ID") == "g1":
            return server.default(request, reply)
        reply.start_sse()
        if reply.wait_gate(listening):
            reply.event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, id="g1", retry=0)

    with session(server.url, "legacy") as client:
        listener = client.listen(tools=True, prompts=False)
        listening.set()
        assert listener.next_event(LONG) == ListChanged("tools")
        server.wait_for(lambda: server.held("get") == 1)
        first, second = server.verbs("GET")
        assert first.header("Last-Event-ID") is None and second.header("Last-Event-ID") == "g1"


def test_a_server_without_get_stream_is_fine() -> None:
    with MockServer(get_stream=False, sessions=False) as mock:
        with session(mock.url, "legacy") as client:
            mock.wait_for(lambda: mock.verbs("GET"))
            assert client.list_tools()[0]["name"] == "echo"
        assert len(mock.verbs("GET")) == 1 and mock.verbs("DELETE") == []  # no session, nothing to delete


def test_404_with_a_session_id_means_the_session_expired(server: MockServer) -> None:
    with session(server.url, "legacy") as client:
        server.expire_sessions()
        with pytest.raises(ConnectionLost) as caught:
            client.list_tools()
        assert "session expired" in str(caught.value)
        with pytest.raises(ConnectionLost):
            client.list_tools()
    assert server.verbs("DELETE") == []


def test_a_handshake_stream_is_resumed_with_last_event_id(server: MockServer) -> None:
    original: dict[str, Any] = {}

    @server.route("tools/call")
    def poll(request: Recorded, reply: Reply) -> None:
        original["id"] = request.rpc_id
        reply.start_sse()
        reply.event(data="", id="ev-1", retry=0)  # the 2025-11-25 priming event, then close

    @server.route("GET")
    def resume(request: Recorded, reply: Reply) -> None:
        if request.header("Last-Event-ID") != "ev-1":
            return server.default(request, reply)
        reply.start_sse()
        reply.event({"jsonrpc": "2.0", "id": original["id"], "result": {"content": [{"type": "text", "text": "resumed"}]}}, id="ev-2")

    with session(server.url, "legacy") as client:
        assert client.call_tool("echo")["content"][0]["text"] == "resumed"
    resumed = [g for g in server.verbs("GET") if g.header("Last-Event-ID") == "ev-1"]
    assert len(resumed) == 1 and resumed[0].header("Mcp-Session-Id") is not None


# -- cancellation ---------------------------------------------------------------------------------
def hold_after_progress(request: Recorded, reply: Reply) -> None:
    reply.start_sse()
    token = (request.params.get("_meta") or {}).get("progressToken")
    reply.event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}})
    reply.wait_for_disconnect()


def test_cancelling_in_2026_closes_the_stream_instead_of_posting(server: MockServer, inbox: Inbox) -> None:
    server.route("tools/call")(hold_after_progress)
    connection = started(server.url, inbox)
    try:
        connection.send(request(1, "tools/call", {"name": "slow", "arguments": {}}, progressToken="p"))
        inbox.wait_for(lambda: any(isinstance(m, Notification) for m in inbox.messages))
        connection.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        server.wait_for(lambda: ("disconnect", "tools/call") in server.notes)
    finally:
        connection.close()
    assert server.posts("notifications/cancelled") == []
    assert inbox.responses() == [] and inbox.lost == []  # the cancelled call gets no synthesized error


def test_cancelling_in_the_handshake_era_posts_the_notification(inbox: Inbox) -> None:
    with MockServer(sessions=False) as mock:
        mock.route("tools/call")(hold_after_progress)
        connection = started(mock.url, inbox)
        try:
            connection.send(request(1, "tools/call", {"name": "slow", "arguments": {}}, modern=False, progressToken="p"))
            inbox.wait_for(lambda: any(isinstance(m, Notification) for m in inbox.messages))
            connection.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user"}})
            posted = mock.wait_for(lambda: mock.posts("notifications/cancelled"))
            assert len(posted) == 1 and posted[0].params == {"requestId": 1, "reason": "user"}
            mock.wait_for(lambda: ("disconnect", "tools/call") in mock.notes)  # and the useless stream is closed
        finally:
            connection.close()
    assert inbox.responses() == []


def test_closing_a_2026_listener_closes_its_stream(server: MockServer) -> None:
    with session(server.url, "modern") as client:
        listener = client.listen(tools=True, prompts=False)
        assert listener.accepted == {"toolsListChanged": True}
        server.wait_for(lambda: server.held("listen") == 1)
        pushed = server.push("listen", {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                                        "params": {"_meta": {META_SUBSCRIPTION_ID: listener.subscription_id}}})
        assert pushed == 1
        assert listener.next_event(LONG) == ListChanged("tools")
        listener.close()
        server.wait_for(lambda: ("disconnect", "subscriptions/listen") in server.notes)
        assert server.posts("notifications/cancelled") == []
        assert client.list_tools()[0]["name"] == "echo"


# -- failures to connect --------------------------------------------------------------------------
def test_connection_refused_fails_fast_with_connection_lost() -> None:
    with socket.socket() as unlistened:  # bound but not listening: connections are refused
        unlistened.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unlistened.getsockname()[1]}/mcp"
        started_at = time.monotonic()
        for mode in ("auto", "legacy", "modern"):
            with pytest.raises(ConnectionLost) as caught:
                session(url, mode)
            assert "connection refused" in str(caught.value)
        assert time.monotonic() - started_at < LONG / 2


def test_an_unreachable_server_after_a_good_start_fails_only_the_call(server: MockServer) -> None:
    with session(server.url, "modern") as client:
        server.close()
        for _ in range(2):  # each call fails by itself; the session is not lost
            with pytest.raises(McpError) as caught:
                client.list_tools()
            assert caught.value.code == -32603 and "connection refused" in caught.value.message


# -- whole sessions and lifecycle -----------------------------------------------------------------
@pytest.mark.parametrize("modern_server, era", [(True, Era.MODERN), (False, Era.HANDSHAKE)])
def test_a_full_session_in_auto_mode(modern_server: bool, era: Era) -> None:
    with MockServer(modern=modern_server) as mock:
        with session(mock.url, "auto") as client:
            assert client.era is era
            assert [tool["name"] for tool in client.list_tools()] == ["echo"]
            assert client.call_tool("echo", {"a": 1})["content"][0]["text"] == 'echo:{"a":1}'
        methods = [r.rpc_method for r in mock.posts()]
    if modern_server:
        assert methods == ["server/discover", "tools/list", "tools/call"]
    else:
        assert methods == ["server/discover", "initialize", "notifications/initialized", "tools/list", "tools/call"]
        assert len(mock.verbs("DELETE")) == 1


def test_close_is_idempotent_and_send_after_close_raises(server: MockServer, inbox: Inbox) -> None:
    connection = started(server.url, inbox)
    connection.send(request(1, "tools/list"))
    inbox.response(1)
    connection.close()
    connection.close()
    with pytest.raises(ConnectionLost):
        connection.send(request(2, "tools/list"))
    assert not [t for t in threading.enumerate() if t.name.startswith("mcpsync-http")]


def test_many_requests_at_once_use_a_bounded_pool_and_each_gets_one_answer(server: MockServer, inbox: Inbox) -> None:
    """MAX_REQUESTS are POSTed at once; the rest wait for a worker instead of getting a thread each."""
    from mcpsync.client import http as http_module

    workers = http_module.MAX_REQUESTS
    count = workers + 16
    gate = threading.Event()

    @server.route("tools/call")
    def held(request: Recorded, reply: Reply) -> None:
        if reply.wait_gate(gate):
            reply.result(request.rpc_id, {"content": [], "isError": False})

    before = set(threading.enumerate())  # idle workers of connections other tests left open
    connection = started(server.url, inbox)
    try:
        for n in range(count):
            connection.send(request(n, "tools/call", {"name": "echo", "arguments": {}}))
        server.wait_for(lambda: len(server.posts("tools/call")) == workers)
        assert len([t for t in set(threading.enumerate()) - before if t.name.startswith("mcpsync-http-request")]) == workers
        gate.set()
        inbox.wait_for(lambda: len(inbox.responses()) == count)
        assert sorted(r.id for r in inbox.responses()) == list(range(count))
        assert [r.error for r in inbox.responses() if r.error is not None] == []
        assert len(server.posts("tools/call")) == count
    finally:
        gate.set()
        connection.close()
