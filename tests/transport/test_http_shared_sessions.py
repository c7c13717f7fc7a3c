"""Handshake-era sessions shared by replicas: two servers in one process, each on its own real
loopback HTTP port, joined by `MemoryBus` peers and one `MemoryStore` (the same interfaces as
Redis's; integration/test_session_replicas.py runs them across processes on a real Redis). The
client picks the replica of each request, as a load balancer without affinity would.

Also the resumable GET stream (event ids, the priming event, `Last-Event-ID`), shared and alone.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync import Context, Server, Service
from mcpsync.bus import MemoryBus, MemoryStore, StoreUnavailable
from mcpsync.bus.store import Creation

from .._timeouts import LONG
from ..sse_stream import SseStream

pytestmark = pytest.mark.timeout(60)

VERSION = "2025-11-25"


class Replica:
    """One server on a free loopback port, and plain HTTP requests to it."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.serving = server.start_http("127.0.0.1", 0, keepalive=0.5, session_timeout=60.0)
        self.port = int(self.serving.url.rsplit(":", 1)[1].split("/")[0])

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=LONG)

    def post(self, frame: dict[str, Any], session: str | None = None) -> http.client.HTTPResponse:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}
        if session is not None:
            headers["Mcp-Session-Id"] = session
        connection = self.connect()
        connection.request("POST", "/mcp", json.dumps(frame), headers)
        return connection.getresponse()

    def request(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None, id: Any = 1) -> tuple[int, Any]:
        """(status, the JSON-RPC message answering it) for a request answered in JSON or SSE."""
        response = self.post({"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}, session)
        if response.getheader("Content-Type") == "text/event-stream":
            for message in messages(response):
                if message.get("id") == id:
                    return response.status, message
            raise AssertionError("the stream ended without the answer")
        body = response.read()
        return response.status, json.loads(body) if body else None

    def initialize(self) -> str:
        params = {"protocolVersion": VERSION, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}
        response = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert response.status == 200, response.read()
        session = response.getheader("Mcp-Session-Id")
        response.read()
        assert session is not None
        notified = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        assert notified.status == 202
        return session

    def get(self, session: str, last_event_id: str | None = None) -> http.client.HTTPResponse:
        headers = {"Accept": "text/event-stream", "Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        connection = self.connect()
        connection.request("GET", "/mcp", headers=headers)
        return connection.getresponse()

    def delete(self, session: str) -> int:
        connection = self.connect()
        connection.request("DELETE", "/mcp", headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION})
        response = connection.getresponse()
        response.read()
        return response.status


def messages(response: http.client.HTTPResponse) -> Iterator[Any]:
    stream = SseStream(response)
    while True:
        try:
            yield stream.message()[1]
        except EOFError:
            return


class Asked:
    """What the tools of the replicas report back to the test."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()


def service(asked: Asked) -> Service:
    service = Service("shared")

    @service.tool
    def whoami(ctx: Context) -> str:
        """The client's name, as its session recorded it."""
        return str((ctx.client_info or {}).get("name"))

    @service.tool
    def ask_name(ctx: Context) -> str:
        """Asks the client for a name."""
        answer = ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}, timeout=LONG)
        return str(answer.get("content", {}).get("name"))

    @service.tool
    def wait(ctx: Context) -> str:
        """Waits to be cancelled."""
        asked.started.set()
        if ctx.wait_cancelled(LONG):
            asked.cancelled.set()
        return "over"

    @service.tool
    def chatty(ctx: Context) -> str:
        """Logs once at info and once at error."""
        ctx.info("info line")
        ctx.error("error line")
        return "said"

    @service.resource("notes://welcome")
    def welcome() -> str:
        return "hello"

    return service


class Pair:
    def __init__(self, store: MemoryStore) -> None:
        self.asked = Asked()
        bus_a = MemoryBus()
        self.a = Replica(Server("a", services=[service(self.asked)], bus=bus_a, store=store))
        self.b = Replica(Server("b", services=[service(self.asked)], bus=bus_a.peer(), store=store))

    def close(self) -> None:
        self.a.server.close(LONG)
        self.b.server.close(LONG)


@pytest.fixture
def pair() -> Iterator[Pair]:
    replicas = Pair(MemoryStore())
    yield replicas
    replicas.close()


def text(message: Any) -> str:
    return str(message["result"]["content"][0]["text"])


def test_a_session_made_on_one_replica_is_served_by_the_other(pair: Pair) -> None:
    session = pair.a.initialize()
    status, message = pair.b.request("tools/call", {"name": "whoami", "arguments": {}}, session=session)
    assert status == 200 and text(message) == "t"  # the client info came from the store
    status, _ = pair.b.request("tools/list", session="not-a-session")
    assert status == 404


def test_a_delete_on_one_replica_ends_the_session_on_both(pair: Pair) -> None:
    session = pair.a.initialize()
    stream = SseStream(pair.a.get(session))
    assert stream.next()[1] is None  # the priming event
    assert pair.b.delete(session) == 204
    with pytest.raises(EOFError):
        stream.message()  # the GET stream held by A ended
    status, _ = pair.a.request("ping", session=session)
    assert status == 404


def test_a_log_level_set_through_one_replica_holds_on_the_other(pair: Pair) -> None:
    session = pair.a.initialize()
    assert pair.b.request("ping", session=session)[0] == 200  # B holds a checked copy now
    assert pair.a.request("logging/setLevel", {"level": "error"}, session=session)[0] == 200
    response = pair.b.post({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "chatty", "arguments": {}}}, session)
    got = list(messages(response)) if response.getheader("Content-Type") == "text/event-stream" else [json.loads(response.read())]
    logged = [m["params"]["data"] for m in got if m.get("method") == "notifications/message"]
    assert logged == ["error line"] and text(got[-1]) == "said"


def test_changes_made_on_either_replica_reach_a_stream_held_by_one_once(pair: Pair) -> None:
    session = pair.a.initialize()
    assert pair.b.request("resources/subscribe", {"uri": "notes://welcome"}, session=session)[0] == 200
    stream = SseStream(pair.a.get(session))
    pair.b.server.refresh_tools()
    pair.b.server.notify_resource_updated("notes://welcome")
    pair.a.server.refresh_prompts()
    got = [stream.message()[1]["method"] for _ in range(3)]
    assert got == ["notifications/tools/list_changed", "notifications/resources/updated", "notifications/prompts/list_changed"]
    pair.a.server.refresh_resources()
    assert stream.message()[1]["method"] == "notifications/resources/list_changed"  # nothing doubled before it
    stream.close()


def test_an_answer_posted_to_the_other_replica_reaches_the_asking_tool(pair: Pair) -> None:
    session = pair.a.initialize()
    response = pair.a.post({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}, session)
    stream = SseStream(response)
    _, ask = stream.message()
    assert ask["method"] == "elicitation/create"
    answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
    posted = pair.b.post(answer, session)
    assert posted.status == 202
    _, result = stream.message()
    assert result["id"] == 3 and text(result) == "Ada"


def test_a_cancel_posted_to_the_other_replica_cancels_the_request(pair: Pair) -> None:
    session = pair.a.initialize()
    replies: list[tuple[int, Any]] = []
    caller = threading.Thread(target=lambda: replies.append(pair.a.request("tools/call", {"name": "wait", "arguments": {}}, session=session, id="w")))
    caller.start()
    assert pair.asked.started.wait(LONG)
    cancel = pair.b.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "w"}}, session)
    assert cancel.status == 202
    assert pair.asked.cancelled.wait(LONG)
    caller.join(LONG)


def test_a_stream_resumes_on_the_other_replica_with_what_it_missed(pair: Pair) -> None:
    session = pair.a.initialize()
    stream = SseStream(pair.a.get(session))
    first_id, priming = stream.next()
    assert priming is None and first_id is not None and stream.retry_ms is not None
    pair.a.server.refresh_tools()
    seen, message = stream.message()
    assert message["method"] == "notifications/tools/list_changed" and seen is not None
    stream.close()
    pair.a.server.refresh_prompts()  # while no stream is open
    resumed = SseStream(pair.b.get(session, last_event_id=seen))
    assert resumed.next() == (seen, None)  # primed where it resumes
    event_id, message = resumed.message()
    assert message["method"] == "notifications/prompts/list_changed" and event_id != seen
    resumed.close()


class CursorWatch(MemoryStore):
    """Tells the test when a replica recorded where a session's stream ended."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded = threading.Event()

    def update_session(self, session_id: str, **changes: Any) -> None:
        super().update_session(session_id, **changes)
        if "cursor" in changes:
            self.recorded.set()


def test_a_stream_without_last_event_id_starts_where_the_last_one_ended() -> None:
    store = CursorWatch()
    replicas = Pair(store)
    try:
        session = replicas.a.initialize()
        replicas.b.server.refresh_tools()  # before any stream: kept in the session's log
        stream = SseStream(replicas.a.get(session))
        assert stream.message()[1]["method"] == "notifications/tools/list_changed"
        stream.close()
        assert store.recorded.wait(LONG)  # A saw its client go (at its next keep-alive) and recorded where
        replicas.a.server.refresh_prompts()
        again = SseStream(replicas.b.get(session))
        assert again.message()[1]["method"] == "notifications/prompts/list_changed"  # not the tools one again
        again.close()
    finally:
        replicas.close()


class FailingStore(MemoryStore):
    """A store that can be switched off, as Redis is when it goes down."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def load_session(self, session_id: str, *, ttl: float) -> Any:
        if self.down:
            raise StoreUnavailable("the store is down (test)")
        return super().load_session(session_id, ttl=ttl)

    def create_session(self, session_id: str, record: Any, **options: Any) -> Creation:
        if self.down:
            raise StoreUnavailable("the store is down (test)")
        return super().create_session(session_id, record, **options)


def test_a_session_request_while_the_store_is_down_is_503_with_retry_after() -> None:
    store = FailingStore()
    replicas = Pair(store)
    try:
        session = replicas.a.initialize()
        store.down = True
        response = replicas.b.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, session)
        assert response.status == 503 and response.getheader("Retry-After") == "1"
        assert "store" in json.loads(response.read())["error"]["message"]
        refused = replicas.a.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            }
        )
        assert refused.status == 503 and refused.getheader("Retry-After") == "1"
        refused.read()
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        connection = replicas.b.connect()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/list",
        }
        connection.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}), headers)
        modern = connection.getresponse()
        assert modern.status == 200 and "tools" in json.loads(modern.read())["result"]  # stateless: served without the store
        store.down = False
        assert replicas.b.request("ping", session=session)[0] == 200
    finally:
        replicas.close()


def test_a_lone_server_resumes_a_stream_from_its_recent_events() -> None:
    server = Server("alone", services=[service(Asked())])
    replica = Replica(server)
    try:
        session = replica.initialize()
        stream = SseStream(replica.get(session))
        assert stream.next()[1] is None
        server.refresh_tools()
        seen, _ = stream.message()
        server.refresh_prompts()
        stream.message()  # sent, but suppose the connection lost it
        stream.close()
        server.refresh_resources()
        resumed = SseStream(replica.get(session, last_event_id=seen))
        assert resumed.next() == (seen, None)
        assert [resumed.message()[1]["method"] for _ in range(2)] == ["notifications/prompts/list_changed", "notifications/resources/list_changed"]
        resumed.close()
    finally:
        server.close(LONG)


def gated_service(gate: threading.Event) -> Service:
    service = Service("gated")

    @service.tool
    def slow(ctx: Context) -> str:
        """Logs, then answers once the test opens the gate."""
        ctx.info("working")
        gate.wait(LONG)
        return "finished"

    return service


def test_a_lost_post_stream_resumes_with_its_answer() -> None:
    gate = threading.Event()
    server = Server("alone", services=[gated_service(gate)])
    replica = Replica(server)
    try:
        session = replica.initialize()
        response = replica.post({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "slow", "arguments": {}}}, session)
        stream = SseStream(response)
        primed, nothing = stream.next()
        assert nothing is None and primed is not None and primed.startswith("p") and stream.retry_ms == 1000
        seen, logged = stream.message()
        assert logged["method"] == "notifications/message" and seen is not None and seen.startswith(primed[:-1])
        stream.close()  # the client loses the stream before the answer: the request goes on
        gate.set()
        resumed = SseStream(replica.get(session, last_event_id=seen))
        assert resumed.next() == (seen, None)
        event_id, answer = resumed.message()
        assert answer["id"] == 9 and text(answer) == "finished" and event_id != seen
        with pytest.raises(EOFError):
            resumed.next()  # the answer ends the resumed stream, as it would have ended the first
    finally:
        gate.set()
        server.close(LONG)


def test_a_resume_that_reaches_another_replica_gets_the_sessions_stream(pair: Pair) -> None:
    session = pair.a.initialize()
    response = pair.a.post({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "chatty", "arguments": {}}}, session)
    primed = SseStream(response).next()[0]
    assert primed is not None
    elsewhere = SseStream(pair.b.get(session, last_event_id=primed))
    assert elsewhere.next()[0] == "0"  # primed at the start of the session's own stream
    pair.a.server.refresh_tools()
    assert elsewhere.message()[1]["method"] == "notifications/tools/list_changed"
    elsewhere.close()


def polling_service() -> Service:
    service = Service("polling")

    @service.tool
    def long_job(ctx: Context) -> str:
        """Frees its connection while it works (SEP-1699), then answers on the resumed stream."""
        ctx.info("started")
        released = ctx.close_stream()
        ctx.info("still working")
        return f"done (stream released: {released})"

    return service


def test_a_tool_that_closes_its_stream_is_answered_on_the_resumed_one() -> None:
    server = Server("polling", services=[polling_service()])
    replica = Replica(server)
    try:
        session = replica.initialize()
        response = replica.post({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "long_job", "arguments": {}}}, session)
        stream = SseStream(response)
        events = []
        with pytest.raises(EOFError):  # the server ends the stream, unanswered
            while True:
                events.append(stream.next())
        last_id = events[-1][0]
        assert last_id is not None and all(message is None or "id" not in message for _, message in events)
        resumed = SseStream(replica.get(session, last_event_id=last_id))
        assert resumed.next() == (last_id, None)
        while True:  # what came after the release: the second log line (unless sent before), the answer
            _, message = resumed.message()
            if "id" in message:
                break
            assert message["params"]["data"] == "still working"
        assert text(message) == "done (stream released: True)"
    finally:
        server.close(LONG)


def test_the_blocking_client_follows_a_released_stream_to_its_answer() -> None:
    import mcpsync

    server = Server("polling", services=[polling_service()])
    serving = server.start_http("127.0.0.1", 0)
    try:
        with mcpsync.connect(serving.url, mode="legacy") as client:
            assert client.call_tool("long_job", {})["content"][0]["text"] == "done (stream released: True)"
    finally:
        server.close(LONG)


def test_closing_the_stream_does_nothing_in_2026_07_28() -> None:
    import mcpsync

    server = Server("polling", services=[polling_service()])
    serving = server.start_http("127.0.0.1", 0)
    try:
        with mcpsync.connect(serving.url, mode="modern") as client:
            assert client.call_tool("long_job", {})["content"][0]["text"] == "done (stream released: False)"
    finally:
        server.close(LONG)


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    def load_session(self, session_id: str, *, ttl: float) -> Any:
        self.loads += 1
        return super().load_session(session_id, ttl=ttl)


class DownBus(MemoryBus):
    """A bus that says it cannot reach its backend (as RedisBus.connected does)."""

    connected = False


def test_a_copy_checked_moments_ago_is_served_without_the_store_while_the_bus_is_up() -> None:
    store = CountingStore()
    replicas = Pair(store)
    try:
        session = replicas.a.initialize()
        replicas.b.request("ping", session=session)
        loads = store.loads
        for id in range(3):
            assert replicas.b.request("ping", session=session, id=id)[0] == 200
        assert store.loads == loads  # each would be a round trip to Redis
        replicas.a.request("resources/subscribe", {"uri": "notes://welcome"}, session=session)
        replicas.b.request("ping", session=session, id=9)
        assert store.loads == loads + 1  # A said it changed the record: B loaded it again
    finally:
        replicas.close()


def test_while_the_bus_is_down_every_request_loads_its_session() -> None:
    store = CountingStore()
    server = Server("a", services=[service(Asked())], bus=DownBus(), store=store)
    replica = Replica(server)
    try:
        session = replica.initialize()
        loads = store.loads
        for id in range(3):
            assert replica.request("ping", session=session, id=id)[0] == 200
        assert store.loads == loads + 3  # what the bus would have said may be lost
    finally:
        server.close(LONG)


def test_a_resume_waits_for_the_lost_stream_to_end_and_a_live_one_still_gets_409() -> None:
    """A client that lost its GET stream resumes at once, maybe before this server has seen the old
    connection close: the resume waits (up to GET_TAKEOVER_WAIT) for the stream to end by itself and
    gets what it missed. A stream whose client still holds it is not taken over: 409, after the wait."""
    server = Server("alone", services=[service(Asked())])
    replica = Replica(server)
    try:
        session = replica.initialize()
        first = SseStream(replica.get(session))
        assert first.next()[1] is None
        server.refresh_tools()
        seen, _ = first.message()
        live = replica.get(session, last_event_id=seen)  # the first stream is still read: not lost
        assert live.status == 409
        live.read()
        server.refresh_prompts()
        first.close()  # lost now; the resume below may come before the server sees it
        resumed = SseStream(replica.get(session, last_event_id=seen))
        assert resumed.next() == (seen, None)
        assert resumed.message()[1]["method"] == "notifications/prompts/list_changed"
        resumed.close()
    finally:
        server.close(LONG)
