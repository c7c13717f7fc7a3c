"""What the server sends the client is traced too, as the conventions ask of a server that initiates:
a CLIENT span on the server for each request to the client (handshake era) and each notification
(progress, and what a listen is told), whose context the client continues with a SERVER span of
its own; so an elicitation a tool asks for, and the callback that answers it, stay in the trace
of the call, and a listen's notifications in the trace of the listen. Over a pipe and over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import mcpsync
from mcpsync import Context, McpError, Server, Service
from mcpsync.client import ListChanged

from .recording import Recorded

pytestmark = pytest.mark.timeout(60)


def _asking_service() -> Service:
    service = Service("asking")

    @service.tool
    def confirm(ctx: Context) -> str:
        """Asks the user, telling its progress first."""
        ctx.progress(1, 2, "asking")
        answer = ctx.elicit("Go on?", {"type": "object", "properties": {"go": {"type": "boolean"}}})
        return str(answer["action"])

    @service.tool
    def spare() -> str:
        """Removed by the listen test, so the listens are told."""
        return "spare"

    return service


@contextmanager
def _session(recorded: Recorded, server: Server, transport: str, mode: str, **options: Any) -> Iterator[mcpsync.ClientSession]:
    if transport == "pipe":
        with mcpsync.connect(server, mode=mode, telemetry=recorded.telemetry, **options) as session:
            yield session
        return
    serving = server.start_http("127.0.0.1", 0)
    try:
        with mcpsync.connect(serving.url, mode=mode, telemetry=recorded.telemetry, **options) as session:
            yield session
    finally:
        serving.close()


def _hear_a_tools_change(session: mcpsync.ClientSession, service: Service) -> None:
    """Listen for tool changes, make one, and hear it."""
    listener = session.listen(tools=True, prompts=False)
    try:
        service.remove_tool("spare")
        assert listener.next_event(10) == ListChanged("tools")
    finally:
        listener.close()


def _one(recorded: Recorded, name: str, kind: SpanKind) -> ReadableSpan:
    found = [span for span in recorded.spans.get_finished_spans() if span.name == name and span.kind is kind]
    assert len(found) == 1, [(span.name, span.kind) for span in recorded.spans.get_finished_spans()]
    return found[0]


def _is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    return (
        child.parent is not None
        and child.parent.span_id == parent.context.span_id
        and child.context.trace_id == parent.context.trace_id
    )


@pytest.mark.parametrize("transport", ["pipe", "http"])
def test_an_elicitation_and_its_callback_stay_in_the_trace_of_the_call(recorded: Recorded, transport: str) -> None:
    callback_tracer = recorded.tracer_provider.get_tracer("the-callback")

    def elicitation(params: dict[str, Any]) -> dict[str, Any]:
        with callback_tracer.start_as_current_span("asking the user"):
            return {"action": "accept", "content": {"go": True}}

    server = Server("asking", services=[_asking_service()], telemetry=recorded.telemetry)
    progress: list[Any] = []
    with _session(recorded, server, transport, "legacy", elicitation=elicitation) as session:
        result = session.call_tool("confirm", progress=lambda *given: progress.append(given))
    assert result["content"][0]["text"] == "accept" and progress

    call = _one(recorded, "tools/call confirm", SpanKind.SERVER)
    asked = _one(recorded, "elicitation/create", SpanKind.CLIENT)  # the server's, as it asks
    answered = _one(recorded, "elicitation/create", SpanKind.SERVER)  # the client's, as it answers
    told = _one(recorded, "notifications/progress", SpanKind.CLIENT)
    heard = _one(recorded, "notifications/progress", SpanKind.SERVER)
    assert _is_child(asked, call) and _is_child(answered, asked)
    assert _is_child(_one(recorded, "asking the user", SpanKind.INTERNAL), answered)  # the callback's own
    assert _is_child(told, call) and _is_child(heard, told)
    assert call.context.trace_id == _one(recorded, "tools/call confirm", SpanKind.CLIENT).context.trace_id
    network = "pipe" if transport == "pipe" else "tcp"
    for span in (asked, answered, told, heard):
        assert span.attributes is not None
        assert span.attributes["network.transport"] == network
        assert span.attributes["mcp.protocol.version"] == "2025-11-25"
    callback = _one(recorded, "asking the user", SpanKind.INTERNAL)
    assert asked.end_time is not None and callback.end_time is not None
    assert asked.end_time >= callback.end_time  # the server's span waits for the answer
    if transport == "http":  # the handshake session both sides name
        assert asked.attributes is not None and answered.attributes is not None
        assert asked.attributes["mcp.session.id"] == answered.attributes["mcp.session.id"]


def test_an_elicitation_the_client_refuses_is_an_error_on_both_sides(recorded: Recorded) -> None:
    def elicitation(params: dict[str, Any]) -> dict[str, Any]:
        raise McpError(-32042, "not now")

    server = Server("asking", services=[_asking_service()], telemetry=recorded.telemetry)
    with _session(recorded, server, "pipe", "legacy", elicitation=elicitation) as session:
        result = session.call_tool("confirm")
    assert result["isError"] is True
    for kind in (SpanKind.CLIENT, SpanKind.SERVER):
        span = _one(recorded, "elicitation/create", kind)
        assert span.attributes is not None and span.attributes["error.type"] == "-32042"
        assert span.status.status_code is StatusCode.ERROR and span.status.description == "not now"


@pytest.mark.parametrize("transport", ["pipe", "http"])
def test_what_a_listen_is_told_stays_in_the_trace_of_the_listen(recorded: Recorded, transport: str) -> None:
    service = _asking_service()
    server = Server("asking", services=[service], telemetry=recorded.telemetry)
    with _session(recorded, server, transport, "modern") as session:
        _hear_a_tools_change(session, service)
    listen = _one(recorded, "subscriptions/listen", SpanKind.SERVER)
    told = _one(recorded, "notifications/tools/list_changed", SpanKind.CLIENT)
    heard = _one(recorded, "notifications/tools/list_changed", SpanKind.SERVER)
    assert _is_child(told, listen) and _is_child(heard, told)
    assert listen.context.trace_id == _one(recorded, "subscriptions/listen", SpanKind.CLIENT).context.trace_id
    assert told.attributes is not None and told.attributes["mcp.protocol.version"] == "2026-07-28"


def test_untraced_the_listen_is_told_no_trace_context(recorded: Recorded) -> None:
    """A server without telemetry adds nothing to what a listen is told (the client traces alone)."""
    service = _asking_service()
    server = Server("asking", services=[service])
    with _session(recorded, server, "pipe", "modern") as session:
        _hear_a_tools_change(session, service)
    heard = _one(recorded, "notifications/tools/list_changed", SpanKind.SERVER)
    assert heard.parent is None  # a root of its own: the server sent no context


def test_each_listen_is_told_in_its_own_trace_never_another_clients(recorded: Recorded) -> None:
    """Two clients listen to one server: a change reaches both, each copy carrying its own listen's
    trace, so no client learns another's trace id (which may name its user's request)."""
    service = _asking_service()
    server = Server("asking", services=[service], telemetry=recorded.telemetry)
    serving = server.start_http("127.0.0.1", 0)
    heard: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    try:
        sessions = {name: mcpsync.connect(serving.url, mode="modern", telemetry=recorded.telemetry,
                                          on_change=lambda method, params, name=name: heard[name].append(params))
                    for name in heard}
        listeners = {name: session.listen(tools=True, prompts=False) for name, session in sessions.items()}
        service.remove_tool("spare")
        for listener in listeners.values():
            assert listener.next_event(10) == ListChanged("tools")
        for listener in listeners.values():
            listener.close()
        for session in sessions.values():
            session.close()
    finally:
        serving.close()
    listens = sorted(  # a's listen began first
        (span for span in recorded.spans.get_finished_spans() if span.name == "subscriptions/listen" and span.kind is SpanKind.CLIENT),
        key=lambda span: span.start_time or 0,
    )
    assert len(listens) == 2 and listens[0].context.trace_id != listens[1].context.trace_id
    carried = {name: {params["_meta"]["traceparent"].split("-")[1] for params in told} for name, told in heard.items()}
    assert carried == {name: {format(span.context.trace_id, "032x")} for name, span in zip("ab", listens, strict=True)}
