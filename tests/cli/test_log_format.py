"""`mcpsync serve --log-format json`: every line on stderr is one JSON object (time, level, logger,
message), and a line logged while a traced request runs carries that request's trace and span ids,
so a log pipeline joins it to the trace; the text format stays the default."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import mcpsync

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

TRACED = Path(__file__).resolve().parent.parent / "telemetry" / "traced_upstream.py"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def _serve(tmp_path: Path, *options: str, text: str = "the report") -> tuple[list[str], list[dict[str, str]]]:
    """Run the traced server with `options`, call its `noisy` tool (which logs `text`) inside a
    trace, and return its stderr lines and the spans it recorded."""
    spans_file, stderr_file = tmp_path / "spans.jsonl", tmp_path / "stderr.log"
    command = [sys.executable, "-m", "mcpsync", "serve", str(TRACED), "--log-level", "info", *options]
    with stderr_file.open("w") as stderr, mcpsync.connect(command, env={"TRACE_FILE": str(spans_file)}, stderr=stderr, timeout=LONG) as session:
        meta = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}
        assert session.request("tools/call", {"name": "noisy", "arguments": {"text": text}, "_meta": meta})["content"][0]["text"] == text
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    return stderr_file.read_text(encoding="utf-8").splitlines(), spans


def test_json_lines_carry_the_trace_of_the_request_that_logged_them(tmp_path: Path) -> None:
    lines, spans = _serve(tmp_path, "--log-format", "json")
    records = [json.loads(line) for line in lines]  # every line is one object
    assert records and all({"time", "level", "logger", "message"} <= set(record) for record in records)
    [working] = [record for record in records if record["message"] == "working on the report"]
    [served] = [span for span in spans if span["name"] == "tools/call noisy"]
    assert (working["level"], working["logger"]) == ("WARNING", "traced")
    assert (working["trace_id"], working["span_id"]) == (TRACE_ID, served["span_id"])
    assert working["time"].endswith("Z") and "T" in working["time"]
    assert all("trace_id" not in record for record in records if record is not working)  # no request current: no ids


def test_text_stays_the_default(tmp_path: Path) -> None:
    lines, _ = _serve(tmp_path)
    [working] = [line for line in lines if line.endswith("working on the report")]
    assert " WARNING traced: " in working and not working.startswith("{")


def test_a_message_a_client_wrote_cannot_break_or_forge_a_line(tmp_path: Path) -> None:
    """A tool logs what a client sent: line breaks of every kind Python splits on, a forged record,
    quotes, a NUL and a terminal escape stay inside one line's message, read back as sent."""
    hostile = 'x"\n{"level": "CRITICAL", "message": "forged"}\r\x0b\x0c\x1c\x85\u2028\u2029\x00\x1b[31m end'
    lines, _ = _serve(tmp_path, "--log-format", "json", text=hostile)
    records = [json.loads(line) for line in lines]  # every line, split as Python splits, is one object
    assert [record["message"] for record in records if "forged" in record["message"]] == [f"working on {hostile}"]
    assert all(record["level"] != "CRITICAL" for record in records)
