"""Log records as one JSON object per line, for log pipelines (`mcpsync serve --log-format json`).

Each line has `time` (UTC, ISO 8601 with milliseconds), `level`, `logger` and `message`, the
formatted `exception` when there is one, and, while a traced request is current on the logging
thread (`mcpsync.telemetry`), its `trace_id` and `span_id` in W3C's hex form, so a log line joins
its trace. OpenTelemetry is looked up only if something has imported it already: logging never
imports it, and costs nothing more with telemetry off.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import ujson


class JsonFormatter(logging.Formatter):
    """One JSON object per record; see the module docstring."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        line.update(_trace_ids())
        return ujson.dumps(line, ensure_ascii=False, escape_forward_slashes=False).translate(_LINE_BREAKS)


_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}
"""The line breaks JSON leaves raw in a string (it escapes only those below U+0020), escaped, so a
message that carries them (a tool logging what a client sent) is still one line to a reader that
splits where Python's `str.splitlines` does."""


def _trace_ids() -> dict[str, str]:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return {}
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": format(context.trace_id, "032x"), "span_id": format(context.span_id, "016x")}
