"""OTLP export configured by OpenTelemetry's environment variables (`Telemetry.from_environment`,
`mcpsync serve --otel`): the one place mcpsync itself picks an SDK and an exporter, since there the
command line is the application. Everything else takes the providers the application set up.

The exporters read their endpoint, headers, timeout and compression from the `OTEL_EXPORTER_OTLP_*`
variables themselves; the SDK's `Resource.create()` reads `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES`, and its periodic reader `OTEL_METRIC_EXPORT_INTERVAL`.
"""

from __future__ import annotations

import os
from typing import Any

PROTOCOL = "http/protobuf"
"""OTLP's default protocol, and the one mcpsync exports over; for gRPC, give `Telemetry` the
providers of your own making."""


def otlp_providers() -> tuple[Any, Any]:
    """An SDK tracer provider exporting batched spans, and a meter provider exporting its metrics
    periodically, both by OTLP over HTTP (protobuf)."""
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", PROTOCOL).strip() or PROTOCOL
    if protocol != PROTOCOL:
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: mcpsync exports over {PROTOCOL} only")
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ImportError("OTLP export needs the OpenTelemetry SDK and exporter: pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http") from exc
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "mcpsync"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    meter_provider = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    return tracer_provider, meter_provider
