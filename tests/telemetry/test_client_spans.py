"""The client's spans and histogram, and the trace context they carry: a CLIENT span per request sent,
whose context the server continues (one trace, the server span its child), in both eras, over a
pipe and over HTTP; a failed call's error attributes; nothing added to a request when no SDK
records the span."""

from __future__ import annotations

import queue
import socket
import threading

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


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_a_tasks_own_spans_stay_in_the_trace_of_the_call_that_made_it(recorded: Recorded, mode: str) -> None:
    service = mcpsync.Service("tasks")
    inner = recorded.tracer_provider.get_tracer("the-task")

    @service.tool(task="required")
    def report(ctx: mcpsync.Context) -> str:
        """A long job: its work is a span of its own, on the task pool's thread."""
        with inner.start_as_current_span("compile the report"):
            return "done"

    server = Server("tasks", services=[service], telemetry=recorded.telemetry)
    try:
        with mcpsync.connect(server, mode=mode, telemetry=recorded.telemetry) as session:
            handle = session.call_tool("report", {}, task=True)
            assert handle.result(timeout=30)["content"][0]["text"] == "done"
    finally:
        server.close()
    client = _spans(recorded, "tools/call report")[SpanKind.CLIENT]
    [work] = [span for span in recorded.spans.get_finished_spans() if span.name == "compile the report"]
    assert work.context.trace_id == client.context.trace_id  # type: ignore[attr-defined]
    served = _spans(recorded, "tools/call report")[SpanKind.SERVER]
    assert work.parent is not None and work.parent.span_id == served.context.span_id  # type: ignore[attr-defined]


def test_over_http_the_client_sends_its_trace_context_as_headers_too(recorded: Recorded) -> None:
    """What a proxy or an HTTP instrumentation between them sees: the head of the client's POST
    names the trace of the request's span (read here by a socket that answers 500 and closes)."""
    heads: queue.Queue[bytes] = queue.Queue()
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_once() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head:
                head += connection.recv(65536)
            heads.put(head)
            connection.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=answer_once, name="test-head-reader")
    thread.start()
    try:
        with pytest.raises(Exception):
            mcpsync.connect(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", mode="modern", telemetry=recorded.telemetry, timeout=10)
        head = heads.get(timeout=10).decode("latin-1").lower()
    finally:
        thread.join(10)
        listener.close()
    [sent] = [span for span in recorded.spans.get_finished_spans() if span.kind is SpanKind.CLIENT]
    expected = f"traceparent: 00-{format(sent.context.trace_id, '032x')}-{format(sent.context.span_id, '016x')}-"
    assert any(line.startswith(expected) for line in head.splitlines()), head


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_each_side_measures_how_long_the_session_lasted(recorded: Recorded, mode: str) -> None:
    server = Server("traced", services=[traced_service(recorded)], telemetry=recorded.telemetry)
    with mcpsync.connect(server, mode=mode, telemetry=recorded.telemetry) as session:
        session.call_tool("echo", {"text": "hi"})
    version = "2025-11-25" if mode == "legacy" else "2026-07-28"
    for name in ("mcp.client.session.duration", "mcp.server.session.duration"):
        unit, points = recorded.histogram(name)
        [point] = points
        assert unit == "s" and point.count == 1 and point.sum > 0, name
        assert dict(point.attributes) == {"network.transport": "pipe", "mcp.protocol.version": version}, name


def test_over_http_the_server_measures_a_handshake_session_from_initialize_to_delete(recorded: Recorded) -> None:
    server = Server("traced", services=[traced_service(recorded)], telemetry=recorded.telemetry)
    serving = server.start_http("127.0.0.1", 0)
    try:
        with mcpsync.connect(serving.url, mode="legacy") as session:  # its close DELETEs the session
            session.call_tool("echo", {"text": "hi"})
        with mcpsync.connect(serving.url, mode="modern") as session:  # no session in 2026-07-28
            session.call_tool("echo", {"text": "hi"})
    finally:
        serving.shutdown()
    unit, points = recorded.histogram("mcp.server.session.duration")
    [point] = points
    assert unit == "s" and point.count == 1 and point.sum > 0
    assert dict(point.attributes) == {"network.transport": "tcp", "network.protocol.name": "http", "network.protocol.version": "1.1",
                                      "mcp.protocol.version": "2025-11-25"}


def test_a_notification_the_client_sends_is_a_client_span_the_server_continues(recorded: Recorded) -> None:
    server = Server("traced", services=[traced_service(recorded)], telemetry=recorded.telemetry)
    with mcpsync.connect(server, mode="legacy", telemetry=recorded.telemetry) as session:  # sends notifications/initialized
        session.call_tool("echo", {"text": "after"})  # read after the notification: its server span has ended
    spans = _spans(recorded, "notifications/initialized")
    sent, received = spans[SpanKind.CLIENT], spans[SpanKind.SERVER]
    assert "jsonrpc.request.id" not in sent.attributes  # type: ignore[attr-defined]
    assert received.parent is not None and received.parent.span_id == sent.context.span_id  # type: ignore[attr-defined]
