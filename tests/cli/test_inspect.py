"""`mcpsync inspect`: one readable page of what a server offers (or JSON), the page drawn by
`render` from listings (tested here on hostile and odd ones), and the command run on the embedded
demo over a real pipe in both eras: only what the server declares is listed."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from mcpsync.cli.inspecting import render

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)


def _page(**overrides: Any) -> dict[str, Any]:
    page: dict[str, Any] = {
        "serverInfo": {"name": "s", "version": "1"}, "protocolVersion": "2026-07-28", "capabilities": {"tools": {}}, "instructions": None,
        "tools": [], "prompts": [], "resources": [], "resourceTemplates": [],
    }
    page.update(overrides)
    return page


def test_a_tools_signature_is_read_from_its_schemas() -> None:
    tool = {
        "name": "plot", "description": "Plot points.\nSecond line not shown.",
        "inputSchema": {"type": "object", "required": ["points"], "properties": {
            "points": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
            "style": {"enum": ["line", "dots"], "default": "line"},
            "scale": {"type": ["number", "null"]},
            "label": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        }},
        "outputSchema": {"type": "object", "properties": {"url": {"type": "string"}, "size": {"type": "integer"}}},
    }
    lines = render(_page(tools=[tool]))
    [row] = [line for line in lines if line.lstrip().startswith("plot(")]
    assert row.split("  Plot")[0].strip() == 'plot(points: Point[], style?: "line"|"dots" = "line", scale?: number|null, label?: string|null) -> {url: string, size: integer}'
    assert row.endswith("Plot points.")


def test_the_heading_capabilities_extensions_and_empty_sections() -> None:
    page = _page(
        serverInfo={"name": "s", "version": "2", "title": "S", "websiteUrl": "https://s.example"},
        capabilities={"tools": {"listChanged": True}, "logging": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
        instructions="Use it well.\nTwice.",
    )
    lines = render(page)
    assert lines[:6] == [
        "s 2  (MCP 2026-07-28)", "  S", "  https://s.example", "capabilities: tools (listChanged), logging",
        "extensions: io.modelcontextprotocol/tasks", "instructions:",
    ]
    assert lines[6:8] == ["  Use it well.", "  Twice."]
    assert lines[lines.index("prompts (0):") + 1] == "  none"


def test_odd_listings_from_a_hostile_server_are_drawn_without_failing() -> None:
    odd = _page(
        serverInfo={}, capabilities={"tools": "yes", "weird": None},
        tools=[{"name": "x", "inputSchema": {"properties": {"a": "not a schema", "b": {"enum": list(range(20))}}}}, {}],
        prompts=[{"arguments": [{}]}], resources=[{"uri": "u"}], resourceTemplates=[{"name": "no template"}],
    )
    lines = render(odd)
    assert lines[0] == "?  (MCP 2026-07-28)"
    assert any("x(a?: any, b?: 0|1|2|3|4|5|...)" in line for line in lines)
    assert lines[lines.index("tools (2):") + 2] == "  ?()" and "  ?(??)" in lines and lines[-1] == "  ?"


def _inspect(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mcpsync", "inspect", *args, "--", sys.executable, "-m", "mcpsync", "serve"]
    return subprocess.run(command, capture_output=True, text=True, timeout=LONG * 3, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("modern", "2026-07-28")])
def test_inspect_prints_the_demo_on_one_page(mode: str, version: str) -> None:
    done = _inspect("--mode", mode)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"mcpsync-demo {__import__('mcpsync').__version__}  (MCP {version})"
    assert any(line.startswith("  add(a: integer, b: integer) -> ") and line.endswith("Add two integers.") for line in lines)
    for section in ("tools (5):", "prompts (1):", "resources (1):", "resource templates (1):"):
        assert section in lines
    assert any(line.startswith("  review_code(code, language?)") for line in lines)
    assert any(line.startswith("  demo://greeting/{name}  [text/plain]") for line in lines)


def test_inspect_json_holds_the_full_definitions() -> None:
    done = _inspect("--json")
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout)
    assert set(page) == {"serverInfo", "protocolVersion", "capabilities", "instructions", "tools", "prompts", "resources", "resourceTemplates"}
    assert {tool["name"] for tool in page["tools"]} == {"echo", "add", "word_stats", "countdown", "fail"}
    assert page["tools"][0]["inputSchema"]["type"] == "object"
