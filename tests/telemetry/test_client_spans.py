"""The client's spans and histogram, and the trace context they carry: a CLIENT span per request sent,
whose context the server continues (one trace, the server span its child), in both eras, over a
pipe and over HTTP; a failed call's error attributes; nothing added to a request when no SDK
records the span."""

from __future__ import annotations


import pytest
from opentelemetry.trace import SpanKind, StatusCode

import mcpsync
from mcpsync import Server
from mcpsync import McpError
from mcpsync.telemetry import Telemetry

from .recording import Recorded, traced_service

pytestmark = pytest.mark.timeout(60)


def _spans(recorded: Recorded, name: str) -> dict[SpanKind, object]:
    return {span.kind: span for span in recorded.spans.get_finished_spans() if span.name == name}


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_the_server_span_continues_the_client_span_over_a_pipe(recorded: Recorded, mode: str) -> None:
    server = Server("traced", services=[traced_service(recorded)], telemetry=recorded.telemetry)
    with mcpsync.connect(server, mode=mode, telemetry=recorded.telemetry) as session:
        assert session.call_tool("echo", {"text": "hi"})["content"][0]["text"] == "hi"
    spans = _spans(recorded, "tools/call echo")
    client, served = spans[SpanKind.CLIENT], spans[SpanKind.SERVER]
    assert served.parent is not None and served.parent.span_id == client.context.span_id  # type: ignore[attr-defined]
    assert served.context.trace_id == client.context.trace_id  # type: ignore[attr-defined]
    assert client.attributes["network.transport"] == "pipe"  # type: ignore[attr-defined]
    assert client.attributes["mcp.protocol.version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_over_http_the_client_span_names_the_server_and_its_session(recorded: Recorded, mode: str) -> None:
    server = Server("traced", services=[traced_service(recorded)], telemetry=recorded.telemetry)
    serving = server.start_http("127.0.0.1", 0)
    try:
        with mcpsync.connect(serving.url, mode=mode, telemetry=recorded.telemetry) as session:
            session.call_tool("echo", {"text": "hi"})
            with pytest.raises(McpError):
                session.get_prompt("nope")
    finally:
        serving.shutdown()
    spans = _spans(recorded, "tools/call echo")
    client, served = spans[SpanKind.CLIENT], spans[SpanKind.SERVER]
    assert served.parent is not None and served.parent.span_id == client.context.span_id  # type: ignore[attr-defined]
    attributes = dict(client.attributes)  # type: ignore[attr-defined]
    assert (attributes["network.transport"], attributes["server.address"], attributes["server.port"]) == (
        "tcp", "127.0.0.1", int(serving.url.rsplit(":", 1)[1].split("/")[0]))
    if mode == "legacy":
        assert attributes["mcp.session.id"] == served.attributes["mcp.session.id"]  # type: ignore[attr-defined]
    failed = _spans(recorded, "prompts/get nope")[SpanKind.CLIENT]
    assert failed.status.status_code is StatusCode.ERROR  # type: ignore[attr-defined]
    assert failed.attributes["error.type"] == failed.attributes["rpc.response.status_code"]  # type: ignore[attr-defined]
    unit, points = recorded.histogram("mcp.client.operation.duration")
    assert unit == "s" and {point.attributes["mcp.method.name"] for point in points} >= {"tools/call", "prompts/get"}


def test_without_an_sdk_the_client_adds_nothing_to_the_request(recorded: Recorded) -> None:
    """The API alone (no provider set: OpenTelemetry's no-op) records nothing, so the request
    carries no trace context: the server's span starts a trace of its own."""
    server = Server("traced", services=[traced_service(recorded)], telemetry=recorded.telemetry)
    with mcpsync.connect(server, mode="legacy", telemetry=Telemetry()) as session:
        session.call_tool("echo", {"text": "hi"})
    spans = _spans(recorded, "tools/call echo")
    assert list(spans) == [SpanKind.SERVER] and spans[SpanKind.SERVER].parent is None  # type: ignore[attr-defined]
