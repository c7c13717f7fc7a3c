"""The official Python SDK's client, tracing with OpenTelemetry (its own code, nobody's here),
calls `mcpsync serve`: mcpsync's server span continues the SDK's trace, its parent the SDK's client
span, read from the `traceparent` the SDK put in `params._meta`; in both eras, over stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DRIVER = REPO_ROOT / "integration" / "sdk_otel_driver.py"
UPSTREAM = REPO_ROOT / "tests" / "telemetry" / "traced_upstream.py"

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_mcpsync_continues_the_official_sdk_clients_trace(mode: str, peers_python: str, bounded: Any, tmp_path: Path) -> None:
    trace_file = tmp_path / "server-spans.jsonl"
    env = {"TRACE_FILE": str(trace_file), "PYTHONPATH": str(REPO_ROOT)}
    server = [sys.executable, "-m", "mcpsync", "serve", str(UPSTREAM)]
    result = bounded([peers_python, str(DRIVER), "--mode", mode, "--", *server], timeout=90.0, cwd=REPO_ROOT, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["text"] == "traced"
    [sdk_span] = summary["spans"]
    served = [json.loads(line) for line in trace_file.read_text().splitlines()]
    [call] = [span for span in served if span["name"] == "tools/call echo"]
    assert call["kind"] == "SERVER"
    assert (call["trace_id"], call["parent_id"]) == (sdk_span["trace_id"], sdk_span["span_id"])
