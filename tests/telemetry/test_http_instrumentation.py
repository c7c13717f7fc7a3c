"""mcpsync's WSGI app inside OpenTelemetry's own HTTP instrumentation (opentelemetry-instrumentation-wsgi,
code nobody here wrote), served over a real socket by the standard library's WSGI server: the MCP
span and the HTTP server span relate as the conventions say. The context in `params._meta` is the
MCP span's parent and the HTTP span is linked to it; without one, the MCP span is the HTTP span's
child, and a `traceparent` header (which the instrumentation continues) puts both in the client's
trace. In both eras, wherever the request runs (the server's worker threads, not the WSGI one)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import ReadableSpan

from mcpsync import Context, Server

from .._timeouts import LONG, wait_until
from .recording import Recorded, traced_service

pytestmark = pytest.mark.timeout(60)

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
TOOLS = ["echo", "worker_echo"]
WSGI_SCOPE = "opentelemetry.instrumentation.wsgi"
POSTS = {"modern": 1, "handshake": 2}  # a handshake-era call follows its session's initialize  # run on the WSGI thread, and on one of the server's workers


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class Instrumented:
    """A traced Server's WSGI app wrapped in OpenTelemetryMiddleware, served on a loopback port."""

    def __init__(self, recorded: Recorded) -> None:
        service = traced_service(recorded)

        @service.tool
        def worker_echo(text: str, ctx: Context) -> str:
            """Says it back; its Context makes it run on a worker thread, not the WSGI one."""
            return text

        self.server = Server("traced", services=[service], telemetry=recorded.telemetry)
        app = OpenTelemetryMiddleware(self.server.wsgi_app(), tracer_provider=recorded.tracer_provider)
        self.httpd = make_server("127.0.0.1", 0, app, server_class=_ThreadingWSGIServer, handler_class=_Quiet)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="test-wsgiref")
        self.thread.start()

    def post(self, frame: dict[str, Any], *, version: str, session: str | None = None, traceparent: str | None = None) -> tuple[int, Any, str | None]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version}
        if version == MODERN and "method" in frame:
            headers["Mcp-Method"] = frame["method"]
            if "name" in frame.get("params", {}):
                headers["Mcp-Name"] = frame["params"]["name"]
        if session is not None:
            headers["Mcp-Session-Id"] = session
        if traceparent is not None:
            headers["traceparent"] = traceparent
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=LONG)
        try:
            connection.request("POST", "/mcp", json.dumps(frame), headers)
            response = connection.getresponse()
            body = response.read()
            return response.status, json.loads(body) if body else None, response.getheader("Mcp-Session-Id")
        finally:
            connection.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(LONG)
        self.server.close()


@pytest.fixture
def instrumented(recorded: Recorded) -> Iterator[Instrumented]:
    served = Instrumented(recorded)
    yield served
    served.close()


def _call(instrumented: Instrumented, era: str, tool: str, meta: dict[str, Any] | None = None, traceparent: str | None = None) -> None:
    """`tools/call` of an echoing `tool` in the era (a handshake session first), with `meta` in its params."""
    session = None
    if era == "handshake":
        init = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        status, _, session = instrumented.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, version=HANDSHAKE)
        assert status == 200 and session is not None
    params: dict[str, Any] = {"name": tool, "arguments": {"text": "hi"}}
    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}} if era == "modern" else {}
    if meta or envelope:
        params["_meta"] = {**envelope, **(meta or {})}
    frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    status, answer, _ = instrumented.post(frame, version=MODERN if era == "modern" else HANDSHAKE, session=session, traceparent=traceparent)
    assert status == 200 and answer["result"]["content"][0]["text"] == "hi", answer


def _spans(recorded: Recorded, tool: str, posts: int) -> tuple[ReadableSpan, ReadableSpan]:
    """The MCP span of the call, and the HTTP server span of the POST that carried it: once the
    spans of all `posts` POSTs have ended (the WSGI server ends one as it closes the response, a
    moment after the client has read all of it), the last to begin before the call's."""
    found: list[ReadableSpan] = []

    def carried() -> bool:
        finished = recorded.spans.get_finished_spans()
        calls = [span for span in finished if span.name == f"tools/call {tool}"]
        if not calls:
            return False
        call = calls[0]
        http = [span for span in finished if span.instrumentation_scope is not None and span.instrumentation_scope.name == WSGI_SCOPE]
        if len(http) < posts:
            return False
        carrier = max((span for span in http if (span.start_time or 0) <= (call.start_time or 0)), key=lambda span: span.start_time or 0)
        assert (carrier.end_time or 0) >= (call.end_time or 0)
        found[:] = [call, carrier]
        return True

    wait_until(carried)
    return found[0], found[1]


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("era", ["modern", "handshake"])
def test_the_meta_context_is_the_parent_and_the_http_span_a_link(recorded: Recorded, instrumented: Instrumented, era: str, tool: str) -> None:
    _call(instrumented, era, tool, meta={"traceparent": TRACEPARENT})
    mcp, carrier = _spans(recorded, tool, POSTS[era])
    assert mcp.parent is not None and (f"{mcp.context.trace_id:032x}", f"{mcp.parent.span_id:016x}") == (CLIENT_TRACE, CLIENT_SPAN)
    assert [link.context.span_id for link in mcp.links] == [carrier.context.span_id]  # the transport's context, linked
    assert carrier.context.trace_id != mcp.context.trace_id  # the HTTP request had no context of its own


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("era", ["modern", "handshake"])
def test_without_meta_the_mcp_span_is_the_http_spans_child(recorded: Recorded, instrumented: Instrumented, era: str, tool: str) -> None:
    _call(instrumented, era, tool)
    mcp, carrier = _spans(recorded, tool, POSTS[era])
    assert mcp.parent is not None and mcp.parent.span_id == carrier.context.span_id
    assert mcp.context.trace_id == carrier.context.trace_id and not mcp.links


@pytest.mark.parametrize("tool", TOOLS)
def test_a_traceparent_header_puts_both_spans_in_the_clients_trace(recorded: Recorded, instrumented: Instrumented, tool: str) -> None:
    """The instrumentation continues the header; mcpsync then parents on the HTTP span (it does not
    take the header a second time, which would make the two spans siblings)."""
    _call(instrumented, "modern", tool, traceparent=TRACEPARENT)
    mcp, carrier = _spans(recorded, tool, POSTS["modern"])
    assert carrier.parent is not None and f"{carrier.parent.span_id:016x}" == CLIENT_SPAN
    assert mcp.parent is not None and mcp.parent.span_id == carrier.context.span_id
    assert f"{mcp.context.trace_id:032x}" == CLIENT_TRACE
