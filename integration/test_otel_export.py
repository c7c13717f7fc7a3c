"""`mcpsync serve --otel` exports by OTLP/HTTP what it traced and measured, proven at a receiver
started here that decodes the protobuf payloads with OpenTelemetry's own protocol definitions
(`opentelemetry-proto`): what leaves the process, not only what the SDK held. The standard
`OTEL_*` variables choose the endpoint and the service name; the client's trace context sent in
`params._meta` is the parent of the exported span; the duration histogram arrives with its unit.
And what a user gets wrong is said in one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from fixtures.otlp_receiver import GrpcReceiver, Receiver
from opentelemetry.proto.trace.v1.trace_pb2 import Span

import mcpsync

pytestmark = pytest.mark.timeout(120)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
LONG = 30.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def _env(receiver: Receiver, **extra: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "otel-export-test", **extra}


def _attributes(span: Span) -> dict[str, Any]:
    values = {}
    for attribute in span.attributes:
        value = attribute.value
        values[attribute.key] = value.string_value if value.HasField("string_value") else value.int_value
    return values


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_serve_otel_exports_the_spans_and_the_durations_to_the_otlp_endpoint(receiver: Receiver, mode: str) -> None:
    command = [sys.executable, "-m", "mcpsync", "serve", "--otel"]
    with mcpsync.connect(command, mode=mode, env=_env(receiver)) as session:
        meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
        result = session.request("tools/call", {"name": "echo", "arguments": {"text": "exported"}, "_meta": meta})
        assert result["content"][0]["text"] == "exported"
    # The session's end is the server's end of input: it exits, and flushes on the way out.
    traces = receiver.wait_for("/v1/traces")
    [resource_spans] = traces.resource_spans
    resource = {attribute.key: attribute.value.string_value for attribute in resource_spans.resource.attributes}
    assert resource["service.name"] == "otel-export-test"
    spans = [span for scope in resource_spans.scope_spans for span in scope.spans]
    [call] = [span for span in spans if span.name == "tools/call echo"]
    assert call.kind == Span.SPAN_KIND_SERVER
    assert (call.trace_id.hex(), call.parent_span_id.hex()) == (TRACE_ID, PARENT_ID)
    attributes = _attributes(call)
    assert attributes["mcp.method.name"] == "tools/call" and attributes["gen_ai.tool.name"] == "echo"
    assert attributes["network.transport"] == "pipe"
    assert attributes["mcp.protocol.version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")

    measured = receiver.wait_for("/v1/metrics")
    metrics = {metric.name: metric for resource in measured.resource_metrics for scope in resource.scope_metrics for metric in scope.metrics}
    duration = metrics["mcp.server.operation.duration"]
    assert duration.unit == "s"
    points = duration.histogram.data_points
    assert any(point.count >= 1 and {a.key: a.value.string_value for a in point.attributes}.get("gen_ai.tool.name") == "echo" for point in points)


def _serve_fails(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpsync", "serve", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=60, env={**os.environ, **env},
    )


def test_serve_otel_exports_over_grpc_when_the_environment_says_so() -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL=grpc: the same span and duration reach a gRPC receiver (grpcio's
    server with opentelemetry-proto's service definitions)."""
    grpc_receiver = GrpcReceiver()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": grpc_receiver.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "true",
               "OTEL_SERVICE_NAME": "otel-grpc-test"}
        with mcpsync.connect([sys.executable, "-m", "mcpsync", "serve", "--otel"], env=env) as session:
            meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
            assert session.request("tools/call", {"name": "echo", "arguments": {"text": "by grpc"}, "_meta": meta})["content"][0]["text"] == "by grpc"
        traces = grpc_receiver.wait_for("/v1/traces")
        spans = [span for group in traces.resource_spans for scope in group.scope_spans for span in scope.spans]
        [call] = [span for span in spans if span.name == "tools/call echo"]
        assert (call.trace_id.hex(), call.parent_span_id.hex()) == (TRACE_ID, PARENT_ID)
        measured = grpc_receiver.wait_for("/v1/metrics")
        names = {metric.name for group in measured.resource_metrics for scope in group.scope_metrics for metric in scope.metrics}
        assert "mcp.server.operation.duration" in names
    finally:
        grpc_receiver.close()


def test_a_protocol_without_an_exporter_is_refused_in_one_line(receiver: Receiver) -> None:
    done = _serve_fails("--otel", env=_env(receiver, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json"))
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: --otel: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='http/json': mcpsync exports over http/protobuf or grpc"


def test_prometheus_with_processes_is_a_usage_error(receiver: Receiver) -> None:
    """One scrape port cannot answer for several workers; --otel can (integration/test_otel_replicas.py)."""
    done = _serve_fails("--prometheus", "127.0.0.1:0", "--http", "127.0.0.1:0", "--processes", "2", env=_env(receiver))
    assert done.returncode == 2 and "--prometheus answers for one process, and --processes runs several: use --otel" in done.stderr


def test_serve_prometheus_answers_scrapes_with_the_durations_and_the_gauges(tmp_path: Any) -> None:
    stderr_path = tmp_path / "stderr.log"
    command = [sys.executable, "-m", "mcpsync", "serve", "--prometheus", "127.0.0.1:0"]
    with stderr_path.open("w") as stderr, mcpsync.connect(command, mode="legacy", stderr=stderr) as session:
        assert session.call_tool("echo", {"text": "scraped"})["content"][0]["text"] == "scraped"
        [announced] = [line for line in stderr_path.read_text().splitlines() if "metrics for Prometheus at" in line]
        url = announced.rsplit(" ", 1)[1]
        with urllib.request.urlopen(url, timeout=LONG) as response:
            assert response.status == 200
            text = response.read().decode()
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    calls = [line for line in samples if line.startswith("mcp_server_operation_duration_seconds_count{") and 'gen_ai_tool_name="echo"' in line]
    assert len(calls) == 1 and calls[0].endswith(" 1.0"), text
    sessions = [line for line in samples if line.startswith("mcpsync_server_sessions_active")]
    assert len(sessions) == 1 and sessions[0].endswith(" 1.0"), text  # this session, initialized


def test_a_prometheus_address_that_is_taken_is_said_in_one_line(receiver: Receiver) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = _serve_fails("--prometheus", f"127.0.0.1:{taken.getsockname()[1]}", env={})
    assert done.returncode == 1 and done.stderr.startswith("Error: --prometheus: cannot serve on 127.0.0.1:"), done.stderr
