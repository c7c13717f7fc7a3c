"""CORS on the MCP endpoint, as a browser sees it over real HTTP: preflights and the headers on
every kind of answer, for a listed origin, for `*`, for origins not listed (loopback ones too,
which the DNS-rebinding check lets in but CORS does not), in both eras, beside a fallback app
that CORS leaves alone. Every server is `Server.start_http` on 127.0.0.1, port 0."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync import Server, Service

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

PAGE = "https://app.example.com"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "page", "version": "1"},
}
ALL_HEADERS = "content-type, accept, authorization, mcp-protocol-version, mcp-session-id, mcp-method, mcp-name, mcp-param-city, last-event-id"


def _fallback(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
    return [b"page"]


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[Any] = []

    def start(*origins: str) -> int:
        service = Service("cors")

        @service.tool
        def echo(text: str) -> str:
            """Return the text."""
            return text

        serving = Server("cors", services=[service]).start_http(
            "127.0.0.1", 0, threads=4, allowed_origins=list(origins) or None, fallback=_fallback
        )
        started.append(serving)
        return serving.port

    yield start
    for serving in started:
        serving.shutdown()


def exchange(port: int, method: str, path: str = "/mcp", body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    try:
        data = None if body is None else json.dumps(body).encode()
        all_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"} if body is not None else {}
        connection.request(method, path, body=data, headers={**all_headers, **(headers or {})})
        reply = connection.getresponse()
        return reply.status, reply.headers, reply.read()
    finally:
        connection.close()


def preflight(port: int, origin: str, asked: str = ALL_HEADERS) -> tuple[int, http.client.HTTPMessage, bytes]:
    return exchange(port, "OPTIONS", headers={"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": asked})


def modern_list(port: int, origin: str | None) -> tuple[int, http.client.HTTPMessage, bytes]:
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
    if origin is not None:
        headers["Origin"] = origin
    return exchange(port, "POST", body={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}, headers=headers)


def test_a_preflight_from_a_listed_origin_allows_every_mcp_request_header(serve: Any) -> None:
    status, headers, body = preflight(serve(PAGE), PAGE)
    assert (status, body) == (204, b"")
    assert headers["Access-Control-Allow-Origin"] == PAGE
    assert headers["Vary"] == "Origin"
    assert {m.strip() for m in headers["Access-Control-Allow-Methods"].split(",")} == {"GET", "POST", "DELETE"}
    allowed = {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    assert allowed == {h.strip() for h in ALL_HEADERS.split(",")}  # Mcp-Param-* included
    assert int(headers["Access-Control-Max-Age"]) > 0


def test_a_preflight_does_not_allow_a_header_no_mcp_client_sends(serve: Any) -> None:
    _, headers, _ = preflight(serve(PAGE), PAGE, asked="content-type, x-evil")
    assert headers["Access-Control-Allow-Headers"].lower() == "content-type"


@pytest.mark.parametrize("origin", ["https://other.example.com", "http://localhost:3000"], ids=["another site", "loopback, not listed"])
def test_a_preflight_from_an_origin_not_listed_gets_no_cors_headers(serve: Any, origin: str) -> None:
    status, headers, _ = preflight(serve(PAGE), origin)
    assert status == 403
    assert not [name for name in headers if name.lower().startswith("access-control-")]


def test_without_allowed_origins_cors_is_off(serve: Any) -> None:
    port = serve()
    status, headers, _ = preflight(port, "http://localhost:3000")
    assert status == 403 and "Access-Control-Allow-Origin" not in headers
    status, headers, _ = modern_list(port, "http://localhost:3000")  # let in past the rebinding check
    assert status == 200 and "Access-Control-Allow-Origin" not in headers


def test_a_json_answer_to_a_listed_origin_says_who_may_read_it_both_eras(serve: Any) -> None:
    port = serve(PAGE)
    status, headers, body = modern_list(port, PAGE)
    assert status == 200 and b'"echo"' in body
    assert headers["Access-Control-Allow-Origin"] == PAGE and headers["Vary"] == "Origin"
    exposed = {h.strip().lower() for h in headers["Access-Control-Expose-Headers"].split(",")}
    assert exposed == {"mcp-session-id", "mcp-protocol-version", "www-authenticate"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}}}
    status, headers, _ = exchange(port, "POST", body=initialize, headers={"Origin": PAGE})
    assert status == 200 and headers["Mcp-Session-Id"]
    assert headers["Access-Control-Allow-Origin"] == PAGE  # so the page may read Mcp-Session-Id
    session = headers["Mcp-Session-Id"]
    status, headers, _ = exchange(port, "DELETE", headers={"Origin": PAGE, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    assert status == 204 and headers["Access-Control-Allow-Origin"] == PAGE


def test_a_refusal_to_a_listed_origin_is_readable_by_the_page(serve: Any) -> None:
    status, headers, body = exchange(serve(PAGE), "POST", body={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                     headers={"Origin": PAGE, "Mcp-Session-Id": "nope"})
    assert status == 404 and b"Session not found" in body
    assert headers["Access-Control-Allow-Origin"] == PAGE


def test_an_event_stream_to_a_listed_origin_carries_the_cors_headers(serve: Any) -> None:
    port = serve(PAGE)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    try:
        listen = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                  "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}}
        connection.request("POST", "/mcp", body=json.dumps(listen).encode(), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Origin": PAGE,
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"})
        reply = connection.getresponse()
        assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/event-stream")
        assert reply.headers["Access-Control-Allow-Origin"] == PAGE
    finally:
        connection.close()


def test_star_allows_any_origin_without_credentials(serve: Any) -> None:
    port = serve("*")
    status, headers, _ = preflight(port, "https://anywhere.example")
    assert status == 204 and headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Credentials" not in headers
    status, headers, _ = modern_list(port, "https://anywhere.example")
    assert status == 200 and headers["Access-Control-Allow-Origin"] == "*"


def test_requests_without_origin_and_the_fallback_get_no_cors_headers(serve: Any) -> None:
    port = serve(PAGE)
    _, headers, _ = modern_list(port, None)
    assert "Access-Control-Allow-Origin" not in headers
    status, headers, body = exchange(port, "GET", path="/", headers={"Origin": PAGE})
    assert (status, body) == (200, b"page") and "Access-Control-Allow-Origin" not in headers


def test_an_options_request_without_origin_is_still_405(serve: Any) -> None:
    status, headers, _ = exchange(serve(PAGE), "OPTIONS")
    assert status == 405 and headers["Allow"]
