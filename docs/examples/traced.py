"""traced.py: a server and a client tracing with OpenTelemetry, one trace across both (run: python traced.py).

Needs `pip install 'mcpsync[otel]' opentelemetry-sdk`. A real deployment exports to a collector
(OTLP) instead of printing; the spans are the same.
"""
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import mcpsync
from mcpsync import Server, Service
from mcpsync.telemetry import Telemetry

finished: list[ReadableSpan] = []


def one_line(span: ReadableSpan) -> str:
    finished.append(span)
    shown = {key: value for key, value in (span.attributes or {}).items() if key in ("gen_ai.tool.name", "network.transport", "error.type")}
    return f"{span.kind.name:<6} {span.name:<22} {shown}\n"


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=one_line)))
trace.set_tracer_provider(provider)  # what Telemetry() uses when given no provider

service = Service("weather")


@service.tool
def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    with trace.get_tracer("weather").start_as_current_span("look up the forecast"):  # a child of the request's span
        return f"Sunny in {city}"


@service.tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("the station is offline")


server = Server("weather", services=[service], telemetry=Telemetry())
with mcpsync.connect(server, telemetry=Telemetry()) as session:  # this process's server, on a pipe
    print(session.call_tool("forecast", {"city": "Lisbon"})["content"][0]["text"])
    print(session.call_tool("broken", {})["isError"])

client_span, server_span = (next(s for s in finished if s.name == "tools/call forecast" and s.kind.name == kind) for kind in ("CLIENT", "SERVER"))
print("one trace:", server_span.context.trace_id == client_span.context.trace_id)
print("the server's span is the client's child:", server_span.parent is not None and server_span.parent.span_id == client_span.context.span_id)
