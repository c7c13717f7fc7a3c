"""A 2026-07-28 method POSTed without its envelope and outside a session (a hand-written
`server/discover`, the commonest first try): the HTTP endpoint's refusal says what the envelope
needs, not only that the handshake era's session is missing. Over a real socket."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest

from mcpsync import Server, Service
from tests._timeouts import LONG

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def port() -> Iterator[int]:
    server = Server("bare", services=[Service("nothing")])
    serving = server.start_http("127.0.0.1", 0, threads=2)
    try:
        yield int(serving.url.rsplit(":", 1)[1].split("/")[0])
    finally:
        assert server.close(LONG)


def post(port: int, body: dict) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    try:
        connection.request("POST", "/mcp", body=json.dumps(body).encode(), headers=HEADERS)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize("method", ["server/discover", "subscriptions/listen"])
def test_a_bare_2026_method_outside_a_session_is_told_what_the_envelope_needs(port: int, method: str) -> None:
    status, answer = post(port, {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}})
    assert status == 400 and answer["id"] == 1
    assert answer["error"]["code"] == -32600
    message = answer["error"]["message"]
    assert message.startswith(f"Bad Request: {method} is a 2026-07-28 method, and this request has no 2026-07-28 envelope: params._meta must carry "), message
    assert "io.modelcontextprotocol/protocolVersion" in message and "io.modelcontextprotocol/clientCapabilities" in message


def test_another_request_outside_a_session_still_needs_the_session(port: int) -> None:
    status, answer = post(port, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert status == 400
    assert answer["error"]["message"] == "Bad Request: the Mcp-Session-Id header is required (initialize first)"
