"""OpenTelemetry traces and metrics for mcpsync's server and client, by the semantic conventions for
MCP (OpenTelemetry's `docs/gen-ai/mcp.md`).

Turn it on with a `Telemetry` given to a `Server` (`Server(..., telemetry=Telemetry())`) or to a
client session (`connect(..., telemetry=Telemetry())`); `mcpsync serve --otel` does the first, with
`Telemetry.from_environment()` (OTLP, configured by the standard `OTEL_*` variables).
Without one nothing of OpenTelemetry is imported and a request pays nothing. With one, mcpsync
uses the OpenTelemetry API only (the `otel` extra: `pip install 'mcpsync[otel]'`); which SDK,
exporters and sampler record what it reports is the application's choice, made the usual way
(`trace.set_tracer_provider`, `metrics.set_meter_provider`) or given here.

What it reports:

- a SERVER span for every request the server runs (and every notification it receives), named
  `{mcp.method.name} {target}` (the tool's or prompt's name), with the conventions' attributes;
  its parent is the trace context the client put in the request's `params._meta` (`traceparent`,
  `tracestate`, `baggage`, reserved for this by the 2026-07-28 revision), and the context current
  when it began (an HTTP server span, say) is linked to it. While a tool runs its span is the
  current one, so the tool's own spans are its children;
- a CLIENT span for every request and notification the client sends, whose context goes into its
  `params._meta`; so a call through a gateway is one trace, client → gateway → upstream;
- a CLIENT span for what the server sends on behalf of a request (its notifications, its questions
  to the client, what a listen is told), the request's child, and a SERVER span for each on the
  client that answers or hears it;
- the histograms `mcp.server.operation.duration` and `mcp.client.operation.duration`, and the
  sessions' `mcp.client.session.duration` and `mcp.server.session.duration`, in seconds;
- an operator's gauges of each server: `mcpsync.server.requests.active`, `.streams.active`,
  `.sessions.active`, `.tasks.active`, `.workers.busy` and `.workers.max` (saturated when equal),
  and `.store.reachable` with a shared store.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..engine.observer import Observer
    from ..transport.lifecycle.load import Load
    from ._export import Scrape
    from ._otel import ClientObserver

__all__ = ["Telemetry"]


class Watched(Protocol):
    """What the gauges read of a server (a `Server`)."""

    @property
    def name(self) -> str: ...

    def load(self) -> Load: ...

    def store_reachable(self) -> bool | None: ...


class Telemetry:
    """Where mcpsync's spans and measurements go: `tracer_provider` and `meter_provider` (None: the
    global ones OpenTelemetry has when the first request comes). One may serve several servers and
    clients.

    Raises:
        ImportError: the OpenTelemetry API is not installed (the `otel` extra).
    """

    def __init__(self, *, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        try:
            from . import _otel
        except ImportError as exc:
            raise ImportError("Telemetry needs the OpenTelemetry API: pip install 'mcpsync[otel]'") from exc
        self._otel = _otel
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._lock = threading.Lock()
        self._instruments: _otel.Instruments | None = None
        self._scrape: Scrape | None = None  # a Prometheus endpoint from_environment started

    @classmethod
    def from_environment(cls, *, otlp: bool = True, prometheus: tuple[str, int] | None = None) -> Telemetry:
        """Telemetry that exports the way `mcpsync serve --otel` and `--prometheus` do. With
        `otlp`: by OTLP as OpenTelemetry's environment variables say, the SDK's tracer and meter
        providers with the resource of `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`, spans
        batched and metrics read every `OTEL_METRIC_EXPORT_INTERVAL` ms, sent to
        `OTEL_EXPORTER_OTLP_ENDPOINT` (or the per-signal variables) over the protocol
        `OTEL_EXPORTER_OTLP_PROTOCOL` (or the per-signal one) names: `http/protobuf` (OTLP's
        default) or `grpc`. With `prometheus` (HOST, PORT; port 0: any free one): the metrics
        also answer scrapes at `prometheus_url`, until `close()`.

        Raises:
            ImportError: the OpenTelemetry SDK or the exporter asked for is not installed.
            ValueError: a protocol variable names one there is no exporter for (`http/json`).
            OSError: the Prometheus address cannot be bound.
        """
        from ._export import providers

        tracer_provider, meter_provider, scrape = providers(otlp=otlp, prometheus=prometheus)
        made = cls(tracer_provider=tracer_provider, meter_provider=meter_provider)
        made._scrape = scrape
        return made

    @property
    def prometheus_url(self) -> str | None:
        """Where Prometheus scrapes the metrics (`from_environment(prometheus=...)`), else None."""
        return self._scrape.url if self._scrape is not None else None

    def flush(self, timeout: float = 5.0) -> None:
        """Export what the providers still hold, within about `timeout` seconds each (a process
        about to exit calls this: `mcpsync serve` does). Providers without a flush (the API's
        no-op ones) are left alone."""
        self._otel.flush(self._tracer_provider, self._meter_provider, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """`flush()`, then stop the Prometheus endpoint this object started, if any (`mcpsync
        serve` calls this as it stops)."""
        self.flush(timeout)
        if self._scrape is not None:
            self._scrape.stop()
            self._scrape = None

    def _made(self) -> Any:
        """The tracer and the histograms, made once, at first use (the global providers may be set
        after this object is made, as long as it is before serving)."""
        with self._lock:
            if self._instruments is None:
                self._instruments = self._otel.Instruments(self._tracer_provider, self._meter_provider)
            return self._instruments

    def server_observer(self) -> Observer:
        """What a `Server`'s engine calls around each request (`Engine(observer=...)`)."""
        return self._otel.ServerObserver(self._made)

    def watch(self, server: Watched) -> None:
        """Report `server`'s gauges (`Server.load`, its tasks, its store) as the meter collects;
        `Server.use_telemetry` calls this."""
        self._made().gauges.watch(server)

    def client_observer(self) -> ClientObserver:
        """What a client session calls around each request it sends."""
        return self._otel.ClientObserver(self._made)
