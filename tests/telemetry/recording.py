"""What the telemetry tests read spans and metrics from: the OpenTelemetry SDK's in-memory exporter
and reader behind a `Telemetry`, and a service with one entry of each kind to trace."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpsync import Service
from mcpsync.telemetry import Telemetry


class Recorded:
    """An SDK tracer provider and meter provider that keep what they are given."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])
        self.telemetry = Telemetry(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)

    def finished(self, name: str) -> ReadableSpan:
        found = [span for span in self.spans.get_finished_spans() if span.name == name]
        assert len(found) == 1, [span.name for span in self.spans.get_finished_spans()]
        return found[0]

    def histogram(self, name: str) -> tuple[str, list[Any]]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        return metric.unit, list(metric.data.data_points)
        raise AssertionError(f"no metric {name}")


def traced_service(recorded: Recorded) -> Service:
    service = Service("traced")
    inner_tracer = recorded.tracer_provider.get_tracer("the-tool")

    @service.tool
    def echo(text: str) -> str:
        """Says it back."""
        return text

    @service.tool
    def broken() -> str:
        """Fails."""
        raise RuntimeError("the disk is full")

    @service.tool
    def nested() -> str:
        """Makes a span of its own."""
        with inner_tracer.start_as_current_span("inner work"):
            return trace.get_current_span().get_span_context().trace_id.to_bytes(16, "big").hex()

    @service.prompt
    def greeting(name: str) -> str:
        """A greeting."""
        return f"Hello {name}"

    @service.resource("mem://notes")
    def notes() -> str:
        return "notes"

    return service
