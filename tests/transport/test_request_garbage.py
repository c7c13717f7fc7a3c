"""A served request leaves nothing for the garbage collector, over stdio and over HTTP.

While a request runs, its objects point at one another (over HTTP: the environ, the response that
writes it, the `respond_now` the environ hands the application). Each must be freed by reference
counting once the request is answered: a cycle left behind per request makes a busy server run the
collector over all of them, and leaks in an application that pauses the collector. Real pipes and
real loopback sockets; the demo's `echo` (answered at once, no `Context`) and `countdown` (a
`Context`, run on the executor, reporting progress); the collector is paused while calls run.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcpsync import Server
from mcpsync.cli.demo import build_demo_service

from .._garbage import our_garbage_after
from .._timeouts import LONG
from .pipes import PipeClient, modern

pytestmark = pytest.mark.timeout(60)

CALLS = 20
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
CALLED = {"echo": {"text": "hi"}, "countdown": {"steps": 1, "delay": 0}}


@pytest.fixture
def server() -> Iterator[Server]:
    served = Server("garbage", services=[build_demo_service()])
    yield served
    assert served.close(LONG)


class HttpCaller:
    """Calls over one keep-alive connection to `server.start_http`, in either era."""

    def __init__(self, server: Server, era: str) -> None:
        port = int(server.start_http("127.0.0.1", 0).url.rsplit(":", 1)[1].split("/")[0])
        self._connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
        self._era = era
        self._headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": era}
        if era == HANDSHAKE:
            params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            status, headers, _ = self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
            assert status == 200
            self._headers["Mcp-Session-Id"] = headers["Mcp-Session-Id"]
            assert self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 202

    def _post(self, message: dict[str, Any], extra: dict[str, str] | None = None) -> tuple[int, Any, bytes]:
        self._connection.request("POST", "/mcp", json.dumps(message).encode(), {**self._headers, **(extra or {})})
        response = self._connection.getresponse()
        return response.status, response.headers, response.read()

    def call(self, n: int, tool: str) -> bytes:
        params: dict[str, Any] = {"name": tool, "arguments": CALLED[tool]}
        extra = None
        if self._era == MODERN:
            params = modern(params)
            extra = {"Mcp-Method": "tools/call", "Mcp-Name": tool}
        status, _, body = self._post({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}, extra)
        assert status == 200, body
        return body

    def close(self) -> None:
        self._connection.close()


def calls_of(call: Callable[[int, str], Any], tool: str) -> Callable[[], None]:
    def run() -> None:
        for n in range(CALLS):
            assert b'"result"' in call(n, tool)
    return run


@pytest.mark.parametrize("tool", sorted(CALLED))
@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
def test_http_calls_leave_no_reference_cycles(server: Server, era: str, tool: str) -> None:
    caller = HttpCaller(server, era)
    try:
        calls = calls_of(caller.call, tool)
        calls()  # the first calls warm up lazily built state (listings, caches)
        assert our_garbage_after(calls) == []
    finally:
        caller.close()


@pytest.mark.parametrize("tool", sorted(CALLED))
@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
def test_stdio_calls_leave_no_reference_cycles(server: Server, era: str, tool: str) -> None:
    with PipeClient(server) as client:
        if era == HANDSHAKE:
            assert "result" in client.initialize()
        wrap = modern if era == MODERN else (lambda params: params)

        def call(n: int, name: str) -> bytes:
            response, _ = client.request("tools/call", wrap({"name": name, "arguments": CALLED[name]}), id=n)
            assert "result" in response, response
            return json.dumps(response).encode()

        calls = calls_of(call, tool)
        calls()
        assert our_garbage_after(calls) == []
