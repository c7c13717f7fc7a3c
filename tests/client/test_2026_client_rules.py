"""Two 2026-07-28 client rules, over real loopback HTTP against the scripted mock server.

1. A tool whose `x-mcp-header` annotations are invalid (empty, on a non-primitive property,
   repeated, not an HTTP field name) is left out of `list_tools()` with a warning naming it and why,
   and `call_tool()` refuses it with `InvalidTool` without sending anything (streamable-http.mdx,
   "Custom Headers from Tool Parameters"; the suite's http-invalid-tool-headers).
2. A request the server refuses for its protocol version (-32022 with `data.supported`) is sent
   once more with a version from that list that the client speaks, and the session keeps it
   (versioning; the suite's request-metadata).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcpsync.client import _negotiation as negotiation
from mcpsync.client.http import HttpConnection
from mcpsync.client.session import ClientSession
from mcpsync.errors import InvalidTool
from mcpsync.errors import McpsyncError, ProtocolViolation
from mcpsync.protocol.jsonrpc import McpError
from mcpsync.protocol.param_headers import invalid_annotation
from mcpsync.protocol.versions import Era
from tests._timeouts import LONG
from tests.client.mock_http_server import MODERN, META_PROTOCOL_VERSION, MockServer, Recorded, Reply

pytestmark = pytest.mark.timeout(60)


def prop(token: Any, type_: str = "string") -> dict[str, Any]:
    return {"type": type_, "x-mcp-header": token}


def tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object", "properties": properties}}


VALID = tool("valid", {"region": prop("Region"), "n": prop("N", "integer"), "plain": {"type": "number"}})
INVALID = {
    "empty": tool("empty", {"v": prop("")}),
    "object": tool("object", {"v": prop("Data", "object")}),
    "array": tool("array", {"v": prop("Items", "array")}),
    "null": tool("null", {"v": prop("Nil", "null")}),
    "number": tool("number", {"v": prop("Score", "number")}),
    "same_case": tool("same_case", {"a": prop("Region"), "b": prop("Region")}),
    "diff_case": tool("diff_case", {"a": prop("MyField"), "b": prop("myfield")}),
    "space": tool("space", {"v": prop("My Region")}),
    "colon": tool("colon", {"v": prop("Region:Primary")}),
    "non_ascii": tool("non_ascii", {"v": prop("Région")}),
    "control": tool("control", {"v": prop("Region\t1")}),
    "not_string": tool("not_string", {"v": prop(7)}),
    "in_items": {"name": "in_items", "inputSchema": {"type": "object", "properties": {
        "list": {"type": "array", "items": prop("Item")}}}},
}
WHY = {"empty": "is empty", "object": "string, integer and boolean", "same_case": "repeats", "space": "not an HTTP field name"}


def serve_tools(server: MockServer, tools: list[dict[str, Any]]) -> None:
    @server.route("tools/list")
    def listing(request: Recorded, reply: Reply) -> None:
        if not request.modern:
            return reply.result(request.rpc_id, {"tools": tools})
        return reply.result(request.rpc_id, {"resultType": "complete", "tools": tools, "ttlMs": 0, "cacheScope": "private"})


def session(url: str, mode: str = "modern") -> ClientSession:
    return ClientSession(HttpConnection(url), mode=mode, timeout=LONG).open()


@pytest.fixture
def server():
    with MockServer() as mock:
        yield mock


# -- rule 1: tools with invalid x-mcp-header annotations -----------------------------------------

@pytest.mark.parametrize("name", sorted(INVALID))
def test_each_kind_of_invalid_annotation_is_named(name: str) -> None:
    reason = invalid_annotation(INVALID[name]["inputSchema"])
    assert reason is not None
    if name in WHY:
        assert WHY[name] in reason
    assert invalid_annotation(VALID["inputSchema"]) is None


def test_invalid_tools_are_left_out_with_a_warning_and_never_called(server: MockServer, caplog: pytest.LogCaptureFixture) -> None:
    serve_tools(server, [VALID, *INVALID.values()])
    with caplog.at_level(logging.WARNING, logger="mcpsync.client"), session(server.url) as client:
        assert [t["name"] for t in client.list_tools()] == ["valid"]
        for name in INVALID:
            with pytest.raises(InvalidTool) as refused:
                client.call_tool(name, {"v": "x"})
            assert name in str(refused.value) and "left out of list_tools()" in str(refused.value)
        result = client.call_tool("valid", {"region": "us-west1", "n": 42, "plain": 1.5})
        assert result["isError"] is False
    calls = server.posts("tools/call")
    assert [c.params["name"] for c in calls] == ["valid"]  # none of the invalid ones went out
    assert calls[0].header("Mcp-Param-Region") == "us-west1" and calls[0].header("Mcp-Param-N") == "42"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for name in INVALID:
        assert any(repr(name) in w for w in warnings), f"no warning names {name!r}: {warnings}"
    assert issubclass(InvalidTool, ProtocolViolation) and issubclass(InvalidTool, McpsyncError)


def test_a_tool_fixed_on_the_next_listing_is_callable_again(server: MockServer) -> None:
    tools = [INVALID["empty"]]
    serve_tools(server, tools)
    with session(server.url) as client:
        assert client.list_tools() == []
        with pytest.raises(InvalidTool):
            client.call_tool("empty", {"v": "x"})
        tools[0] = tool("empty", {"v": prop("V")})
        assert [t["name"] for t in client.list_tools()] == ["empty"]
        client.call_tool("empty", {"v": "x"})
    assert server.posts("tools/call")[0].header("Mcp-Param-V") == "x"


def test_a_header_mismatch_that_reveals_an_invalid_tool_is_not_retried(server: MockServer) -> None:
    """Called before any listing: the server's -32020 makes the client list, and the listing shows
    the tool invalid, so the call is refused instead of being sent again."""
    serve_tools(server, [INVALID["same_case"]])

    @server.route("tools/call")
    def mismatch(request: Recorded, reply: Reply) -> None:
        reply.error(request.rpc_id, -32020, "Header mismatch: Mcp-Param-Region is missing", 400)

    with session(server.url) as client, pytest.raises(InvalidTool):
        client.call_tool("same_case", {"a": "x", "b": "y"})
    assert len(server.posts("tools/call")) == 1 and len(server.posts("tools/list")) == 1


def test_the_handshake_era_keeps_every_tool(server: MockServer) -> None:
    """x-mcp-header is a 2026-07-28 rule: a handshake-era session sends no such headers."""
    serve_tools(server, [VALID, INVALID["empty"]])
    with session(server.url, "legacy") as client:
        assert client.era is Era.HANDSHAKE
        assert [t["name"] for t in client.list_tools()] == ["valid", "empty"]
        client.call_tool("empty", {"v": "x"})
    assert [c.params["name"] for c in server.posts("tools/call")] == ["empty"]


# -- rule 2: a refused protocol version is retried once with a supported one ----------------------

def refuse_first(server: MockServer, method: str, supported: list[str], times: int = 1) -> list[str]:
    """Answer the first `times` `method` requests -32022; returns the versions each one carried."""
    carried: list[str] = []

    @server.route(method)
    def refusing(request: Recorded, reply: Reply) -> None:
        carried.append(request.params["_meta"][META_PROTOCOL_VERSION])
        if len(carried) <= times:
            data = {"supported": supported, "requested": carried[-1]}
            return reply.error(request.rpc_id, -32022, "Unsupported protocol version", 400, data)
        return server.default(request, reply)

    return carried


def test_a_refused_request_is_retried_once_with_a_supported_version(server: MockServer) -> None:
    carried = refuse_first(server, "tools/list", [MODERN])
    with session(server.url) as client:
        assert [t["name"] for t in client.list_tools()] == ["echo"]
    assert carried == [MODERN, MODERN]
    first, retry = server.posts("tools/list")
    assert first.rpc_id != retry.rpc_id
    assert retry.header("MCP-Protocol-Version") == MODERN


def test_the_probe_itself_is_retried_in_modern_mode(server: MockServer) -> None:
    refuse_first(server, "server/discover", [MODERN])
    with session(server.url) as client:
        assert client.era is Era.MODERN and client.protocol_version == MODERN
    assert len(server.posts("server/discover")) == 2
    assert server.posts("initialize") == []


def test_a_second_refusal_is_raised(server: MockServer) -> None:
    carried = refuse_first(server, "tools/list", [MODERN], times=2)
    with session(server.url) as client, pytest.raises(McpError) as raised:
        client.list_tools()
    assert raised.value.code == -32022 and carried == [MODERN, MODERN]


def test_no_version_in_common_is_raised_without_a_retry(server: MockServer) -> None:
    carried = refuse_first(server, "tools/list", ["2099-01-01"])
    with session(server.url) as client, pytest.raises(McpError) as raised:
        client.list_tools()
    assert raised.value.data["supported"] == ["2099-01-01"] and carried == [MODERN]


def test_the_session_keeps_the_version_it_switched_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """With two modern versions spoken, a refusal listing only the second moves the session to it."""
    monkeypatch.setattr(negotiation, "MODERN_VERSIONS", ("2099-01-01", MODERN))
    with MockServer(supported=(MODERN, "2099-01-01")) as mock:
        carried = refuse_first(mock, "tools/list", [MODERN])
        with session(mock.url) as client:
            client.protocol_version = "2099-01-01"  # as if discovery had agreed on it
            client.list_tools()
            assert client.protocol_version == MODERN
            client.call_tool("echo", {})
        assert carried == ["2099-01-01", MODERN]
        assert mock.posts("tools/call")[0].params["_meta"][META_PROTOCOL_VERSION] == MODERN


def test_the_handshake_era_never_retries(server: MockServer) -> None:
    @server.route("tools/list")
    def refusing(request: Recorded, reply: Reply) -> None:
        reply.error(request.rpc_id, -32022, "Unsupported protocol version", 400, {"supported": [MODERN]})

    with session(server.url, "legacy") as client, pytest.raises(McpError):
        client.list_tools()
    assert len(server.posts("tools/list")) == 1
