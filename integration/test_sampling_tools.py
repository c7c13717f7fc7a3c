"""Sampling with tools (MCP 2025-11-25, issue 29's gap) against the official Python SDK's client, in
both eras: mcpsync's tool offers the model a tool with `tools` and `toolChoice`, the SDK's sampling
callback (declaring `sampling.tools`) answers with a `tool_use` block, and the second question
carries the `tool_use` and its `tool_result`, all parsed by the SDK's own models."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("sdk_catalog_driver.py")
APP = Path(__file__).parent / "fixtures" / "sampling_tools_app.py"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_official_sdk_model_uses_the_tool_a_sampling_question_offers(peers_python: str, bounded: Any, mode: str) -> None:
    done = bounded([peers_python, str(DRIVER), "sample", mode, "--", sys.executable, "-m", "mcpsync", "serve", str(APP)], timeout=90)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["text"], seen["isError"]) == ("toolUse: the tool says sunny in Lisbon", False)
    first, second = seen["asked"]
    assert first == {"tools": ["lookup"], "toolChoice": "auto", "messages": [["text"]]}
    assert second == {"tools": ["lookup"], "toolChoice": None, "messages": [["text"], ["tool_use"], ["tool_result"]]}
