"""collector.py: a stand-in for an OpenTelemetry Collector, to see what `mcpsync serve --otel` sends.

Run `python collector.py 127.0.0.1:4318` (OTLP/HTTP's usual port), point OTEL_EXPORTER_OTLP_ENDPOINT
at it, and `python collector.py --show 127.0.0.1:4318` prints what has come so far: each span with
its service and kind, and the name of each metric. It decodes the protobuf payloads with
opentelemetry-proto, which comes with opentelemetry-exporter-otlp-proto-http. A real collector
(or Jaeger, Tempo, Honeycomb...) listens at the same address and paths.
"""
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest, ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span

received: list[str] = []
lock = threading.Lock()


def service_of(resource) -> str:
    return next((a.value.string_value for a in resource.attributes if a.key == "service.name"), "?")


def spans(request: ExportTraceServiceRequest) -> list[str]:
    return [f"{service_of(group.resource)}: {Span.SpanKind.Name(span.kind).removeprefix('SPAN_KIND_')} {span.name}"
            for group in request.resource_spans for scope in group.scope_spans for span in scope.spans]


def metrics(request: ExportMetricsServiceRequest) -> list[str]:
    return [f"{service_of(group.resource)}: metric {metric.name} ({metric.unit})"
            for group in request.resource_metrics for scope in group.scope_metrics for metric in scope.metrics]


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        kinds = {"/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse, spans),
                 "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse, metrics)}
        if self.path not in kinds:
            self.send_error(404)
            return
        request_type, answer_type, lines = kinds[self.path]
        request = request_type()
        request.ParseFromString(body)
        with lock:
            received.extend(line for line in lines(request) if line not in received)
        self.answer(200, "application/x-protobuf", answer_type().SerializeToString())

    def do_GET(self) -> None:  # what --show reads
        with lock:
            self.answer(200, "text/plain", "".join(line + "\n" for line in received).encode())

    def answer(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args) -> None:
        pass


if sys.argv[1] == "--show":
    with urllib.request.urlopen(f"http://{sys.argv[2]}/", timeout=10) as response:
        print(response.read().decode(), end="")
else:
    host, port = sys.argv[1].rsplit(":", 1)
    collector = ThreadingHTTPServer((host, int(port)), Receiver)
    print(f"collecting OTLP/HTTP at http://{sys.argv[1]}", flush=True)
    collector.serve_forever()
