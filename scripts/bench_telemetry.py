"""A target for scripts/bench-http: the demo service with telemetry on, recording every span and
duration with the OpenTelemetry SDK and handing the spans to an exporter that drops them. So the
figures are the cost of tracing and measuring in the server, not of sending anywhere.

    scripts/bench-http --mcpsync-target scripts/bench_telemetry.py --servers floor,mcpsync

Run the same bench without `--mcpsync-target` for telemetry off; the floor in each run is what the
two runs are compared through.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from mcpsync import Server
from mcpsync.cli.demo import build_demo_service
from mcpsync.telemetry import Telemetry


class Dropped(SpanExporter):
    """Takes every batch and keeps nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


tracer_provider = TracerProvider()
tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])  # the histograms aggregate, as under a real reader
server = Server("mcpsync-demo", services=[build_demo_service()], telemetry=Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider))
