"""The server's spans and its operation histogram, by OpenTelemetry's conventions for MCP, read back
from the OpenTelemetry SDK's in-memory exporter and reader: one SERVER span per request, named for
its method and target, with the conventions' attributes in both eras over stdio and HTTP; the error
attributes and status of a JSON-RPC error and of a tool's `isError`; the parent a client put in
`params._meta`, and nothing broken by a malformed one; a tool's own spans under the request's."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from mcpsync import Server

from ..transport.pipes import PipeClient, modern
from .recording import Recorded, traced_service

pytestmark = pytest.mark.timeout(60)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture
def server(recorded: Recorded) -> Server:
    return Server("traced", services=[traced_service(recorded)], telemetry=recorded.telemetry)


def _params(era: str, params: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    if era == "modern":
        params = modern(params)
        params["_meta"].update(meta or {})
    elif meta:
        params = {**params, "_meta": meta}
    return params


def _open(client: PipeClient, era: str) -> None:
    if era == "handshake":
        client.initialize()


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_every_method_gets_a_server_span_named_for_it_over_stdio(recorded: Recorded, server: Server, era: str) -> None:
    version = "2025-11-25" if era == "handshake" else "2026-07-28"
    with PipeClient(server) as client:
        _open(client, era)
        response, _ = client.request("tools/call", _params(era, {"name": "echo", "arguments": {"text": "hi"}}), id=7)
        assert response["result"]["content"][0]["text"] == "hi"
        client.request("tools/list", _params(era, {}), id="list")
        client.request("prompts/get", _params(era, {"name": "greeting", "arguments": {"name": "Ada"}}), id=8)
        client.request("resources/read", _params(era, {"uri": "mem://notes"}), id=9)

    call = recorded.finished("tools/call echo")
    assert call.kind is SpanKind.SERVER and call.status.status_code is StatusCode.UNSET
    assert dict(call.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "jsonrpc.request.id": "7",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "mcp.protocol.version": version,
        "network.transport": "pipe",
    }
    listing = recorded.finished("tools/list")
    assert listing.attributes is not None and listing.attributes["jsonrpc.request.id"] == "list"
    assert "gen_ai.operation.name" not in listing.attributes
    prompt = recorded.finished("prompts/get greeting")
    assert prompt.attributes is not None and prompt.attributes["gen_ai.prompt.name"] == "greeting"
    read = recorded.finished("resources/read")
    assert read.attributes is not None and read.attributes["mcp.resource.uri"] == "mem://notes"
    if era == "handshake":
        assert recorded.finished("initialize").attributes["mcp.protocol.version"] == version  # type: ignore[index]


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_errors_set_the_error_type_and_the_status(recorded: Recorded, server: Server, era: str) -> None:
    with PipeClient(server) as client:
        _open(client, era)
        failed, _ = client.request("tools/call", _params(era, {"name": "broken", "arguments": {}}), id=1)
        assert failed["result"]["isError"] is True
        unknown, _ = client.request("prompts/get", _params(era, {"name": "nope"}), id=2)
        code = unknown["error"]["code"]

    tool_error = recorded.finished("tools/call broken")
    assert tool_error.status.status_code is StatusCode.ERROR
    assert tool_error.attributes is not None and tool_error.attributes["error.type"] == "tool_error"
    assert "rpc.response.status_code" not in tool_error.attributes  # the call itself succeeded
    refused = recorded.finished("prompts/get nope")
    assert refused.status.status_code is StatusCode.ERROR and refused.status.description == unknown["error"]["message"]
    assert refused.attributes is not None
    assert (refused.attributes["error.type"], refused.attributes["rpc.response.status_code"]) == (str(code), str(code))


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_the_context_in_meta_is_the_parent_and_a_tools_own_span_is_a_child(recorded: Recorded, server: Server, era: str) -> None:
    with PipeClient(server) as client:
        _open(client, era)
        meta = {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"}
        response, _ = client.request("tools/call", _params(era, {"name": "nested", "arguments": {}}, meta), id=1)
        assert response["result"]["content"][0]["text"] == TRACE_ID  # the tool ran inside the client's trace

    served = recorded.finished("tools/call nested")
    assert served.parent is not None and served.parent.is_remote
    assert (format(served.context.trace_id, "032x"), format(served.parent.span_id, "016x")) == (TRACE_ID, PARENT_ID)
    assert served.context.trace_state.get("rojo") == "00f067aa0ba902b7"
    inner = recorded.finished("inner work")
    assert inner.parent is not None and inner.parent.span_id == served.context.span_id


@pytest.mark.parametrize("traceparent", ["garbage", 123, {"nested": True}, f"00-{'0' * 32}-{PARENT_ID}-01", f"ff-{TRACE_ID}-{PARENT_ID}-01"])
def test_a_malformed_traceparent_is_ignored_and_the_request_served(recorded: Recorded, server: Server, traceparent: Any) -> None:
    with PipeClient(server) as client:
        client.initialize()
        response, _ = client.request("tools/call", {"name": "echo", "arguments": {"text": "still"}, "_meta": {"traceparent": traceparent}}, id=1)
        assert response["result"]["content"][0]["text"] == "still"
    served = recorded.finished("tools/call echo")
    assert served.parent is None and format(served.context.trace_id, "032x") != TRACE_ID  # a trace of its own


def test_the_operation_histogram_has_the_conventions_name_unit_and_attributes(recorded: Recorded, server: Server) -> None:
    with PipeClient(server) as client:
        client.initialize()
        for index in range(3):
            client.request("tools/call", {"name": "echo", "arguments": {"text": "x"}}, id=index)
        client.request("tools/call", {"name": "broken", "arguments": {}}, id="failing")

    unit, points = recorded.histogram("mcp.server.operation.duration")
    assert unit == "s"
    by_tool = {(point.attributes.get("gen_ai.tool.name"), point.attributes.get("error.type")): point for point in points}
    echo = by_tool[("echo", None)]
    assert echo.count == 3 and echo.sum > 0
    assert dict(echo.attributes) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "mcp.protocol.version": "2025-11-25",
        "network.transport": "pipe",
    }  # no request id: a metric's attributes must not grow without bound
    assert by_tool[("broken", "tool_error")].count == 1
    assert list(echo.explicit_bounds)[:3] == [0.01, 0.02, 0.05]


def _post(port: int, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/mcp", json.dumps(body), {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null"), dict(response.getheaders())
    finally:
        connection.close()


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_over_http_the_span_says_tcp_and_the_handshake_session(recorded: Recorded, server: Server, era: str) -> None:
    serving = server.start_http("127.0.0.1", 0)
    try:
        port = int(serving.url.rsplit(":", 1)[1].split("/")[0])
        headers: dict[str, str] = {}
        session_id = None
        if era == "handshake":
            params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            status, _, answered = _post(port, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, {})
            session_id = answered["mcp-session-id"] if "mcp-session-id" in answered else answered["Mcp-Session-Id"]
            headers = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
            call = {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"traceparent": TRACEPARENT}}
        else:
            headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
            call = _params(era, {"name": "echo", "arguments": {"text": "hi"}}, {"traceparent": TRACEPARENT})
        status, message, _ = _post(port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, headers)
        assert status == 200 and message["result"]["content"][0]["text"] == "hi"
    finally:
        serving.shutdown()
    served = recorded.finished("tools/call echo")
    assert served.attributes is not None
    assert (served.attributes["network.transport"], served.attributes["network.protocol.name"]) == ("tcp", "http")
    assert served.attributes.get("mcp.session.id") == session_id
    assert format(served.context.trace_id, "032x") == TRACE_ID


def test_a_notification_gets_a_server_span_of_its_own_with_its_parent(recorded: Recorded, server: Server) -> None:
    with PipeClient(server) as client:
        client.initialize()
        client.notify("notifications/initialized", {"_meta": {"traceparent": TRACEPARENT}})
        client.request("ping", id="after")  # read after the notification: its span has ended by now
    told = recorded.finished("notifications/initialized")
    assert told.kind is SpanKind.SERVER and told.status.status_code is StatusCode.UNSET
    assert told.attributes is not None and "jsonrpc.request.id" not in told.attributes  # a notification has no id
    assert (told.attributes["mcp.method.name"], told.attributes["network.transport"]) == ("notifications/initialized", "pipe")
    assert told.parent is not None and format(told.context.trace_id, "032x") == TRACE_ID


def test_over_http_a_handshake_notification_is_traced_with_its_session(recorded: Recorded, server: Server) -> None:
    serving = server.start_http("127.0.0.1", 0)
    try:
        port = int(serving.url.rsplit(":", 1)[1].split("/")[0])
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        _, _, answered = _post(port, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, {})
        session_id = {name.lower(): value for name, value in answered.items()}["mcp-session-id"]
        headers = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            body = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
            connection.request("POST", "/mcp", body, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
            assert connection.getresponse().status == 202
        finally:
            connection.close()
    finally:
        serving.shutdown()
    told = recorded.finished("notifications/initialized")
    assert told.attributes is not None and told.attributes["mcp.session.id"] == session_id


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_over_http_a_traceparent_header_parents_a_request_whose_meta_has_none(recorded: Recorded, server: Server, era: str) -> None:
    serving = server.start_http("127.0.0.1", 0)
    try:
        port = int(serving.url.rsplit(":", 1)[1].split("/")[0])
        trace_headers = {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"}
        if era == "handshake":
            params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            _, _, answered = _post(port, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, {})
            session_id = {name.lower(): value for name, value in answered.items()}["mcp-session-id"]
            headers = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25", **trace_headers}
            call: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}}
        else:
            headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo", **trace_headers}
            call = _params(era, {"name": "echo", "arguments": {"text": "hi"}})
        status, message, _ = _post(port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, headers)
        assert status == 200 and message["result"]["content"][0]["text"] == "hi"
    finally:
        serving.shutdown()
    served = recorded.finished("tools/call echo")
    assert served.parent is not None and (format(served.context.trace_id, "032x"), format(served.parent.span_id, "016x")) == (TRACE_ID, PARENT_ID)
    assert served.context.trace_state.get("rojo") == "00f067aa0ba902b7"
