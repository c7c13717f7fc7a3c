"""Call an mcpsync server's ``echo`` tool with the *official* Python SDK client, its OpenTelemetry
tracing turned on the way a user of the SDK turns it on (the OpenTelemetry SDK installed, a global
tracer provider set), and print the SDK's client spans. Run it with the peers venv's python::

    .venv-peers/bin/python integration/sdk_otel_driver.py --mode legacy -- python -m mcpsync serve X

The SDK puts its client span's context into the request's ``params._meta`` (``traceparent``):
the test compares the span printed here with the server span mcpsync recorded.

Output: ONE JSON object on stdout, exit 0: ``{"text": ..., "spans": [{"name", "trace_id",
"span_id"}]}``; on failure the error goes to stderr and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

MODES = {"legacy": "legacy", "modern": "auto"}


async def run(args: argparse.Namespace, exporter: InMemorySpanExporter) -> dict[str, Any]:
    params = StdioServerParameters(command=args.server[0], args=args.server[1:], env=dict(os.environ), cwd=os.getcwd())
    async with Client(stdio_client(params), mode=MODES[args.mode], read_timeout_seconds=30) as client:
        result = await client.call_tool("echo", {"text": "traced"})
    spans = [
        {"name": span.name, "trace_id": format(span.context.trace_id, "032x"), "span_id": format(span.context.span_id, "016x")}
        for span in exporter.get_finished_spans()
        if span.kind is SpanKind.CLIENT and "tools/call" in span.name
    ]
    return {"text": "".join(getattr(block, "text", "") for block in result.content), "spans": spans}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    parser.add_argument("server", nargs=argparse.REMAINDER, help="the server command, after --")
    args = parser.parse_args()
    if args.server and args.server[0] == "--":
        args.server = args.server[1:]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    try:
        summary = anyio.run(run, args, exporter)
    except Exception as exc:  # noqa: BLE001 - a driver reports whatever stopped it
        print(f"sdk_otel_driver: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
