"""traced_gateway.py: one trace from a client through a gateway to the server behind it (run: python traced_gateway.py).

Needs `pip install 'mcpsync[otel]' opentelemetry-sdk`. The upstream serves HTTP on a free port of this
process and the gateway forwards to it; in a deployment each is its own process, exporting to one
collector, and the trace is the same: the client's span, the gateway's, the gateway's call upstream,
the upstream's, each the child of the one before.
"""
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mcpsync
from mcpsync import Server, Service
from mcpsync.telemetry import Telemetry

spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)

weather = Service("weather")


@weather.tool
def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    return f"Sunny in {city}"


upstream = Server("weather", services=[weather], telemetry=Telemetry()).start_http("127.0.0.1", 0)
gateway = Server("gateway", telemetry=Telemetry())  # its Telemetry before add_remote: the calls upstream are traced too
try:
    gateway.add_remote("weather", upstream.url, prefix="weather_")
    with mcpsync.connect(gateway, telemetry=Telemetry()) as session:
        print(session.call_tool("weather_forecast", {"city": "Lisbon"})["content"][0]["text"])
finally:
    gateway.close()
    upstream.shutdown()

calls = [span for span in spans.get_finished_spans() if span.name.startswith("tools/call")]
children: dict[int | None, list[ReadableSpan]] = {}
for span in calls:
    children.setdefault(span.parent.span_id if span.parent else None, []).append(span)


def show(span: ReadableSpan, depth: int) -> None:
    print(f"{'  ' * depth}{span.kind.name:<6} {span.name}")
    for child in children.get(span.context.span_id, []):
        show(child, depth + 1)


for root in children[None]:
    show(root, 0)
print("one trace:", len({span.context.trace_id for span in calls}) == 1)
