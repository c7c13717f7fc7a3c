"""One trace through a gateway: the client's CLIENT span, the gateway's SERVER span as its child,
the gateway's CLIENT span to the upstream as the SERVER span's child, and the upstream's SERVER span
as the last; with an HTTP upstream (in this process) and a stdio upstream (a child process that
writes its spans to a file), in both of the client's eras."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind

import mcpsync
from mcpsync import Server

from .recording import Recorded, traced_service

pytestmark = pytest.mark.timeout(60)

UPSTREAM = Path(__file__).with_name("traced_upstream.py")


def _ids(span: Any) -> tuple[str, str, str | None]:
    parent = span.parent
    return format(span.context.trace_id, "032x"), format(span.context.span_id, "016x"), format(parent.span_id, "016x") if parent else None


def _one(recorded: Recorded, name: str, kind: SpanKind) -> Any:
    found = [span for span in recorded.spans.get_finished_spans() if span.name == name and span.kind is kind]
    assert len(found) == 1, [(span.name, span.kind) for span in recorded.spans.get_finished_spans()]
    return found[0]


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_a_call_through_the_gateway_to_an_http_upstream_is_one_trace(recorded: Recorded, mode: str) -> None:
    upstream = Server("upstream", services=[traced_service(recorded)], telemetry=recorded.telemetry).start_http("127.0.0.1", 0)
    gateway = Server("gateway", telemetry=recorded.telemetry)
    try:
        gateway.add_remote("up", upstream.url, prefix="up_", mode=mode)
        with mcpsync.connect(gateway, mode=mode, telemetry=recorded.telemetry) as session:
            assert session.call_tool("up_echo", {"text": "hi"})["content"][0]["text"] == "hi"
    finally:
        gateway.close()
        upstream.shutdown()
    client = _ids(_one(recorded, "tools/call up_echo", SpanKind.CLIENT))
    at_gateway = _ids(_one(recorded, "tools/call up_echo", SpanKind.SERVER))
    forwarded = _ids(_one(recorded, "tools/call echo", SpanKind.CLIENT))
    at_upstream = _ids(_one(recorded, "tools/call echo", SpanKind.SERVER))
    assert len({client[0], at_gateway[0], forwarded[0], at_upstream[0]}) == 1
    assert (at_gateway[2], forwarded[2], at_upstream[2]) == (client[1], at_gateway[1], forwarded[1])


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_a_call_through_the_gateway_to_a_stdio_upstream_is_one_trace(recorded: Recorded, mode: str, tmp_path: Path) -> None:
    trace_file = tmp_path / "upstream-spans.jsonl"
    gateway = Server("gateway", telemetry=recorded.telemetry)
    try:
        gateway.add_remote("up", [sys.executable, "-m", "mcpsync", "serve", str(UPSTREAM)], env={"TRACE_FILE": str(trace_file)}, prefix="up_", mode=mode)
        with mcpsync.connect(gateway, mode=mode, telemetry=recorded.telemetry) as session:
            assert session.call_tool("up_echo", {"text": "hi"})["content"][0]["text"] == "hi"
    finally:
        gateway.close()
    forwarded = _ids(_one(recorded, "tools/call echo", SpanKind.CLIENT))
    at_gateway = _ids(_one(recorded, "tools/call up_echo", SpanKind.SERVER))
    child_spans = [json.loads(line) for line in trace_file.read_text().splitlines()]
    at_upstream = [span for span in child_spans if span["name"] == "tools/call echo"]
    assert len(at_upstream) == 1 and at_upstream[0]["kind"] == "SERVER", child_spans
    assert (at_upstream[0]["trace_id"], at_upstream[0]["parent_id"]) == (forwarded[0], forwarded[1])
    assert forwarded[2] == at_gateway[1]
