"""A traced MCP server for the gateway trace and log tests, run as `mcpsync serve` in a child process:
it traces with the OpenTelemetry SDK and writes each finished span, as one JSON line, to the file
named by $TRACE_FILE, so the test can read what the child recorded."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mcpsync import Server, Service
from mcpsync.telemetry import Telemetry


class LinesExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self._path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self._path, "a", encoding="utf-8") as out:
            for span in spans:
                parent = span.parent
                out.write(json.dumps({
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace_id": format(span.context.trace_id, "032x"),
                    "span_id": format(span.context.span_id, "016x"),
                    "parent_id": format(parent.span_id, "016x") if parent is not None else None,
                }) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(LinesExporter(os.environ["TRACE_FILE"])))
service = Service("upstream")


@service.tool
def echo(text: str) -> str:
    """Says it back."""
    return text


@service.tool
def noisy(text: str) -> str:
    """Logs a warning while it runs."""
    logging.getLogger("traced").warning("working on %s", text)
    return text


server = Server("upstream", services=[service], telemetry=Telemetry(tracer_provider=provider))
