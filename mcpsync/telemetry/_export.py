"""Export configured the way `mcpsync serve --otel` and `--prometheus` ask (`Telemetry.from_environment`):
the one place mcpsync itself picks an SDK and exporters, since there the command line is the
application. Everything else takes the providers the application set up.

OTLP: over HTTP/protobuf (OTLP's default) or gRPC, as `OTEL_EXPORTER_OTLP_PROTOCOL` says (the
per-signal `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` and `..._METRICS_PROTOCOL` first); the exporters
read their endpoint, headers, timeout and compression from the `OTEL_EXPORTER_OTLP_*` variables
themselves; the SDK's `Resource.create()` reads `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`,
and its periodic reader `OTEL_METRIC_EXPORT_INTERVAL`.

Prometheus: the SDK's `PrometheusMetricReader` puts the metrics in prometheus_client's registry, and
prometheus_client's own HTTP server answers the scrapes on its own thread (`Scrape`, stopped by
`Telemetry.close`).
"""

from __future__ import annotations

import importlib
import os
import uuid
from typing import Any

PROTOCOL = "http/protobuf"
"""OTLP's default protocol."""
EXPORTERS = {
    "http/protobuf": ("opentelemetry-exporter-otlp-proto-http", "opentelemetry.exporter.otlp.proto.http"),
    "grpc": ("opentelemetry-exporter-otlp-proto-grpc", "opentelemetry.exporter.otlp.proto.grpc"),
}
"""The OTLP protocols mcpsync exports over: the exporter package of each, and its module. (OTLP's
`http/json` has no exporter in OpenTelemetry's Python SDK.)"""
STOP_WAIT = 2.0
"""Seconds the scrape server's thread gets to end once stopped."""


class Scrape:
    """prometheus_client's HTTP server answering scrapes at `url` (`/metrics`), on its own thread."""

    def __init__(self, host: str, port: int) -> None:
        from prometheus_client import start_http_server

        self._server, self._thread = start_http_server(port, addr=host)
        bound_host, bound_port = str(self._server.server_address[0]), int(self._server.server_address[1])
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.url = f"http://{shown}:{bound_port}/metrics"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(STOP_WAIT)


def providers(*, otlp: bool, prometheus: tuple[str, int] | None) -> tuple[Any, Any, Scrape | None]:
    """A tracer provider exporting batched spans by OTLP over HTTP (with `otlp`, else None: the
    global one, no-op unless the application set one), a meter provider whose metrics go out by
    OTLP (with `otlp`) and to a Prometheus scrape endpoint on `prometheus` (HOST, PORT), and that
    endpoint."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ImportError("exporting needs the OpenTelemetry SDK: pip install opentelemetry-sdk") from exc
    resource = Resource.create(_identity())
    readers: list[MetricReader] = []
    tracer_provider = None
    if otlp:
        span_exporter, metric_exporter = _otlp_exporters()
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        readers.append(PeriodicExportingMetricReader(metric_exporter))
    scrape = None
    if prometheus is not None:
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
        except ImportError as exc:
            raise ImportError("a Prometheus endpoint needs its exporter: pip install opentelemetry-exporter-prometheus") from exc
        readers.append(PrometheusMetricReader())
        scrape = Scrape(*prometheus)
    return tracer_provider, MeterProvider(resource=resource, metric_readers=readers), scrape


def _identity() -> dict[str, str]:
    """The resource attributes mcpsync adds: `service.name` (OTEL_SERVICE_NAME, else "mcpsync"),
    and, unless OTEL_RESOURCE_ATTRIBUTES names one, a `service.instance.id` of this process's
    own, so the workers of `serve --processes` (and replicas) that export the same service are
    told apart: their cumulative metrics would otherwise add up as one series that goes back and
    forth."""
    identity = {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "mcpsync"}
    named = (pair.split("=", 1)[0].strip() for pair in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","))
    if "service.instance.id" not in named:
        identity["service.instance.id"] = str(uuid.uuid4())
    return identity


def _otlp_exporters() -> tuple[Any, Any]:
    """The span and the metric exporters, each over the protocol the environment names for it."""
    return _exporter("TRACES", "trace_exporter", "OTLPSpanExporter"), _exporter("METRICS", "metric_exporter", "OTLPMetricExporter")


def _exporter(signal: str, module: str, name: str) -> Any:
    protocol = _protocol(signal)
    package, root = EXPORTERS[protocol]
    try:
        exporter = getattr(importlib.import_module(f"{root}.{module}"), name)
    except ImportError as exc:
        raise ImportError(f"OTLP export over {protocol} needs its exporter: pip install {package}") from exc
    return exporter()


def _protocol(signal: str) -> str:
    """The OTLP protocol of `signal` (TRACES, METRICS): its own variable, else the general one,
    else OTLP's default; ValueError for one mcpsync cannot export over."""
    for variable in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = os.environ.get(variable, "").strip()
        if protocol:
            if protocol not in EXPORTERS:
                raise ValueError(f"{variable}={protocol!r}: mcpsync exports over {' or '.join(EXPORTERS)}")
            return protocol
    return PROTOCOL
