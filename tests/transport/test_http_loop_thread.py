"""Which thread runs a tool over HTTP under mcpsync's own server: a tool without a `Context` runs
on the server's loop thread (no hand-off at all), unless its answer may wait on a store; a tool with
a `Context` runs on the endpoint's executor; and a tool without a Context that is slow after all
does not hold the other clients (a worker takes the loop over). Real servers on loopback ports,
plain HTTP requests."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync import Server
from mcpsync.bus import MemoryBus, MemoryStore

from .._timeouts import LONG
from .thread_tools import ThreadTools, tools  # noqa: F401 - tools is a fixture

pytestmark = pytest.mark.timeout(60)

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
LOOP_THREAD = "mcpsync-http-server"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}


class Endpoint:
    def __init__(self, server: Server) -> None:
        self.serving = server.start_http("127.0.0.1", 0)
        self.port = int(self.serving.url.rsplit(":", 1)[1].split("/")[0])

    def call(self, tool: str, *, session: str | None = None, era: str = MODERN) -> str:
        params: dict[str, Any] = {"name": tool, "arguments": {}}
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": era}
        if era == MODERN:
            params["_meta"] = ENVELOPE
            headers.update({"Mcp-Method": "tools/call", "Mcp-Name": tool})
        if session is not None:
            headers["Mcp-Session-Id"] = session
        status, message, _ = self.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers)
        assert status == 200, message
        return str(message["result"]["content"][0]["text"])

    def initialize(self) -> str:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": HANDSHAKE}
        params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
        status, _, session = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, headers)
        assert status == 200 and session is not None
        headers["Mcp-Session-Id"] = session
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
        return session

    def post(self, frame: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any, str | None]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=LONG)
        try:
            connection.request("POST", "/mcp", json.dumps(frame), headers)
            response = connection.getresponse()
            body = response.read()
            return response.status, json.loads(body) if body else None, response.getheader("Mcp-Session-Id")
        finally:
            connection.close()


@pytest.fixture
def endpoint(tools: ThreadTools) -> Iterator[Endpoint]:
    running = Endpoint(Server("threads", services=[tools.service]))
    try:
        yield running
    finally:
        assert running.serving.shutdown()


def test_a_tool_without_a_context_runs_on_the_loop_thread_in_both_eras(endpoint: Endpoint) -> None:
    assert endpoint.call("where") == LOOP_THREAD
    session = endpoint.initialize()
    assert endpoint.call("where", session=session, era=HANDSHAKE) == LOOP_THREAD


def test_a_tool_with_a_context_runs_on_the_executor(endpoint: Endpoint) -> None:
    assert endpoint.call("where_with_context").startswith("mcpsync-http-worker")


def test_a_slow_tool_without_a_context_does_not_hold_the_other_clients(endpoint: Endpoint, tools: ThreadTools) -> None:
    held: list[str] = []
    caller = threading.Thread(target=lambda: held.append(endpoint.call("hold")), name="test-held-call")
    caller.start()
    try:
        assert tools.holding.wait(LONG)
        # the loop thread is inside `hold`: a worker has taken the loop over and serves the others
        for _ in range(3):
            assert endpoint.call("where").startswith("mcpsync-http-")
        assert endpoint.call("where_with_context").startswith("mcpsync-http-worker")
    finally:
        tools.release.set()
        caller.join(LONG)
    assert held == [LOOP_THREAD]


def test_a_client_that_stops_reading_its_answer_does_not_hold_the_other_clients(endpoint: Endpoint) -> None:
    """Its answer, made on the loop thread, is far larger than the socket buffers: the thread
    writing it waits for room that never comes, and the other clients are served meanwhile."""
    params = {"name": "big", "arguments": {"size": 32 << 20}, "_meta": ENVELOPE}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{endpoint.port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\n"
            f"Mcp-Name: big\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=LONG) as silent:
        silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        silent.sendall(head + body)
        first = silent.recv(1)  # the answer has begun: the loop thread is writing it
        assert first == b"H"
        for _ in range(3):
            assert endpoint.call("where").startswith("mcpsync-http-")
        assert endpoint.call("where_with_context").startswith("mcpsync-http-worker")


def test_a_handshake_call_runs_on_the_loop_only_while_its_shared_session_needs_no_store(tools: ThreadTools) -> None:
    store, bus = MemoryStore(), MemoryBus()
    server = Server("threads", services=[tools.service], bus=bus.peer(), store=store)
    running = Endpoint(server)
    try:
        session = running.initialize()
        # the first call loads the session's record from the store (a round trip that may wait): a worker
        assert running.call("where", session=session, era=HANDSHAKE).startswith("mcpsync-http-")
        # its copy here is fresh for a while: the next is answered at once
        assert running.call("where", session=session, era=HANDSHAKE) == LOOP_THREAD
        assert running.call("where") == LOOP_THREAD  # a 2026-07-28 call needs no store
    finally:
        assert running.serving.shutdown()
