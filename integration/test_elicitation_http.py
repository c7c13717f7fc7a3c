"""Server-to-client requests (elicitation, sampling, roots) over Streamable HTTP, handshake era.

A tool with a `Context` that calls `ctx.elicit` / `ctx.sample` / `ctx.roots` runs on a worker;
its question goes out as an SSE `message` event on the tools/call POST's own response stream, and
the client answers with a POST of its own carrying the JSON-RPC response and the session's
`Mcp-Session-Id` (202). These tests drive that with raw `http.client` (what a client library would
hide: the ids, the 202, the stream's events, hanging up) and check what the server was left with.
The official SDK client's side is in test_sdk_elicitation.py.

Servers run in this process (`Server.start_http`) with short keep-alives, so a client that hangs
up is noticed within a fraction of a second. Nothing sleeps to synchronise: tools signal with
`threading.Event`s, and every wait is bounded.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import threading
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest

from mcpsync import AskTimeout, Context, Server, Service
from mcpsync.errors import McpsyncError
from mcpsync.protocol.jsonrpc import McpError, Request, Response
from mcpsync.transport.http._sessions import PendingAsks
from mcpsync.transport.http._stream import TIMEOUT, Exchange, Final
from wire import modern_meta

pytestmark = pytest.mark.timeout(60)

LONG = 20.0 if os.environ.get("CI") else 10.0
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
ALL_CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


# -- a raw handshake-era client ---------------------------------------------------------------------

def post(url: str, body: Any, headers: dict[str, str]) -> http.client.HTTPResponse:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
    conn.request("POST", parts.path, body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    sock = conn.sock
    response = conn.getresponse()
    response.socket = sock  # type: ignore[attr-defined]  # for hang_up()
    return response


def sse_messages(response: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of an event stream as they arrive (comments skipped); each must be
    an SSE `message` event."""
    event = None
    while True:
        line = response.readline()
        if not line:
            return
        if line.startswith(b"event: "):
            event = line[7:].strip()
        elif line.startswith(b"data: ") and line[6:].strip():  # a priming event's data is empty
            assert event == b"message", line
            event = None
            yield json.loads(line[6:])


def hang_up(response: http.client.HTTPResponse) -> None:
    """Close the connection under a response, the way a client that goes away does."""
    import socket

    response.socket.shutdown(socket.SHUT_RDWR)  # type: ignore[attr-defined]
    response.close()


def is_request(message: dict[str, Any]) -> bool:
    return "method" in message and "id" in message


class Legacy:
    """One handshake-era session, spoken by hand."""

    def __init__(self, url: str, capabilities: dict[str, Any] | None = None) -> None:
        self.url = url
        response = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": ALL_CAPABILITIES if capabilities is None else capabilities,
            "clientInfo": {"name": "raw", "version": "0"},
        }}, {})
        assert response.status == 200, response.read()
        assert json.loads(response.read())["result"]["protocolVersion"] == HANDSHAKE
        self.session_id = response.getheader("Mcp-Session-Id")
        assert self.session_id
        initialized = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, self.headers)
        assert initialized.status == 202
        initialized.read()

    @property
    def headers(self) -> dict[str, str]:
        return {"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": HANDSHAKE}

    def call(self, name: str, arguments: dict[str, Any] | None = None, *, id: Any = 1) -> http.client.HTTPResponse:
        return post(self.url, {"jsonrpc": "2.0", "id": id, "method": "tools/call",
                               "params": {"name": name, "arguments": arguments or {}}}, self.headers)

    def reply(self, request_id: Any, result: Any = None, *, error: dict[str, Any] | None = None, session_id: str | None = None) -> int:
        """POST a JSON-RPC response; the HTTP status it got."""
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        body.update({"error": error} if error is not None else {"result": result})
        headers = {**self.headers, **({"Mcp-Session-Id": session_id} if session_id else {})}
        response = post(self.url, body, headers)
        response.read()
        return response.status

    def delete(self) -> int:
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
        conn.request("DELETE", parts.path, headers=self.headers)
        response = conn.getresponse()
        response.read()
        conn.close()
        return response.status


def open_stream(response: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/event-stream"
    return sse_messages(response)


# -- the server ----------------------------------------------------------------------------------------

class Asking:
    """A server whose tools ask the client things, and what the tools saw."""

    def __init__(self) -> None:
        self.service = Service("asking")
        self.asked = threading.Event()  # a tool is about to wait for the client
        self.ended: "concurrent.futures.Future[BaseException | None]" = concurrent.futures.Future()
        self._register()
        self.server = Server("asking", services=[self.service], shutdown_timeout=LONG)
        self.serving = self.server.start_http("127.0.0.1", 0, keepalive=0.1, threads=16)
        self.url = self.serving.url
        self.app = self.serving.app

    def _register(self) -> None:
        service, outer = self.service, self

        @service.tool
        def ask_name(ctx: Context) -> str:
            """Elicit a name."""
            answer = ctx.elicit("Your name?", NAME_FORM)
            return f"{answer['action']}: {json.dumps(answer.get('content'), sort_keys=True)}"

        @service.tool
        def ask_model(ctx: Context) -> str:
            """Sample the client's model."""
            answer = ctx.sample("Say hi", max_tokens=20)
            return f"{answer['model']} said {answer['content']['text']}"

        @service.tool
        def ask_roots(ctx: Context) -> str:
            """List the client's roots."""
            return ",".join(root["uri"] for root in ctx.roots())

        @service.tool
        def ask_twice(ctx: Context) -> str:
            """Two questions in a row, each answered before the next."""
            first = ctx.elicit("First?", NAME_FORM)
            second = ctx.sample("Second?", max_tokens=5)
            return f"{first['content']['name']} then {second['content']['text']}"

        @service.tool
        def ask_refused(ctx: Context) -> str:
            """The client answers an error; the tool sees it as McpError."""
            try:
                ctx.elicit("Refuse me", NAME_FORM)
            except McpError as exc:
                return f"client error {exc.code}: {exc.message} {exc.data}"
            return "no error"

        @service.tool
        def ask_and_wait(ctx: Context) -> str:
            """Elicit and report how the wait ended."""
            outer.asked.set()
            try:
                answer = ctx.elicit("Will you answer?", NAME_FORM)
            except BaseException as exc:
                outer.ended.set_result(exc)
                raise
            outer.ended.set_result(None)
            return f"answered {answer['action']}"

        @service.tool
        def ask_briefly(ctx: Context) -> str:
            """Elicit with a short timeout: the Context gives up and cancels its ask."""
            try:
                ctx.elicit("Quick!", NAME_FORM, timeout=0.3)
            except AskTimeout as exc:
                return f"gave up: {exc}"
            return "answered"

        self.meeting = threading.Barrier(2, timeout=LONG)

        @service.tool
        def meet_and_ask(who: str, ctx: Context) -> str:
            """Both sessions ask at once."""
            outer.meeting.wait()
            answer = ctx.elicit(f"{who}, your name?", NAME_FORM)
            return f"{who} is {answer['content']['name']}"

    def pending(self, session_id: str) -> PendingAsks:
        owner = self.app._directory.table.find(session_id)
        assert owner is not None
        return owner.asks

    def close(self) -> None:
        assert self.server.close(LONG)


@pytest.fixture
def asking() -> Iterator[Asking]:
    served = Asking()
    try:
        yield served
    finally:
        served.close()


def tool_text(message: dict[str, Any]) -> str:
    assert "result" in message, message
    assert not message["result"].get("isError"), message
    return message["result"]["content"][0]["text"]


# -- each kind of question ---------------------------------------------------------------------------

def test_elicitation_goes_out_on_the_calls_stream_and_the_answer_post_is_202(asking: Asking) -> None:
    client = Legacy(asking.url)
    messages = open_stream(client.call("ask_name", id=7))
    ask = next(messages)
    assert ask["jsonrpc"] == "2.0" and ask["method"] == "elicitation/create"
    assert ask["id"] == "mcpsync-1"
    assert ask["params"]["message"] == "Your name?"
    assert ask["params"]["requestedSchema"] == NAME_FORM
    assert client.reply(ask["id"], {"action": "accept", "content": {"name": "Ada"}}) == 202
    final = next(messages)
    assert final["id"] == 7
    assert tool_text(final) == 'accept: {"name": "Ada"}'
    assert list(messages) == []  # the answer ends the stream
    assert len(asking.pending(client.session_id)) == 0


def test_sampling(asking: Asking) -> None:
    client = Legacy(asking.url)
    messages = open_stream(client.call("ask_model"))
    ask = next(messages)
    assert ask["method"] == "sampling/createMessage"
    assert ask["params"]["maxTokens"] == 20
    assert ask["params"]["messages"] == [{"role": "user", "content": {"type": "text", "text": "Say hi"}}]
    answer = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "test-model", "stopReason": "endTurn"}
    assert client.reply(ask["id"], answer) == 202
    assert tool_text(next(messages)) == "test-model said hi"


def test_roots(asking: Asking) -> None:
    client = Legacy(asking.url)
    messages = open_stream(client.call("ask_roots"))
    ask = next(messages)
    assert ask["method"] == "roots/list"
    roots = [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]
    assert client.reply(ask["id"], {"roots": roots}) == 202
    assert tool_text(next(messages)) == "file:///work,file:///tmp"


def test_ids_are_unique_within_a_session(asking: Asking) -> None:
    client = Legacy(asking.url)
    messages = open_stream(client.call("ask_twice"))
    first = next(messages)
    assert (first["method"], first["id"]) == ("elicitation/create", "mcpsync-1")
    assert client.reply(first["id"], {"action": "accept", "content": {"name": "Ada"}}) == 202
    second = next(messages)
    assert (second["method"], second["id"]) == ("sampling/createMessage", "mcpsync-2")
    assert client.reply(second["id"], {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}) == 202
    assert tool_text(next(messages)) == "Ada then ok"
    messages = open_stream(client.call("ask_name", id=2))  # the next call counts on
    assert next(messages)["id"] == "mcpsync-3"


def test_an_error_answer_reaches_the_tool_as_mcp_error(asking: Asking) -> None:
    client = Legacy(asking.url)
    messages = open_stream(client.call("ask_refused"))
    ask = next(messages)
    assert client.reply(ask["id"], error={"code": -32601, "message": "no forms here", "data": {"why": "test"}}) == 202
    assert tool_text(next(messages)) == "client error -32601: no forms here {'why': 'test'}"


def test_answers_nobody_awaits_are_202_and_ignored(asking: Asking) -> None:
    client = Legacy(asking.url)
    assert client.reply("mcpsync-99", {"action": "accept"}) == 202
    assert client.reply(5, {"action": "accept"}) == 202
    messages = open_stream(client.call("ask_name"))
    ask = next(messages)
    assert client.reply(1, {"action": "decline"}) == 202  # an int id is never one of ours
    assert client.reply(ask["id"], {"action": "decline"}) == 202
    assert tool_text(next(messages)) == "decline: null"
    assert client.reply(ask["id"], {"action": "accept"}) == 202  # a second answer: ignored
    other = post(asking.url, {"jsonrpc": "2.0", "id": "mcpsync-1", "result": {}}, {"Mcp-Session-Id": "nope", "MCP-Protocol-Version": HANDSHAKE})
    assert other.status == 404  # an unknown session is still 404
    other.read()


# -- giving up ---------------------------------------------------------------------------------------

def test_the_tool_giving_up_cancels_its_question_on_the_stream(asking: Asking) -> None:
    client = Legacy(asking.url)
    messages = open_stream(client.call("ask_briefly"))
    ask = next(messages)
    cancelled = next(messages)
    assert cancelled["method"] == "notifications/cancelled"
    assert cancelled["params"]["requestId"] == ask["id"] and cancelled["params"]["reason"]
    assert "id" not in cancelled
    final = next(messages)
    assert tool_text(final).startswith("gave up: ")
    assert client.reply(ask["id"], {"action": "accept", "content": {"name": "late"}}) == 202  # late: ignored
    assert len(asking.pending(client.session_id)) == 0


def test_a_client_that_hangs_up_may_come_back_for_the_question_and_the_answer(asking: Asking) -> None:
    """A disconnection is not a cancellation (2025-11-25): the question stays open while the
    client comes back, and the stream it resumes (Last-Event-ID) carries the call's answer."""
    client = Legacy(asking.url)
    response = client.call("ask_name")
    event_id, ask = None, None
    while ask is None:  # the priming event, then the question, each with its id
        line = response.readline()
        assert line, "the stream ended before the question"
        if line.startswith(b"id: "):
            event_id = line[4:].strip().decode()
        elif line.startswith(b"data: ") and line[6:].strip():
            ask = json.loads(line[6:])
    assert ask["method"] == "elicitation/create" and event_id is not None
    hang_up(response)
    assert client.reply(ask["id"], {"action": "accept", "content": {"name": "back"}}) == 202  # still awaited
    parts = urlsplit(asking.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
    conn.request("GET", parts.path, headers={**client.headers, "Accept": "text/event-stream", "Last-Event-ID": event_id})
    resumed = conn.getresponse()
    assert resumed.status == 200
    assert tool_text(next(sse_messages(resumed))) == 'accept: {"name": "back"}'
    conn.close()


def test_deleting_the_session_while_a_tool_waits_ends_the_wait(asking: Asking) -> None:
    client = Legacy(asking.url)
    messages = open_stream(client.call("ask_and_wait"))
    ask = next(messages)
    assert ask["method"] == "elicitation/create"
    owner_asks = asking.pending(client.session_id)
    assert len(owner_asks) == 1
    assert client.delete() == 204
    ended = asking.ended.result(LONG)
    assert isinstance(ended, McpsyncError), ended
    assert len(owner_asks) == 0
    rest = list(messages)  # the stream ends: the client is told its question needs no answer
    assert {"method": "notifications/cancelled", "requestId": ask["id"]} in [
        {"method": m.get("method"), "requestId": m.get("params", {}).get("requestId")} for m in rest
    ]
    assert not any(is_request(m) for m in rest)
    assert client.reply(ask["id"], {"action": "accept"}) == 404  # the session is gone


def test_shutdown_while_a_tool_waits_ends_the_wait(asking: Asking) -> None:
    client = Legacy(asking.url)
    messages = open_stream(client.call("ask_and_wait"))
    assert next(messages)["method"] == "elicitation/create"
    stopper = threading.Thread(target=asking.server.shutdown, args=(LONG,))
    stopper.start()
    try:
        ended = asking.ended.result(LONG)
        assert isinstance(ended, McpsyncError), ended
        list(messages)  # and the stream ends
    finally:
        stopper.join(LONG)
    assert not stopper.is_alive()


def test_two_sessions_each_asking_at_once(asking: Asking) -> None:
    clients = {who: Legacy(asking.url) for who in ("ann", "bob")}
    streams: dict[str, Iterator[dict[str, Any]]] = {}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # both calls must be running for the barrier
        opened = {who: pool.submit(client.call, "meet_and_ask", {"who": who}) for who, client in clients.items()}
        for who, future in opened.items():
            streams[who] = open_stream(future.result(LONG))
    asks = {who: next(stream) for who, stream in streams.items()}
    assert asks["ann"]["params"]["message"] == "ann, your name?"
    assert asks["bob"]["params"]["message"] == "bob, your name?"
    assert asks["ann"]["id"] == asks["bob"]["id"] == "mcpsync-1"  # counted per session
    for who in ("bob", "ann"):
        assert clients[who].reply(asks[who]["id"], {"action": "accept", "content": {"name": who.upper()}}) == 202
    assert tool_text(next(streams["ann"])) == "ann is ANN"
    assert tool_text(next(streams["bob"])) == "bob is BOB"


# -- when no request may go out ---------------------------------------------------------------------

def test_a_capability_the_client_did_not_declare_is_a_clear_error(asking: Asking) -> None:
    client = Legacy(asking.url, capabilities={"sampling": {}})
    response = client.call("ask_name")
    if response.getheader("Content-Type") == "text/event-stream":
        messages = list(sse_messages(response))
    else:
        messages = [json.loads(response.read())]
    assert not any(is_request(m) for m in messages), messages  # nothing was asked
    final = messages[-1]
    if "error" in final:
        assert final["error"]["code"] == -32021
        assert final["error"]["data"]["requiredCapabilities"] == {"elicitation": {}}
    else:
        assert final["result"]["isError"] is True
        assert "elicitation" in final["result"]["content"][0]["text"]
    assert len(asking.pending(client.session_id)) == 0


def test_a_2026_07_28_call_gets_input_required_and_no_request_on_the_wire(asking: Asking) -> None:
    capabilities = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "ask_name", "arguments": {}, "_meta": modern_meta(**capabilities)}}
    response = post(asking.url, body, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "ask_name"})
    if response.getheader("Content-Type") == "text/event-stream":
        messages = list(sse_messages(response))
    else:
        messages = [json.loads(response.read())]
    assert not any(is_request(m) for m in messages), messages
    final = messages[-1]
    assert final["id"] == 1
    assert final["result"]["resultType"] == "input_required"
    (question,) = final["result"]["inputRequests"].values()
    assert question["method"] == "elicitation/create"


def test_ask_refuses_where_no_request_may_go_out() -> None:
    """The exchange itself: initialize and 2026-07-28 exchanges have no ask table; an answered or
    cancelled exchange, or one of an ended session, refuses; nothing reaches the channel."""
    asks = PendingAsks()
    refusing = [
        Exchange(Request(1, "initialize"), streams=False, capacity=4, asks=asks),
        Exchange(Request(1, "tools/call"), streams=True, capacity=4),  # 2026-07-28: no table
    ]
    answered = Exchange(Request(2, "tools/call"), streams=True, capacity=4, asks=asks)
    answered.answer(Final(b"{}"))
    cancelled = Exchange(Request(3, "tools/call"), streams=True, capacity=4, asks=asks)
    cancelled.cancel()
    for exchange in [*refusing, cancelled]:
        with pytest.raises(McpsyncError):
            exchange.ask("elicitation/create", {"message": "?"})
        assert exchange.channel.get(0) is TIMEOUT  # nothing was written
    with pytest.raises(McpsyncError):
        answered.ask("roots/list", {})
    assert isinstance(answered.channel.get(0), Final)  # only the answer
    assert len(asks) == 0
    ended = PendingAsks()
    ended.end("the session was ended")
    late = Exchange(Request(4, "tools/call"), streams=True, capacity=4, asks=ended)
    with pytest.raises(McpsyncError, match="the session was ended"):
        late.ask("roots/list", {})
    assert late.channel.get(0) is TIMEOUT


def test_ask_futures_settle_once_and_answering_the_request_fails_the_rest() -> None:
    asks = PendingAsks()
    exchange = Exchange(Request(1, "tools/call"), streams=True, capacity=8, asks=asks)
    first = exchange.ask("roots/list", {})
    second = exchange.ask("sampling/createMessage", {"messages": [], "maxTokens": 1})
    frames = [json.loads(exchange.channel.get(0)) for _ in range(2)]
    assert [f["id"] for f in frames] == ["mcpsync-1", "mcpsync-2"]
    assert asks.answer(Response("mcpsync-1", {"roots": []}))
    assert first.result(0) == {"roots": []}
    assert not asks.answer(Response("mcpsync-1", {"roots": []}))  # once only
    assert asks.answer(Response("mcpsync-2", None, {"code": "bad"}))  # a malformed error is still an error
    with pytest.raises(McpError):
        second.result(0)
    third = exchange.ask("roots/list", {})
    exchange.channel.get(0)
    exchange.answer(Final(b'{"jsonrpc":"2.0","id":1,"result":{}}'))
    with pytest.raises(McpsyncError):
        third.result(0)
    told = exchange.channel.get(0)
    assert json.loads(told) == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": "mcpsync-3", "reason": "the request ended before the client answered"}}
    assert isinstance(exchange.channel.get(0), Final)
    assert len(asks) == 0
